"""Board symmetries of the games as gathers on batched pgx observations [B, H, W, C] and policies [B, A].

A symmetry g is named after the NumPy operation that applies it to a board array [H, W] (row 0 is the top row in every
pgx game here):

    identity       x                   rot90   np.rot90(x, 1)   (counter-clockwise as printed)
    rot180         np.rot90(x, 2)      rot270  np.rot90(x, 3)
    flip_lr        x[:, ::-1]          flip_ud x[::-1, :]
    transpose      x.T                 antitranspose  x[::-1, ::-1].T

Which of them a game has is declared in `envs/registry.py` (`GameSpec.symmetries`, identity first); index k of the
functions below is the k-th name there. The tables are built once per game in NumPy from those operations, so each
transform is one gather (`jnp.take_along_axis`) in traced code, with a different symmetry per batch element if wanted:

    transform_observation: obs'[g(p)] = obs[p]          the position as it looks after g
    transform_policy:      policy'[g(a)] = policy[a]    a policy over the transformed position's actions
    inverse_policy:        policy[a] = policy'[g(a)]    back to the original position's actions

Actions: in Go, othello, hex and tic-tac-toe action r·W + c is the cell (r, c); the actions after the H·W cells (Go's
and othello's pass, hex's swap) are not board cells and map to themselves. Connect four's 7 actions are columns, so its
action table is the symmetry applied to the row of column indices.

A game that declares no symmetries (chess, shogi, ...) has one, the identity, and every transform returns its input.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from envs.registry import get_game

# name -> the operation on a board array [H, W]
OPERATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "identity": lambda x: x,
    "rot90": lambda x: np.rot90(x, 1),
    "rot180": lambda x: np.rot90(x, 2),
    "rot270": lambda x: np.rot90(x, 3),
    "flip_lr": lambda x: x[:, ::-1],
    "flip_ud": lambda x: x[::-1, :],
    "transpose": lambda x: x.T,
    "antitranspose": lambda x: x[::-1, ::-1].T,
}
# The operations that keep an H × W board H × W when H != W.
_RECTANGLE_SAFE = frozenset({"identity", "rot180", "flip_lr", "flip_ud"})

ActionLayout = Literal["cells", "columns"]


@dataclasses.dataclass(frozen=True)
class Board:
    """The geometry the tables need: board size, action count and what the actions index."""

    height: int
    width: int
    num_actions: int
    actions: ActionLayout  # "cells": action r·W + c is cell (r, c), later actions are not cells; "columns": column c


# Per game, from pgx's observation shapes and action spaces (tests/test_symmetries.py checks them against pgx).
BOARDS: dict[str, Board] = {
    "tic_tac_toe": Board(3, 3, 9, "cells"),
    "connect_four": Board(6, 7, 7, "columns"),
    "othello": Board(8, 8, 65, "cells"),  # 64 cells + pass
    "hex": Board(11, 11, 122, "cells"),  # 121 cells + swap
    "go_9x9": Board(9, 9, 82, "cells"),  # 81 points + pass
    "go_19x19": Board(19, 19, 362, "cells"),  # 361 points + pass
}


@dataclasses.dataclass(frozen=True, eq=False)
class Tables:
    """Gather tables of one game's K symmetries (NumPy, built once)."""

    names: tuple[str, ...]  # K names, identity first
    cell_source: np.ndarray  # [K, H·W] int32: transformed cell q shows original cell cell_source[k, q]
    action_source: np.ndarray  # [K, A] int32: transformed action q is original action action_source[k, q]
    action_image: np.ndarray  # [K, A] int32: g_k(a), the inverse permutation of action_source[k]


def _permutation_of(name: str, height: int, width: int) -> np.ndarray:
    """[H·W] source cell of each transformed cell: OPERATIONS[name](board).ravel()[q] == board.ravel()[result[q]]."""
    if height != width and name not in _RECTANGLE_SAFE:
        raise ValueError(f"symmetry {name!r} does not map a {height}×{width} board onto itself")
    out = OPERATIONS[name](np.arange(height * width).reshape(height, width))
    assert out.shape == (height, width)
    return np.ascontiguousarray(out).ravel()


def symmetry_names(game: str) -> tuple[str, ...]:
    """The game's symmetries, identity first; ("identity",) for a game that declares none."""
    return get_game(game).symmetries or ("identity",)


