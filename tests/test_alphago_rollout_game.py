"""The lean rollout game (az_jax/alphago/rollout_game.py) against pgx: the chain labels it carries are the ones found
afresh after every move, and a rollout plays the same moves and gets the same result as the same rollout stepped by
pgx (the oracle: apv_mcts's rollout as it was before the lean game, kept in experiments/alphago/rollout_speed.py),
from the same key."""

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

from az_jax.alphago import features as features_lib
from az_jax.alphago import lean_chains, rollout_game
from az_jax.alphago import rollout_policy as rollout_lib
from az_jax.alphago.position import from_pgx
from experiments.alphago import rollout_speed

ENV = pgx.make("go_9x9")
N = 9
B = 32


def midgame(plies: int, seed: int) -> pgx.State:
    """B 9×9 games after `plies` uniformly random legal moves (no passes while a point is legal)."""
    return rollout_speed.midgame(ENV, B, plies, seed)


def policy(seed: int) -> rollout_lib.RolloutPolicy:
    """p_π with random weights on its fixed features (no pattern): moves near the last one, saving ataris, ..."""
    return rollout_speed.random_policy(seed)


pgx_rollout = jax.jit(lambda p, s, k: rollout_speed.pgx_rollout(p, s, k, ENV))  # the oracle: stepped by pgx


@pytest.mark.parametrize("plies, seed", [(10, 0), (40, 1)])
def test_a_lean_rollout_is_the_pgx_rollout(plies, seed):
    states = midgame(plies, seed)
    p = policy(seed)
    key = jax.random.key(7 + seed)
    want_z, want_end, moves = pgx_rollout(p, states, key)
    z, end = jax.jit(lambda s, k: rollout_game.play(p, s, k, ENV))(states, key)
    psk = np.asarray(want_end._x.is_psk)  # a superko repeat: pgx ends the game there, the lean game does not
    assert psk.sum() <= 2
    np.testing.assert_array_equal(np.asarray(z)[~psk], np.asarray(want_z)[~psk])
    # the same games move for move: the same final boards after the same number of moves
    np.testing.assert_array_equal(np.asarray(end.board)[~psk], np.asarray(from_pgx(want_end).board)[~psk])
    np.testing.assert_array_equal(np.asarray(end.steps)[~psk], np.asarray(want_end._x.step_count)[~psk])
    assert int(moves.min()) > 20  # real games to their end, not a move or two


def test_carried_labels_are_the_chains_found_again():
    """After every move of 60-move random games the labels `step` carries equal features._chain_labels of the board,
    every stone's chain has the liberty count (features.py's bitsets), liberty sum and size counted afresh from the
    board, and the board, ko and turns since each stone are pgx's own (relative to the player to move)."""
    states = midgame(0, 3)
    lean = rollout_game.from_states(states)
    labels = jax.jit(jax.vmap(lambda b: features_lib._chain_labels(b, N)))
    counted = jax.jit(jax.vmap(lambda b, lab: lean_chains.of_board(b, lab, N)))
    bitset_liberties = jax.jit(jax.vmap(lambda b: features_lib._chain_liberties(b, N)))
    play = jax.jit(jax.vmap(ENV.step))
    advance = jax.jit(lambda s, a: rollout_game.step(s, a, N, 162))
    captured, previous = 0, np.asarray(lean.board)
    for i in range(60):
        logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf).at[:, -1].set(-1e9)
        action = jax.random.categorical(jax.random.key(i), logits, axis=-1)
        states, lean = play(states, action), advance(lean, action)
        want = from_pgx(states)
        np.testing.assert_array_equal(np.asarray(lean.label), np.asarray(labels(lean.board)))
        np.testing.assert_array_equal(np.asarray(lean.board), np.asarray(want.board))
        np.testing.assert_array_equal(np.asarray(lean.turns_since), np.asarray(want.turns_since))
        np.testing.assert_array_equal(np.asarray(lean.ko), np.asarray(want.ko))
        # by each stone's label: entries of labels gone from the board (merged, captured) are stale and never read
        stone, label = np.asarray(lean.board) != 0, np.asarray(lean.label)
        fresh = counted(lean.board, lean.label)
        for field in ("liberties", "liberty_sum", "size"):
            got = np.take_along_axis(np.asarray(getattr(lean.chains, field)), label, -1)[stone]
            np.testing.assert_array_equal(got, np.take_along_axis(np.asarray(getattr(fresh, field)), label, -1)[stone])
        liberties = np.take_along_axis(np.asarray(lean.chains.liberties), label, -1)
        np.testing.assert_array_equal(liberties[stone], np.asarray(bitset_liberties(lean.board))[stone])
        captured += int(((previous != 0) & (np.asarray(lean.board) == 0)).sum())
        previous = np.asarray(lean.board)
    assert int((np.asarray(lean.board) != 0).sum(-1).min()) > 20  # crowded boards
    assert captured >= 10  # with captures on the way (stones that left the board)


