"""The circular replay buffer: row placement, wrap-around, outcome resolution per (slot, episode), and sampling.

Buffers here are tiny (observation shape [1], 2 actions); each written observation encodes where it came from so
rows can be identified after they move around.
"""

import jax
import jax.numpy as jnp
import numpy as np

from az_jax.core import replay

NUM_ACTIONS = 2


def _add(buffer, ply, players, episodes):
    """Writes one ply of B = len(players) games; the observation of game b is 10·ply + b."""
    num_games = len(players)
    observation = (10 * ply + jnp.arange(num_games, dtype=jnp.int32))[:, None]  # [B, 1]
    policy = jnp.tile(jnp.float32([0.25, 0.75]), (num_games, 1))  # [B, A]
    legal = jnp.ones((num_games, NUM_ACTIONS), jnp.bool_)  # [B, A]
    return replay.add(buffer, jnp.int32(ply), observation, policy, legal, jnp.int32(players), jnp.int32(episodes))


def _resolve(buffer, ended, episodes, rewards):
    return replay.resolve(buffer, jnp.bool_(ended), jnp.int32(episodes), jnp.float32(rewards))


def test_rows_wrap_around_the_capacity():
    buffer = replay.init(6, (1,), jnp.int32, NUM_ACTIONS)
    assert buffer.capacity == 6
    # Ply 0 of B = 4 games -> rows (0·4 + b) mod 6 = 0, 1, 2, 3.
    buffer = _add(buffer, 0, players=[0, 1, 0, 1], episodes=[0, 0, 0, 0])
    np.testing.assert_array_equal(buffer.observation[:, 0], [0, 1, 2, 3, 0, 0])
    np.testing.assert_array_equal(buffer.pending, [True, True, True, True, False, False])
    # Ply 1 -> rows (1·4 + b) mod 6 = 4, 5, 0, 1: games 2 and 3 of ply 1 overwrite games 0 and 1 of ply 0.
    buffer = _add(buffer, 1, players=[1, 0, 1, 0], episodes=[0, 0, 0, 0])
    #                     row:  0   1  2  3   4   5
    np.testing.assert_array_equal(buffer.observation[:, 0], [12, 13, 2, 3, 10, 11])
    np.testing.assert_array_equal(buffer.slot, [2, 3, 2, 3, 0, 1])
    np.testing.assert_array_equal(buffer.player, [1, 0, 0, 1, 1, 0])
    np.testing.assert_array_equal(buffer.policy, np.tile([0.25, 0.75], (6, 1)))
    assert buffer.pending.all() and not buffer.done.any()
    # Ply 5 -> rows (5·4 + b) mod 6 = 20..23 mod 6 = 2, 3, 4, 5.
    buffer = _add(buffer, 5, players=[0, 0, 0, 0], episodes=[1, 1, 1, 1])
    np.testing.assert_array_equal(buffer.observation[:, 0], [12, 13, 50, 51, 52, 53])
    np.testing.assert_array_equal(buffer.episode, [0, 0, 1, 1, 1, 1])


def test_resolve_scores_only_the_pending_rows_of_the_ended_game():
    buffer = replay.init(8, (1,), jnp.int32, NUM_ACTIONS)
    # Two slots. Ply 0 -> rows 0, 1; ply 1 -> rows 2, 3. Slot 0 movers: player 0 then 1; slot 1: player 1 then 0.
    buffer = _add(buffer, 0, players=[0, 1], episodes=[0, 0])
    buffer = _add(buffer, 1, players=[1, 0], episodes=[0, 0])

    # An "ended" flag for episode 1 of slot 0 matches none of its rows (they are episode 0): nothing changes.
    same = _resolve(buffer, [True, False], [1, 0], [[1.0, -1.0], [0.0, 0.0]])
    np.testing.assert_array_equal(same.pending, buffer.pending)
    assert not same.done.any()

    # Slot 0's episode 0 ends, player 0 won: rewards[0] = [+1, −1].
    buffer = _resolve(buffer, [True, False], [0, 0], [[1.0, -1.0], [0.0, 0.0]])
    # Row 0: slot 0, player 0 -> z = rewards[0, 0] = +1. Row 2: slot 0, player 1 -> z = rewards[0, 1] = −1.
    # Rows 1 and 3 (slot 1, still playing) stay pending.
    np.testing.assert_array_equal(buffer.outcome[:4], [1.0, 0.0, -1.0, 0.0])
    np.testing.assert_array_equal(buffer.done[:4], [True, False, True, False])
    np.testing.assert_array_equal(buffer.pending[:4], [False, True, False, True])

    # Slot 0 starts episode 1: ply 2 -> rows 4, 5; ply 3 -> rows 6, 7.
    buffer = _add(buffer, 2, players=[1, 1], episodes=[1, 0])
    buffer = _add(buffer, 3, players=[0, 0], episodes=[1, 0])
    # Both slots end: slot 0's episode 1 is won by player 1 (rewards [−1, +1]); slot 1's episode 0 is a draw.
    buffer = _resolve(buffer, [True, True], [1, 0], [[-1.0, 1.0], [0.0, 0.0]])
    #   row 0: slot 0 ep 0 player 0, already done: keeps +1 (NOT rewards[0, 0] = −1 of the new game)
    #   row 1: slot 1 ep 0, draw -> 0        row 2: slot 0 ep 0 player 1, already done: keeps −1
    #   row 3: slot 1 ep 0, draw -> 0        row 4: slot 0 ep 1 player 1 -> rewards[0, 1] = +1
    #   row 5: slot 1 ep 0, draw -> 0        row 6: slot 0 ep 1 player 0 -> rewards[0, 0] = −1
    #   row 7: slot 1 ep 0, draw -> 0
    np.testing.assert_array_equal(buffer.outcome, [1.0, 0.0, -1.0, 0.0, 1.0, 0.0, -1.0, 0.0])
    assert buffer.done.all() and not buffer.pending.any()

    # A repeated end signal for a game already scored changes nothing (its rows are no longer pending).
    again = _resolve(buffer, [True, True], [1, 0], [[1.0, -1.0], [1.0, -1.0]])
    np.testing.assert_array_equal(again.outcome, buffer.outcome)