@functools.cache
def tables(game: str) -> Tables:
    """The game's gather tables; raises ValueError for an unknown symmetry name or board."""
    names = symmetry_names(game)
    unknown = [n for n in names if n not in OPERATIONS]
    if unknown or names[0] != "identity":
        raise ValueError(
            f"{game}: symmetries must start with 'identity' and come from {', '.join(OPERATIONS)}; got {names}"
        )
    if names == ("identity",):  # no board geometry needed: every transform returns its input
        empty = np.zeros((1, 0), np.int32)
        return Tables(names, empty, empty, empty)
    board = BOARDS[game]
    cells = np.stack([_permutation_of(n, board.height, board.width) for n in names])  # [K, H·W]
    if board.actions == "columns":
        # A column action drops a piece to the lowest empty row: only symmetries that keep rows in place (identity,
        # flip_lr) turn a column move into a column move (flip_ud would turn gravity upside down).
        if any(n not in ("identity", "flip_lr") for n in names):
            raise ValueError(f"{game}: only identity and flip_lr keep its column actions, got {names}")
        actions = np.stack([_permutation_of(n, 1, board.width) for n in names])  # [K, W]
    else:
        extra = np.arange(board.height * board.width, board.num_actions)  # not board cells
        actions = np.concatenate([cells, np.broadcast_to(extra, (len(names), extra.size))], axis=1)
    image = np.argsort(actions, axis=1)
    return Tables(names, cells.astype(np.int32), actions.astype(np.int32), image.astype(np.int32))


def num_symmetries(game: str) -> int:
    """K, the number of symmetries (identity included) the game's rules have."""
    return len(symmetry_names(game))


def random_symmetry(game: str, rng_key: jax.Array, batch_size: int) -> jax.Array:
    """[batch_size] int32 symmetry indices, uniform over the game's K symmetries; the key is consumed."""
    return jax.random.randint(rng_key, (batch_size,), 0, num_symmetries(game), dtype=jnp.int32)


def _gather(table: np.ndarray, sym_index, x: jax.Array, axis: int) -> jax.Array:
    """x [B, N, ...] gathered along `axis` (=1) by table[sym_index] ([B, N]); sym_index is an int or [B]."""
    index = jnp.take(jnp.asarray(table), jnp.broadcast_to(jnp.asarray(sym_index, jnp.int32), x.shape[:1]), axis=0)
    index = index.reshape(index.shape + (1,) * (x.ndim - 2))  # [B, N, 1...]
    return jnp.take_along_axis(x, index, axis=axis)


def transform_observation(game: str, sym_index, obs: jax.Array) -> jax.Array:
    """obs [B, H, W, C] -> the observations of the transformed positions [B, H, W, C] (obs'[g(p)] = obs[p]).

    sym_index: an int or a [B] int array (each sample its own symmetry)."""
    t = tables(game)
    if t.names == ("identity",):
        return obs
    b, h, w, c = obs.shape
    return _gather(t.cell_source, sym_index, obs.reshape(b, h * w, c), axis=1).reshape(b, h, w, c)


def inverse_observation(game: str, sym_index, obs: jax.Array) -> jax.Array:
    """The inverse of transform_observation: obs [B, H, W, C] of transformed positions -> the originals'."""
    t = tables(game)
    if t.names == ("identity",):
        return obs
    b, h, w, c = obs.shape
    inverse = np.argsort(t.cell_source, axis=1)
    return _gather(inverse, sym_index, obs.reshape(b, h * w, c), axis=1).reshape(b, h, w, c)


def transform_policy(game: str, sym_index, policy: jax.Array) -> jax.Array:
    """policy [B, A] (or a legal mask, or logits) -> the same over the transformed position's actions.

    p'[g(a)] = p[a]; sym_index is an int or [B]."""
    t = tables(game)
    return policy if t.names == ("identity",) else _gather(t.action_source, sym_index, policy, axis=1)


def inverse_policy(game: str, sym_index, policy: jax.Array) -> jax.Array:
    """The inverse of transform_policy: policy' [B, A] over transformed actions -> over the original actions.

    p[a] = p'[g(a)]; sym_index is an int or [B]."""
    t = tables(game)
    return policy if t.names == ("identity",) else _gather(t.action_image, sym_index, policy, axis=1)


def transform_action(game: str, sym_index, action: jax.Array) -> jax.Array:
    """action [B] int -> g(action) [B], the same move on the transformed board."""
    t = tables(game)
    if t.names == ("identity",):
        return action
    index = jnp.broadcast_to(jnp.asarray(sym_index, jnp.int32), action.shape)
    return jnp.asarray(t.action_image)[index, action]