@pytest.mark.parametrize("listed", [None, 0])
def test_a_capture_updates_the_chains_next_to_it(listed):
    """5×5, point 5·row + column, Black (+1) to move at x = 12 captures the White pair 2-7 (its last liberty is 12),
    joins the chain 3-8-13 and gives the chain 1-6 the captured points:

        .  B  W  B  .      0  1  2  3  4
        .  B  W  B  .      5  6  7  8  9
        .  .  x  B  .     10 11 12 13 14
        .  .  .  .  .     15 ...

    Both ways of adding the captured stones: listed (`listed` None: up to B + 16 = 17 stones) and at every point (0)."""
    n = 5
    board = np.zeros(n * n, np.int8)
    board[[1, 6, 3, 8, 13]] = 1
    board[[2, 7]] = -1
    board = jnp.asarray(board)
    label = features_lib._chain_labels(board, n)
    assert [int(label[q]) for q in (1, 6, 3, 8, 13, 2, 7)] == [1, 1, 3, 3, 3, 2, 2]  # a label is the smallest point
    before = lean_chains.of_board(board, label, n)
    # White 2-7: liberty 12 alone (1, 3, 6, 8 are Black). Black 1-6: 0, 5, 11 -> 3, sum 16. Black 3-8-13: 4, 9, 12, 14,
    # 18 -> 5, sum 57
    assert [int(before.liberties[c]) for c in (2, 1, 3)] == [1, 3, 5]
    assert [int(before.liberty_sum[c]) for c in (2, 1, 3)] == [12, 16, 57]
    one = lambda x: x[None]  # noqa: E731  a batch of one game
    board, label, ko, chains = lean_chains.play(
        one(board), one(label), jax.tree.map(one, before), jnp.array([12]), n, listed
    )
    board, chains = board[0], jax.tree.map(lambda x: x[0], chains)
    assert int(board[2]) == int(board[7]) == 0 and int(ko[0]) == -1  # two stones captured: no ko
    # 3-8-12-13: 4, 9, 14, 18, the captured 2 and 7, and 12's 11 and 17 -> 8, sum 2+4+7+9+11+14+17+18 = 82, 4 stones
    assert (int(chains.liberties[3]), int(chains.liberty_sum[3]), int(chains.size[3])) == (8, 82, 4)
    # 1-6 gains 2 (next to 1) and 7 (next to 6): 0, 5, 11, 2, 7 -> 5, sum 16 + 9 = 25, 2 stones
    assert (int(chains.liberties[1]), int(chains.liberty_sum[1]), int(chains.size[1])) == (5, 25, 2)


@pytest.mark.parametrize("max_moves", [0, 10])
def test_plies_per_loop_plays_the_same_games(max_moves):
    """Three plies per iteration of the rollout's loop play the same games as one: the same key is split once a ply
    either way. With a cap of 10 moves (not a multiple of 3: the loop's fourth iteration stops after its first ply)
    every game still going has made exactly 10 moves, none more."""
    states = midgame(20, 4)
    p = policy(4)
    key = jax.random.key(11)
    runs = [
        jax.jit(lambda s, k, plies=plies: rollout_game.play(p, s, k, ENV, max_moves, plies_per_loop=plies))(states, key)
        for plies in (1, 3)
    ]
    (z1, end1), (z3, end3) = runs
    np.testing.assert_array_equal(np.asarray(z3), np.asarray(z1))
    for field in ("board", "label", "ko", "turns_since", "passes", "steps", "over"):
        np.testing.assert_array_equal(np.asarray(getattr(end3, field)), np.asarray(getattr(end1, field)))
    made = np.asarray(end3.steps - states._x.step_count)
    if max_moves:
        assert made.max() == 10 and (made[~np.asarray(end3.over)] == 10).all()
    else:
        assert np.asarray(end3.over).all() and made.min() > 20
