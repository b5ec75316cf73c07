"""Value targets z: the sign for each mover, draws, games ended by the ply cap, and games spanning iterations.

First through replay.add / replay.resolve with real pgx games played move by move (hand-checkable z for every
position), then end to end through selfplay.play on tic-tac-toe, checked for consistency row by row.

Tic-tac-toe actions are cells 0..8 row-major. The player to move first is pgx's random choice, so expectations are
written per ply: ply 0 is the first mover ("X"), ply 1 the second ("O"), and so on.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from az_jax.core import replay, search, selfplay

from conftest import tiny_network, tiny_variables

# Programs that compile for far longer than they run: XLA's optimisation passes off (conftest.py).
pytestmark = pytest.mark.usefixtures("fast_compiles")


@functools.cache
def _jitted_env(name: str):
    env, spec = envs.make_env(name)
    return env, spec, jax.jit(env.init), jax.jit(env.step)


def _record_game(name, moves, start_plies=0, key=0):
    """Plays `moves` (action indices) in one game (B = 1), writing each position to a fresh buffer and resolving
    when the game ends, as selfplay.play does. `start_plies` fast-forwards pgx's ply counters first (private fields
    `_step_count` / `_x.step_count`; the position stays the opening one; for Go keep it even, as the colour to move
    is the ply count's parity).

    Returns (buffer with rows 0..len(moves)-1, final state)."""
    env, _, init, step = _jitted_env(name)
    state = init(jax.random.key(key))
    if start_plies:
        state = state.replace(_step_count=jnp.int32(start_plies))
        if hasattr(state, "_x") and hasattr(state._x, "step_count"):
            state = state.replace(_x=state._x._replace(step_count=jnp.int32(start_plies)))
    buffer = replay.init(len(moves), env.observation_shape, state.observation.dtype, env.num_actions)
    episode = jnp.zeros(1, jnp.int32)
    for ply, move in enumerate(moves):
        assert not state.terminated, f"game ended before ply {ply}"
        policy = state.legal_action_mask / state.legal_action_mask.sum()
        buffer = replay.add(
            buffer,
            jnp.int32(ply),
            state.observation[None],
            policy[None],
            state.legal_action_mask[None],
            state.current_player[None],
            episode,
        )
        state = step(state, jnp.int32(move))
        buffer = replay.resolve(buffer, state.terminated[None], episode, state.rewards[None])
    return buffer, state


@pytest.mark.parametrize(
    "moves,expected",
    [
        # X: 0 1 2 (top row) wins on ply 4. X moved on plies 0, 2, 4 -> +1; O on plies 1, 3 -> −1.
        ([0, 3, 1, 4, 2], [1, -1, 1, -1, 1]),
        # O: 3 4 5 (middle row) wins on ply 5. O moved on plies 1, 3, 5 -> +1; X on plies 0, 2, 4 -> −1.
        ([0, 3, 1, 4, 8, 5], [-1, 1, -1, 1, -1, 1]),
        # X 0 4 8 ... ends full with no line:  X O X / X O O / O X X  -> a draw: every position 0.
        ([0, 4, 8, 1, 7, 6, 2, 5, 3], [0, 0, 0, 0, 0, 0, 0, 0, 0]),
    ],
)
@pytest.mark.parametrize("key", [0, 1])  # pgx gives the first move to player id 0 for one key, id 1 for the other
def test_outcome_is_from_each_movers_point_of_view(moves, expected, key):
    buffer, state = _record_game("tic_tac_toe", moves, key=key)
    assert state.terminated
    np.testing.assert_array_equal(buffer.outcome, expected)
    assert buffer.done.all() and not buffer.pending.any()
    # Movers alternate between the two player ids, and z = rewards[mover] for each of them.
    players = np.asarray(buffer.player)
    assert (players[1:] != players[:-1]).all()
    np.testing.assert_array_equal(buffer.outcome, np.asarray(state.rewards)[players])


def test_first_mover_alternates_between_player_ids_over_keys():
    # The key parametrisation above only covers both player ids if the two keys give different first movers.
    _, _, init, _ = _jitted_env("tic_tac_toe")
    assert init(jax.random.key(0)).current_player != init(jax.random.key(1)).current_player


def test_unfinished_game_stays_pending():
    buffer, state = _record_game("tic_tac_toe", [0, 3, 1, 4])  # X threatens 2 but has not played it
    assert not state.terminated
    assert buffer.pending.all() and not buffer.done.any()
    np.testing.assert_array_equal(buffer.outcome, 0.0)


def test_go_cut_at_the_cap_is_scored():
    # (The "draw" cap rule needs no test of its own here: test_envs.py checks that chess, shogi, gardner_chess and
    # animal_shogi end at max_length with rewards [0, 0], and a [0, 0] ending gives every position z = 0, as the draw
    # above shows.)
    # go_9x9 is scored by area (Tromp–Taylor, komi 7.5) at its cap of 2·81 = 162 plies. From ply 160 (black to move,
    # as on every even ply) black plays 0 (a1 corner) and white 80 (the opposite corner). Area: black 1 stone, white
    # 1 stone, the 79 empty points touch both colours and count for neither. 1 < 1 + 7.5 -> white wins:
    # black's position (ply 0) z = −1, white's position (ply 1) z = +1.
    spec = envs.GAMES["go_9x9"]
    assert spec.cap_rule == "scored" and spec.max_length == 162
    buffer, state = _record_game("go_9x9", [0, 80], start_plies=spec.max_length - 2)
    assert state.terminated
    np.testing.assert_array_equal(buffer.outcome, [-1.0, 1.0])
    assert buffer.done.all()


# --- end to end: selfplay.play ---------------------------------------------------------------------------------------
NUM_GAMES = 8
PLIES_PER_CALL = 4  # < 5, the shortest tic-tac-toe game: nothing can end during the first call
NUM_CALLS = 3  # 12 plies ≥ 9, the longest game: every first game has ended after the third call


def _selfplay_run():
    """Three calls of selfplay.play (4 plies each) on 8 tic-tac-toe games with a small random network.

    Returns a list of (games state, buffer, metrics) after each call, as numpy. Capacity 96 = 3 · 4 · 8 holds every
    row without wrap-around: ply t, game b is row 8·t + b."""
    env, _, _, _ = _jitted_env("tic_tac_toe")
    net = tiny_network(env.num_actions)
    obs = env.init(jax.random.key(0)).observation
    variables = tiny_variables(net, obs[None].astype(jnp.float32), seed=1)
    apply_fn = lambda v, o: net.apply(v, o, train=False)
    settings = selfplay.SelfPlayConfig(
        search=search.SearchConfig(num_simulations=8, algorithm="puct", dirichlet_fraction=0.25, dirichlet_alpha=1.0),
        num_plies=PLIES_PER_CALL,
        sampling_moves=2,
    )
    play = jax.jit(
        lambda v, games, buffer, key, first_ply: selfplay.play(
            env, apply_fn, v, settings, games, buffer, key, first_ply
        )
    )
    games = selfplay.init(env, jax.random.key(2), NUM_GAMES)
    buffer = replay.init(NUM_CALLS * PLIES_PER_CALL * NUM_GAMES, env.observation_shape, obs.dtype, env.num_actions)
    results = []
    for call, key in enumerate(jax.random.split(jax.random.key(3), NUM_CALLS)):
        games, buffer, metrics = play(variables, games, buffer, key, jnp.int32(call * PLIES_PER_CALL))
        results.append(jax.tree.map(np.asarray, (games, buffer, metrics)))
    return results


def _rows(slot: int, num_calls: int) -> np.ndarray:
    """Rows written for `slot` in the first `num_calls` calls, in ply order."""
    return np.arange(num_calls * PLIES_PER_CALL) * NUM_GAMES + slot


def test_selfplay_targets_across_calls():
    # One test for both checks below, so that the self-play program is compiled once whatever pytest-xdist does.
    results = _selfplay_run()
    _check_positions_wait_for_their_game_to_end(results)
    _check_outcomes_alternate_with_the_mover_and_the_last_mover_wins(results)


def _check_positions_wait_for_their_game_to_end(results):
    (games1, buffer1, metrics1), (games2, buffer2, metrics2), _ = results
    first_call_rows = np.arange(PLIES_PER_CALL * NUM_GAMES)
    # After the first call: 4 plies of 8 games, no game can have ended -> 32 pending rows, none sampleable.
    assert metrics1["games"] == 0
    assert buffer1.pending[first_call_rows].all() and not buffer1.done.any()
    np.testing.assert_array_equal(games1.ply, PLIES_PER_CALL)
    np.testing.assert_array_equal(games1.episode, 0)
    # After the second call, a first-call row is done exactly when its slot's game ended in the second call.
    ended = games2.episode == 1  # [8]
    assert ended.any() and metrics2["games"] == ended.sum()
    for slot in range(NUM_GAMES):
        rows = _rows(slot, 1)
        assert (buffer2.done[rows] == ended[slot]).all() and (buffer2.pending[rows] == ~ended[slot]).all()
        # The outcome is the one written in the second call (the first call left it 0).
        if ended[slot]:
            assert (np.abs(buffer2.outcome[rows]) == np.abs(buffer2.outcome[rows][0])).all()


def _check_outcomes_alternate_with_the_mover_and_the_last_mover_wins(results):
    games, buffer, _ = results[-1]
    decisive = draws = 0
    for slot in range(NUM_GAMES):
        rows = _rows(slot, NUM_CALLS)
        for episode in np.unique(buffer.episode[rows]):
            game = rows[buffer.episode[rows] == episode]  # this game's rows, by ply
            n = len(game)
            # The rows are this game's positions in order: position k has k stones on the board.
            np.testing.assert_array_equal(buffer.observation[game].reshape(n, -1).sum(axis=1), np.arange(n))
            players = buffer.player[game]
            assert (players[1:] != players[:-1]).all(), "movers must alternate"
            np.testing.assert_array_equal(buffer.legal[game].sum(axis=1), 9 - np.arange(n))
            np.testing.assert_allclose(buffer.policy[game].sum(axis=1), 1.0, rtol=1e-5)
            assert (buffer.policy[game][~buffer.legal[game]] == 0).all()
            if not buffer.done[game].any():
                # Still running: it is the slot's current game, all its rows pending.
                assert buffer.pending[game].all()
                assert games.episode[slot] == episode and games.ply[slot] == n
                continue
            assert buffer.done[game].all() and not buffer.pending[game].any()
            z = buffer.outcome[game]
            if (z == 0).all():
                # A draw needs a full board: 9 plies.
                assert n == 9
                draws += 1
            else:
                # Tic-tac-toe is won only on the winner's own move: the last mover (ply n−1) gets +1, and the sign
                # flips every ply before it: z_k = (−1)^(n−1−k). E.g. n = 5: [+1, −1, +1, −1, +1].
                np.testing.assert_array_equal(z, (-1.0) ** (n - 1 - np.arange(n)))
                assert n >= 5
                decisive += 1
    assert decisive >= 1
    # Every first game has ended by ply 12; the summed metrics agree with what is in the buffer.
    totals = {k: sum(m[k] for _, _, m in results) for k in ("games", "game_length", "decisive")}
    assert totals["games"] == games.episode.sum() == decisive + draws
    assert totals["decisive"] == decisive
    assert totals["game_length"] == buffer.done.sum()
    assert (games.episode >= 1).all()
