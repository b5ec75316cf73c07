"""The games registry: one shared conformance check run for every game in envs.GAMES (in the spirit of pgx.api_test).

For each game one jitted program plays a batch of uniformly random legal games to the end inside `lax.while_loop`;
for the games that end in a draw at their ply cap, the same program (same shapes, so compiled once) then plays a batch
of probe games that start with their ply counters fast-forwarded to just below the cap. Everything about a game is
checked in one test, so the game's program is compiled once (chess and shogi take ~10-20 s each to build and compile
on CPU) whatever pytest-xdist does.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs

ALL_GAMES = list(envs.GAMES)
DRAW_AT_CAP = [name for name, spec in envs.GAMES.items() if spec.cap_rule == "draw"]
# Chess, shogi and 19×19 Go are slow to step on CPU (random chess and shogi games often last 512 plies): 2 games.
HEAVY = {"chess", "shogi", "go_19x19"}
# The programs compile for far longer than they run, so XLA's optimisation passes are off (conftest.py's
# `fast_compiles`), except for 19×19 Go: its 2 games of 722 plies run ~11 s of CPU unoptimised and ~1 s optimised,
# more than the ~4 s the passes add to its compile.
OPTIMISED = {"go_19x19"}


def _fast_forward(state, plies: jax.Array):
    """`state` (batched [n, ...]) with pgx's ply counters set as if `plies` [n] plies had been played; the position
    is unchanged.

    Uses pgx's private fields: the wrapper's `_step_count` (gardner_chess and animal_shogi end the game on it), and
    for chess and shogi also the game state's `_x.step_count` (the counter their rules test against the cap)."""
    state = state.replace(_step_count=plies)
    if hasattr(state, "_x") and hasattr(state._x, "step_count"):
        state = state.replace(_x=state._x._replace(step_count=plies))
    return state


@functools.partial(jax.jit, static_argnums=(0, 2))
def _play_random_games(env, rng_key, max_length: int, stream: jax.Array, start_plies: jax.Array):
    """Plays uniformly random legal games until all have ended or `max_length` + 1 plies have passed.

    The batch is n = len(start_plies) fresh games, game i with its ply counters fast-forwarded to start_plies[i] (0:
    a game from the start). `stream` (0 or 1) picks the batch's init and play keys out of 4 split from `rng_key`, so
    two batches share no key. Both are traced arguments, so a random batch and a probe batch of the same n run one
    compiled program. Returns the first initial state, and per game [n]: ended, plies played, summed rewards [n, 2],
    illegal actions taken, non-terminal states seen with no legal action."""
    # split(k, 4)[:3] == split(k, 3) (threefry-partitionable keys): stream 0 has the keys, so the games, it had when
    # the probes rode in the same batch (keys 0 and 2), and shogi's two random games still run into the 512-ply cap.
    keys = jax.random.split(rng_key, 4)
    init_key, play_key = keys[stream], keys[2 + stream]
    size = start_plies.shape[0]
    state = jax.vmap(env.init)(jax.random.split(init_key, size))
    initial = jax.tree.map(lambda x: x[0], state)
    state = _fast_forward(state, start_plies)  # fresh games: the counters' 0 from env.init, unchanged
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


def _declared_shapes(env) -> tuple[tuple[int, ...], int]:
    """pgx's `env.observation_shape` and `env.num_actions`, the shapes the network is built from.

    Both properties call `env.init` (and observe) on a concrete key; read inside `jax.eval_shape`, the same code runs
    on abstract values, so it is traced instead of executed op by op, which would compile one XLA program per
    operation (~200 for animal_shogi, tens of seconds on CPU). The shapes are the same: they do not depend on values."""
    declared = {}

    def read():
        declared["observation_shape"] = env.observation_shape
        declared["num_actions"] = env.num_actions

    jax.eval_shape(read)
    return declared["observation_shape"], declared["num_actions"]


def _check_ended_legally(out: dict, spec) -> None:
    """Every game of a batch ended within the cap, the sampler never met a running game without a legal action, and
    the terminal rewards are each player's in {-1, 0, +1} and zero-sum."""
    assert out["ended"].all(), f"games still running after {spec.max_length} plies: lengths {out['length']}"
    assert (out["length"] >= 1).all() and (out["length"] <= spec.max_length).all(), out["length"]
    assert (out["illegal"] == 0).all() and (out["stuck"] == 0).all()
    rewards = out["rewards"]
    assert np.isin(rewards, [-1.0, 0.0, 1.0]).all(), rewards
    np.testing.assert_array_equal(rewards.sum(axis=1), 0.0)


@pytest.mark.parametrize("name", ALL_GAMES)
def test_game_conforms(name, request):
    if name not in OPTIMISED:
        request.getfixturevalue("fast_compiles")
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
    key = jax.random.key(20240601)
    initial, out = jax.tree.map(
        np.asarray, _play_random_games(env, key, spec.max_length, np.int32(0), np.zeros(num_games, np.int32))
    )
    # The shapes the network is built from match a real initial state.
    observation_shape, num_actions = _declared_shapes(env)
    assert initial.observation.shape == observation_shape
    assert initial.legal_action_mask.shape == (num_actions,)
    assert initial.rewards.shape == (2,)
    assert initial.legal_action_mask.any() and not initial.terminated
    _check_ended_legally(out, spec)
    rewards = out["rewards"]
    if spec.cap_rule == "scored":
        # Go is scored by area with komi 7.5: integer areas never tie, so every game, cut at the cap or not, is won.
        np.testing.assert_array_equal(np.abs(rewards), 1.0)
    if spec.cap_rule == "draw":
        # A game that reaches max_length ends as a draw. Random games that ran into the cap (random chess and shogi
        # often do) are draws:
        at_cap = out["length"] == spec.max_length
        np.testing.assert_array_equal(rewards[at_cap], 0.0)
        # and so are the probe games, played by the same program from the opening position with their ply counters
        # fast-forwarded, alternately to max_length − 2 and max_length − 1 (num_games is even). Started at
        # max_length − 2 plies: its first move (ply max_length − 1) does not end it, its second (ply max_length)
        # does -> it lasts exactly 2 plies. This pins pgx's cap to the spec's max_length, not one off. Started at
        # max_length − 1: its first move ends it -> 1 ply. All end near the opening position, nobody mated and
        # material even, so only the cap ended them: rewards [0, 0].
        start = np.int32([spec.max_length - 2, spec.max_length - 1] * (num_games // 2))
        _, probes = jax.tree.map(np.asarray, _play_random_games(env, key, spec.max_length, np.int32(1), start))
        _check_ended_legally(probes, spec)
        np.testing.assert_array_equal(probes["length"], [2, 1] * (num_games // 2))
        np.testing.assert_array_equal(probes["rewards"], np.zeros((num_games, 2)))


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