def test_sample_draws_only_rows_with_a_known_outcome():
    capacity = 8
    buffer = replay.init(capacity, (1,), jnp.int32, NUM_ACTIONS)
    buffer = buffer.replace(
        observation=jnp.arange(capacity, dtype=jnp.int32)[:, None],  # row r holds r
        outcome=jnp.float32([0, 0, 1, 0, 0, -1, 0, 0]),
        pending=jnp.bool_([1, 1, 0, 1, 1, 0, 1, 1]),  # rows 2 and 5 are done
        done=jnp.bool_([0, 0, 1, 0, 0, 1, 0, 0]),
    )
    batch = jax.jit(replay.sample, static_argnums=2)(buffer, jax.random.key(0), 1000)
    rows = np.asarray(batch.observation[:, 0])
    assert set(rows.tolist()) == {2, 5}
    # Uniform over the 2 rows: 1000 draws of p = 1/2 -> mean 500, sd sqrt(1000/4) ≈ 16; 500 ± 100 is ±6 sd.
    assert 400 < (rows == 2).sum() < 600
    # The other fields come from the same rows: z = +1 for row 2, −1 for row 5.
    np.testing.assert_array_equal(batch.outcome, np.where(rows == 2, 1.0, -1.0))
    assert batch.policy.shape == (1000, NUM_ACTIONS) and batch.legal.shape == (1000, NUM_ACTIONS)


def test_value_target_mixes_the_outcome_with_the_search_value():
    buffer = replay.init(2, (1,), jnp.int32, NUM_ACTIONS, keep_search_value=True)
    # One ply of two games; the root's search values were 0.2 (game 0's mover) and −0.6 (game 1's mover).
    buffer = replay.add(
        buffer,
        jnp.int32(0),
        jnp.int32([[0], [1]]),
        jnp.float32([[0.5, 0.5]] * 2),
        jnp.ones((2, NUM_ACTIONS), jnp.bool_),
        jnp.int32([0, 1]),
        jnp.int32([0, 0]),
        search_value=jnp.float32([0.2, -0.6]),
    )
    np.testing.assert_allclose(buffer.search_value, [0.2, -0.6])
    # Both games end, player 0 won: z = +1 for row 0's mover, −1 for row 1's.
    buffer = _resolve(buffer, [True, True], [0, 0], [[1.0, -1.0], [1.0, -1.0]])
    batch = replay.sample(buffer, jax.random.key(0), 64, value_target_mix=0.25)
    rows = np.asarray(batch.observation[:, 0])
    assert set(rows) == {0, 1}
    # λ = 0.25: row 0 → 0.75·(+1) + 0.25·0.2 = 0.8; row 1 → 0.75·(−1) + 0.25·(−0.6) = −0.9.
    np.testing.assert_allclose(np.asarray(batch.outcome), np.where(rows == 0, 0.8, -0.9), rtol=1e-6)
    # λ = 0 is the outcome alone, and a buffer that keeps no search value has none to mix.
    plain = replay.sample(buffer, jax.random.key(0), 64)
    np.testing.assert_array_equal(np.asarray(plain.outcome), np.where(rows == 0, 1.0, -1.0))
    assert replay.init(2, (1,), jnp.int32, NUM_ACTIONS).search_value is None


def test_compact_rows_give_back_the_same_batches():
    # 20 actions, at most 5 legal in any position (the bound K): a compact row keeps 5 policy entries with their
    # actions (int16) and the mask as ⌈20/8⌉ = 3 bytes; sampled, they are the dense buffer's batches exactly
    rng = np.random.default_rng(3)
    A, K, B = 20, 5, 6
    dense = replay.init(24, (1,), jnp.int32, A)
    compact = replay.init(24, (1,), jnp.int32, A, policy_entries=K)
    assert compact.policy.shape == (24, K) and compact.policy_index.shape == (24, K)
    assert compact.legal.shape == (24, 3) and compact.legal.dtype == jnp.uint8
    for ply in range(4):
        legal = np.zeros((B, A), bool)
        for b in range(B):  # 1 to 5 legal actions, some of them searched to 0 visits
            legal[b, rng.choice(A, rng.integers(1, K + 1), replace=False)] = True
        policy = np.where(legal, rng.integers(0, 4, (B, A)), 0).astype(np.float32)
        policy[np.arange(B), legal.argmax(1)] += 1.0  # at least one visited action
        policy /= policy.sum(1, keepdims=True)
        args = (jnp.int32(10 * ply + np.arange(B))[:, None], jnp.asarray(policy), jnp.asarray(legal))
        rest = (jnp.int32(np.arange(B) % 2), jnp.zeros(B, jnp.int32))
        dense = replay.add(dense, jnp.int32(ply), *args, *rest)
        compact = replay.add(compact, jnp.int32(ply), *args, *rest)
    done = lambda buf: buf.replace(done=buf.pending, outcome=jnp.float32(np.arange(24) % 3 - 1))
    for seed in range(3):
        a = replay.sample(done(dense), jax.random.key(seed), 16)
        b = replay.sample(done(compact), jax.random.key(seed), 16)
        for field in ("observation", "policy", "legal", "outcome"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert replay.init(4, (1,), jnp.int32, A, policy_entries=A).policy_index is None  # no bound below A: dense rows
