"""Connect four's final board as KataGo's auxiliary ownership target (envs/connect_four_board.py; Wu 2019, "Auxiliary
Ownership and Score Targets"): a hand-played game's final board for each player, checked against pgx's own
observation planes, and a real training iteration whose resolved replay rows agree with their own positions' stones
(a stone never leaves the board, so every stone a position shows is on its game's final board, with its owner)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.core.devices import make_mesh
from az_jax.runtime.trainer import Trainer
from envs import connect_four_board

from conftest import TINY_NETWORK

pytestmark = pytest.mark.usefixtures("fast_compiles")  # tiny programs: XLA's optimisation passes off (conftest.py)

ENV = envs.make_env("connect_four")[0]


@jax.jit
def _played(key: jax.Array, moves: jax.Array):
    """The state after `moves` (columns) from the initial state pgx draws with `key` (its first mover's player id)."""
    state = ENV.init(key)
    return jax.lax.fori_loop(0, moves.shape[0], lambda i, s: ENV.step(s, moves[i]), state)


def _key_with_first_mover(player: int) -> jax.Array:
    """A key whose initial state gives the first move to pgx player id `player` (pgx draws it from the key)."""
    for seed in range(64):
        if int(ENV.init(jax.random.key(seed)).current_player) == player:
            return jax.random.key(seed)
    raise AssertionError("no key in 64 gives that first mover")


@pytest.mark.parametrize("first", [0, 1])
def test_final_board_of_a_hand_played_game_for_each_player(first):
    # Columns 0, 1, 0, 1, 0, 1, 0: the first mover stacks 4 in column 0 (cells 35, 28, 21, 14 from the bottom row up;
    # row-major from the top, row 5 is cells 35-41) and wins; the second has 3 in column 1 (36, 29, 22).
    state = _played(_key_with_first_mover(first), jnp.array([0, 1, 0, 1, 0, 1, 0]))
    assert bool(state.terminated) and int(state.current_player) == 1 - first  # 7 moves: the second mover is next
    ownership, margin = jax.jit(connect_four_board.final_targets)(state)
    expected = np.zeros(42)
    expected[[35, 28, 21, 14]] = 1
    expected[[36, 29, 22]] = -1
    np.testing.assert_array_equal(ownership[first], expected)
    np.testing.assert_array_equal(ownership[1 - first], -expected)  # the same board, owners swapped
    assert margin.tolist() == [0.0, 0.0]  # connect four has no score
    # pgx's own view: the observation of the player to move has its stones in plane 0, the opponent's in plane 1
    planes = np.asarray(state.observation).reshape(42, 2).astype(np.float32)
    np.testing.assert_array_equal(ownership[1 - first], planes[:, 0] - planes[:, 1])
    assert float(state.rewards[first]) == 1.0  # the four are the first mover's


def test_an_iteration_trains_on_final_boards_that_contain_each_position():
    config = overrides_lib.override(
        presets_lib.preset("connect_four", "small"),
        [
            *TINY_NETWORK,
            "selfplay_steps=24",
            "replay_capacity=512",
            "min_replay_size=16",
            "train_ratio=1",
            "eval_every=0",
            "aux_ownership_weight=1",
        ],
    ).validate()
    trainer = Trainer(config, make_mesh())
    state = trainer.init_state()
    assert state.replay.ownership.shape == (512, 42) and state.replay.score is None
    state, metrics = trainer.iterate(state)
    buf = jax.tree.map(np.asarray, state.replay)
    assert float(metrics["selfplay/games_finished"]) > 0 and 0 < float(metrics["train/ownership_loss"]) < 2
    rows = np.flatnonzero(buf.done)
    # 8 games × 24 plies: every game of at least 7 plies (4 of them random) ends within the 24, most rows resolve
    assert len(rows) >= 64, len(rows)
    stones = buf.observation[rows].reshape(len(rows), 42, 2).astype(np.int8)
    own = buf.ownership[rows]
    # each of the position's stones stands on the final board with the same owner, from the mover's point of view
    assert (own[stones[..., 0] == 1] == 1).all() and (own[stones[..., 1] == 1] == -1).all()
    # a final board has at least the 7 stones of the shortest game
    counts = np.abs(own).sum(axis=1)
    assert (counts >= 7).all()
    # z agrees with the board. The mover moved first when the position shows as many of its stones as of the
    # opponent's. The last move is the winner's, so on the final board the first mover leads by one stone after its
    # own win and is level after the second mover's win or a draw (which fills the board): from the mover's view the
    # lead is +1 exactly when the first mover won (z = +1 for it, −1 for the second mover), else 0.
    z = buf.outcome[rows]
    first = stones[..., 0].sum(axis=1) == stones[..., 1].sum(axis=1)
    expected_lead = np.where(first, z == 1, -(z == -1).astype(int))
    np.testing.assert_array_equal(own.sum(axis=1), expected_lead)
    assert (counts[z == 0] == 42).all() and 0 < (z != 0).sum()
