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
from az_jax.alphago import rollout_game
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
    and the board, ko and turns since each stone are pgx's own (relative to the player to move)."""
    states = midgame(0, 3)
    lean = rollout_game.from_states(states)
    labels = jax.jit(jax.vmap(lambda b: features_lib._chain_labels(b, N)))
    play = jax.jit(jax.vmap(ENV.step))
    advance = jax.jit(lambda s, a: rollout_game.step(s, a, N, 162))
    for i in range(60):
        logits = jnp.where(states.legal_action_mask, 0.0, -jnp.inf).at[:, -1].set(-1e9)
        action = jax.random.categorical(jax.random.key(i), logits, axis=-1)
        states, lean = play(states, action), advance(lean, action)
        want = from_pgx(states)
        np.testing.assert_array_equal(np.asarray(lean.label), np.asarray(labels(lean.board)))
        np.testing.assert_array_equal(np.asarray(lean.board), np.asarray(want.board))
        np.testing.assert_array_equal(np.asarray(lean.turns_since), np.asarray(want.turns_since))
        np.testing.assert_array_equal(np.asarray(lean.ko), np.asarray(want.ko))
    assert int((np.asarray(lean.board) != 0).sum(-1).min()) > 20  # crowded boards, with captures on the way


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
