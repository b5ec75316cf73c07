"""The games registry: one shared conformance check run for every game in envs.GAMES (in the spirit of pgx.api_test).

For each game one jitted program plays a batch of uniformly random legal games to the end inside `lax.while_loop`;
for the games that end in a draw at their ply cap, two more games in the batch probe the cap by starting with their ply
counters fast-forwarded to just below it. Everything about a game is checked in one test, so the game's program is
compiled once (chess and shogi take ~10-20 s each to build and compile on CPU) whatever pytest-xdist does.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs

# Programs that compile for far longer than they run: XLA's optimisation passes off (conftest.py).
pytestmark = pytest.mark.usefixtures("fast_compiles")

ALL_GAMES = list(envs.GAMES)
DRAW_AT_CAP = [name for name, spec in envs.GAMES.items() if spec.cap_rule == "draw"]
# Chess, shogi and 19×19 Go are slow to step on CPU (random chess and shogi games often last 512 plies): 2 games.
HEAVY = {"chess", "shogi", "go_19x19"}


def _fast_forward(state, plies: jax.Array):
    """`state` (batched [n, ...]) with pgx's ply counters set as if `plies` [n] plies had been played; the position
    is unchanged.

    Uses pgx's private fields: the wrapper's `_step_count` (gardner_chess and animal_shogi end the game on it), and
    for chess and shogi also the game state's `_x.step_count` (the counter their rules test against the cap)."""
    state = state.replace(_step_count=plies)
    if hasattr(state, "_x") and hasattr(state._x, "step_count"):
        state = state.replace(_x=state._x._replace(step_count=plies))
    return state


@functools.partial(jax.jit, static_argnums=(0, 2, 3, 4))
def _play_random_games(env, rng_key, num_games: int, max_length: int, probe_cap: bool):
    """Plays uniformly random legal games until all have ended or `max_length` + 1 plies have passed.

    The batch is `num_games` fresh games, followed, if `probe_cap`, by two fresh games whose ply counters are
    fast-forwarded to max_length − 2 and max_length − 1. Returns the first initial state, and per game [n]: ended,
    plies played, summed rewards [n, 2], illegal actions taken, non-terminal states seen with no legal action."""
    init_key, probe_key, play_key = jax.random.split(rng_key, 3)
    state = jax.vmap(env.init)(jax.random.split(init_key, num_games))
    initial = jax.tree.map(lambda x: x[0], state)
    if probe_cap:
        probes = _fast_forward(
            jax.vmap(env.init)(jax.random.split(probe_key, 2)), jnp.int32([max_length - 2, max_length - 1])
        )
        state = jax.tree.map(lambda *x: jnp.concatenate(x), state, probes)
    size = state.current_player.shape[0]
    zeros = jnp.zeros(size, jnp.int32)

    def running(carry):
        state, t = carry[0], carry[1]
        return (~(state.terminated | state.truncated)).any() & (t <= max_length)

    def ply(carry):
        state, t, length, total, illegal, stuck, key = carry
        key, action_key = jax.random.split(key)
        over = state.terminated | state.truncated  # [n]
        action = jax.random.categorical(action_key, jnp.where(state.legal_action_mask, 0.0, -jnp.inf))
        legal = jnp.take_along_axis(state.legal_action_mask, action[:, None], axis=1)[:, 0]
        illegal = illegal + (~over & ~legal)
        stuck = stuck + (~over & ~state.legal_action_mask.any(axis=1))
        state = jax.vmap(env.step)(state, action)
        return state, t + 1, length + ~over, total + state.rewards, illegal, stuck, key

    carry = (state, 0, zeros, jnp.zeros((size, 2)), zeros, zeros, play_key)
    state, _, length, total, illegal, stuck, _ = jax.lax.while_loop(running, ply, carry)
    return initial, {
        "ended": state.terminated | state.truncated,
        "length": length,
        "rewards": total,
        "illegal": illegal,
        "stuck": stuck,
    }


def test_the_draw_at_cap_games_are_the_chess_family():
    assert sorted(DRAW_AT_CAP) == ["animal_shogi", "chess", "gardner_chess", "shogi"]


@pytest.mark.parametrize("name", ALL_GAMES)
def test_game_conforms(name):
    env, spec = envs.make_env(name)
    assert spec is envs.GAMES[name] and spec.name == name == env.id
    # Spec fields are consistent.
    assert 0.0 < spec.dirichlet_alpha <= 1.0
    assert spec.temperature_moves >= 0
    assert spec.max_length > 0
    assert spec.typical_legal_moves > 0
    assert spec.cap_rule in ("draw", "scored", "none")
    assert env.num_players == 2

    num_games = 2 if name in HEAVY else 16
    probe_cap = spec.cap_rule == "draw"
    initial, out = jax.tree.map(
        np.asarray, _play_random_games(env, jax.random.key(20240601), num_games, spec.max_length, probe_cap)
    )
    # The shapes the network is built from match a real initial state.
    assert initial.observation.shape == env.observation_shape
    assert initial.legal_action_mask.shape == (env.num_actions,)
    assert initial.rewards.shape == (2,)
    assert initial.legal_action_mask.any() and not initial.terminated
    # Every game ended within the cap, and the sampler never met a running game without a legal action.
    assert out["ended"].all(), f"games still running after {spec.max_length} plies: lengths {out['length']}"
    assert (out["length"] >= 1).all() and (out["length"] <= spec.max_length).all(), out["length"]
    assert (out["illegal"] == 0).all() and (out["stuck"] == 0).all()
    # Terminal rewards: each player's in {-1, 0, +1}, and zero-sum.
    rewards = out["rewards"]
    assert np.isin(rewards, [-1.0, 0.0, 1.0]).all(), rewards
    np.testing.assert_array_equal(rewards.sum(axis=1), 0.0)
    if spec.cap_rule == "scored":
        # Go is scored by area with komi 7.5: integer areas never tie, so every game, cut at the cap or not, is won.
        np.testing.assert_array_equal(np.abs(rewards), 1.0)
    if probe_cap:
        # A game that reaches max_length ends as a draw. Random games that ran into the cap (random chess and shogi
        # often do) are draws:
        at_cap = out["length"][:num_games] == spec.max_length
        np.testing.assert_array_equal(rewards[:num_games][at_cap], 0.0)
        # and so are the two probe games at the end of the batch, which started from the opening position with
        # their ply counters fast-forwarded. Started at max_length − 2 plies: its first move (ply max_length − 1)
        # does not end it, its second (ply max_length) does -> it lasts exactly 2 plies. This pins pgx's cap to the
        # spec's max_length, not one off. Started at max_length − 1: its first move ends it -> 1 ply. Both end near
        # the opening position, nobody mated and material even, so only the cap ended them: rewards [0, 0].
        np.testing.assert_array_equal(out["length"][num_games:], [2, 1])
        assert out["ended"][num_games:].all()
        np.testing.assert_array_equal(rewards[num_games:], [[0.0, 0.0], [0.0, 0.0]])


def test_unknown_game_raises_listing_the_allowed_games():
    with pytest.raises(envs.UnknownGameError) as info:
        envs.get_game("nope")
    message = str(info.value)
    assert "'nope'" in message
    for name in envs.GAMES:
        assert name in message
    # A ValueError, so callers (config.validate) can catch it as one.
    assert isinstance(info.value, ValueError)
    with pytest.raises(envs.UnknownGameError):
        envs.make_env("nope")
    assert envs.game_names() == ALL_GAMES
