"""A Go position as AlphaGo's features need it (Nature 2016, Extended Data Table 2), in a compact form that batches,
stores in a data set and comes from a pgx Go state.

    position = from_pgx(state)              # pgx.go.State, batched or not
    position.board          # [..., N*N] int8: +1 the player to move's stone, -1 the opponent's, 0 empty
    position.turns_since    # [..., N*N] int8: k in 1..7 for a stone played k turns ago, 8 for 8 or more, 0 empty

Points are numbered as pgx numbers them (row-major from the top-left, action = row * N + column). Everything is
relative to the player to move, as the paper's features are, except `black_to_move` (the value network's extra plane).
"""

from collections.abc import Mapping
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pgx
from flax import struct


@struct.dataclass
class Position:
    board: chex.Array  # [..., N*N] int8: +1 own stone (player to move), -1 opponent's, 0 empty
    turns_since: chex.Array  # [..., N*N] int8: 1..7 turns since the stone was played, 8 for 8 or more, 0 empty
    ko: chex.Array  # [...] int32: the point the player to move may not play because of a ko capture, -1 none
    black_to_move: chex.Array  # [...] bool

    @property
    def size(self) -> int:
        return int(round(self.board.shape[-1] ** 0.5))


def turns_since(history: jax.Array) -> jax.Array:
    """[..., H, P] pgx board history (history[0] now, history[k] k moves ago; 2 before the game began; H = 8) →
    [..., P] int8: for a stone now, the smallest k with history[k] different at its point (it was played k turns ago),
    H if there is none (played H or more turns ago); 0 for an empty point."""
    now = history[..., :1, :]
    horizon = history.shape[-2]
    changed = history[..., 1:, :] != now  # [..., H-1, P]: differs k = 1..H-1 moves ago
    ks = jnp.arange(1, horizon, dtype=jnp.int32)[:, None]
    first = jnp.min(jnp.where(changed, ks, horizon), axis=-2)
    return jnp.where(now[..., 0, :] != 0, first, 0).astype(jnp.int8)


def from_pgx(state: pgx.State) -> Position:
    """The position of a pgx Go state (batched or not): stones signed for the player to move, turns since each stone
    was played (from pgx's 8-board history, so exact up to 8), the simple-ko point."""
    x = state._x
    black = x.step_count % 2 == 0  # pgx: Black moves at even step counts
    own = jnp.where(black, 1, -1)[..., None]
    board = (jnp.sign(x.board) * own).astype(jnp.int8)
    return Position(
        board=board,
        turns_since=turns_since(x.board_history),
        ko=x.ko.astype(jnp.int32),
        black_to_move=black,
    )


# A Position's leaves as columns of a data set (az_jax/runtime/columns.py): name -> (dtype, shape of one row).
FIELDS = ("board", "turns_since", "ko", "black_to_move")


def schema(size: int) -> dict[str, tuple[Any, tuple[int, ...]]]:
    """The column schema of the positions of an N×N board."""
    points = size * size
    return {
        "board": (np.int8, (points,)),
        "turns_since": (np.int8, (points,)),
        "ko": (np.int32, ()),
        "black_to_move": (np.bool_, ()),
    }


def as_columns(position: Position) -> dict[str, Any]:
    """The leaves of `position` by column name."""
    return {name: getattr(position, name) for name in FIELDS}


def from_columns(columns: Mapping[str, Any]) -> Position:
    """The Position whose leaves are the columns' arrays (as they are: memory maps stay maps)."""
    return Position(**{name: columns[name] for name in FIELDS})
