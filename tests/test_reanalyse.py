"""Reanalyse (az_jax/core/reanalyse.py): stored positions searched again, their policy targets rewritten, nothing else.

Positions are connect four's, written into a buffer that keeps their game states the way self-play writes them.
"""

import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest
from test_resume import TINY

from az_jax.core import iteration as iteration_lib
from az_jax.core import reanalyse, replay
from az_jax.core import search as search_lib
from az_jax.core.config import Config, ConfigError
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.evaluation.in_training import train_and_evaluate

from conftest import TINY_NETWORK

A = 7  # connect four's columns


def _position(moves):
    env = pgx.make("connect_four")
    state = env.init(jax.random.key(0))
    for column in moves:
        state = env.step(state, jnp.int32(column))
    return env, state


def _buffer_with(states, capacity, policy, done):
    """A buffer of `capacity` rows whose first len(states) rows hold `states` (a list of single states), each with
    `policy` [A] as its target; `done` [len(states)] bool: outcome known (else pending)."""
    buffer = replay.init(capacity, (6, 7, 2), jnp.bool_, A, keep_search_value=True, state_example=states[0])
    batched = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    n = len(states)
    buffer = replay.add(
        buffer,
        jnp.int32(0),
        batched.observation,
        jnp.tile(policy, (n, 1)),
        batched.legal_action_mask,
        batched.current_player,
        jnp.zeros(n, jnp.int32),
        search_value=jnp.full(n, -0.5),
        state=batched,
    )
    ended = jnp.pad(jnp.asarray(done), (0, capacity - n))  # [capacity]
    return buffer.replace(done=buffer.done | ended, pending=buffer.pending & ~ended)


def _search():
    config = Config(game="connect_four", search="puct", num_simulations=64, dirichlet_fraction=0.0)
    return search_lib.SearchConfig.for_selfplay(config)


def _network_variables(env):
    setup = iteration_lib.make_setup(override(preset("connect_four", "small"), TINY_NETWORK))
    return setup.apply_fn, iteration_lib.init_variables(setup, jax.random.key(1))


def test_a_stale_target_is_replaced_by_the_new_search_and_nothing_else_moves():
    # Columns 0,1,0,1,0,1: the first player has three stones stacked in column 0 and is to move, so column 0 wins at
    # once (a terminal reward +1) while every other move leads to positions the untrained network values near 0. The
    # stored target says column 6 (a stale target). 64 PUCT simulations from the root put most visits on column 0: the
    # win backs up +1 to it, above any other child's Q, so its PUCT score stays ahead after its first visit.
    env, win_now = _position([0, 1, 0, 1, 0, 1])
    _, opening = _position([3])
    stale = jnp.zeros(A).at[6].set(1.0)
    buffer = _buffer_with([win_now, opening], capacity=4, policy=stale, done=[True, False])
    apply_fn, variables = _network_variables(env)
    # 4 rows asked for, 2 trainable: both are drawn (distinct rows, weight 0 on the 2 empty ones), the empty rows are
    # searched (from zero states) but never written
    new, metrics = jax.jit(
        lambda b, k: reanalyse.reanalyse(env, apply_fn, variables, _search(), b, k, num_positions=4, chunks=2)
    )(buffer, jax.random.key(2))
    assert int(metrics["positions"]) == 2
    policy = np.asarray(new.policy)
    assert policy[0].argmax() == 0 and policy[0, 0] > 0.5  # the winning column now has most of the target
    np.testing.assert_allclose(policy.sum(-1)[:2], 1.0, rtol=1e-5)
    assert policy[1, 6] < 0.5  # the opening's target is the new search's, not the stale one-hot
    np.testing.assert_array_equal(policy[2:], 0.0)  # empty rows untouched
    assert float(new.search_value[0]) > 0.5  # the root's value of a won position, where the stored one was -0.5
    # the total variation of each rewritten row against its stale target, summed: row 0 moved 1 − π_new(6)
    expected = (1.0 - policy[0, 6]) + (1.0 - policy[1, 6])
    np.testing.assert_allclose(float(metrics["policy_change"]), expected, rtol=1e-5)
    # everything but the targets stays: outcome bookkeeping, masks, observations, states
    for field in ("observation", "legal", "player", "slot", "episode", "outcome", "pending", "done"):
        np.testing.assert_array_equal(getattr(new, field), getattr(buffer, field))
    chex.assert_trees_all_equal(new.state, buffer.state)


def test_rewrite_keeps_compact_rows_compact_and_skips_invalid_rows():
    # A = 5 actions, K = 2 entries a row. π = [0.1, 0.6, 0, 0.3, 0] is kept as its two largest entries, 0.6 at 1 and
    # 0.3 at 3, so the dense target it gives back is [0, 0.6, 0, 0.3, 0]; the row marked invalid keeps what it had.
    buffer = replay.init(3, (1,), jnp.int32, 5, policy_entries=2)
    pi = jnp.float32([[0.1, 0.6, 0.0, 0.3, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]])
    new = replay.rewrite(buffer, jnp.int32([0, 2]), pi, jnp.zeros(2), jnp.bool_([True, False]))
    dense, _ = replay.dense_targets(new, jnp.arange(3))
    np.testing.assert_allclose(dense, [[0, 0.6, 0, 0.3, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]])


def test_reanalyse_needs_room_in_the_replay():
    config = override(preset("connect_four", "small"), ["reanalyse_batches=600"])  # 600 × 128 > 65,536 rows
    with pytest.raises(ConfigError, match="reanalyse_batches=600 re-searches 600 × 128 positions"):
        config.validate()
    with pytest.raises(ConfigError, match="reanalyse_batches must be >= 0"):
        override(preset("connect_four", "small"), ["reanalyse_batches=-1"]).validate()


TINY_RUN = [*TINY, "reanalyse_batches=2"]  # test_resume's tiny tic-tac-toe run, reanalysing


def test_a_reanalysing_run_resumes_bitwise(tmp_path, fast_compiles):
    # tic-tac-toe, B = 8 games: each iteration searches 2 × 8 = 16 stored positions again once 16 rows are trainable
    config = lambda n: override(preset("tic_tac_toe", "small"), [*TINY_RUN, f"num_iterations={n}"])
    straight = train_and_evaluate(config(4), str(tmp_path / "straight"), progress=False)
    train_and_evaluate(config(2), str(tmp_path / "resumed"), progress=False)
    resumed = train_and_evaluate(config(4), str(tmp_path / "resumed"), progress=False)
    chex.assert_trees_all_equal(jax.device_get(straight), jax.device_get(resumed))
    assert straight.replay.state is not None  # the game states were saved and restored with the rows
    lines = (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()
    metrics = [json.loads(line) for line in lines]
    # 8 games × 4 plies = 32 rows written by iteration 1 (all trainable: pending or done), so all 16 are rewritten
    assert [m["reanalyse/positions"] for m in metrics] == [16.0] * 4
