"""Tic-tac-toe solved exactly: every reachable position as a pgx state, its minimax-optimal moves, a perfect player.

Boards are pgx's: 9 cells row-major, -1 empty, 0 for the first mover's marks (X), 1 for the second's (O); X moves when
the counts are equal. Values are from the mover's point of view (+1 win, 0 draw, −1 loss with perfect play). A move is
optimal when it keeps the position's minimax value (in a lost position every move is). The solution is computed once,
in plain Python, when first asked for: 5,478 reachable positions, 4,520 of them non-terminal.

`check(player, key)` plays a player's move in each of the 4,520 positions (all of them in one batch) and
says in which it kept the value: the exhaustive check that a tic-tac-toe agent is perfect, not a sampled match.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pgx

from az_jax.evaluation import positions as positions_lib

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
NUM_REACHABLE = 5478  # positions reachable from the empty board, terminal ones included
NUM_NON_TERMINAL = 4520  # of those, positions with a move to make


def winner(board: tuple) -> int:
    """The mark (0 or 1) that owns a line, or −1."""
    for a, b, c in LINES:
        if board[a] >= 0 and board[a] == board[b] == board[c]:
            return board[a]
    return -1


def mover(board: tuple) -> int:
    return 0 if board.count(0) == board.count(1) else 1


@functools.cache
def value(board: tuple) -> int:
    """Minimax value for the player to move."""
    if winner(board) >= 0:
        return -1  # the previous mover completed a line
    moves = [i for i in range(9) if board[i] < 0]
    if not moves:
        return 0
    return max(-value(play(board, i)) for i in moves)


def play(board: tuple, cell: int) -> tuple:
    return board[:cell] + (mover(board),) + board[cell + 1 :]


def is_terminal(board: tuple) -> bool:
    return winner(board) >= 0 or -1 not in board


def optimal_moves(board: tuple) -> np.ndarray:
    """[9] bool: the legal moves that keep the value of a non-terminal `board`."""
    values = {i: -value(play(board, i)) for i in range(9) if board[i] < 0}
    best = max(values.values())
    return np.array([values.get(i, -2) == best for i in range(9)])


class Positions(NamedTuple):
    """Every reachable non-terminal position, in depth-first order from the empty board. Arrays [P, ...], P = 4,520."""

    boards: np.ndarray  # [P, 9] int pgx boards
    moves: np.ndarray  # [P, 8] int a move sequence from the empty board that reaches it, −1 padded
    optimal: np.ndarray  # [P, 9] bool the moves that keep its minimax value
    value: np.ndarray  # [P] int its minimax value for the mover


@functools.cache
def positions() -> Positions:
    seen: dict[tuple, tuple] = {}
    stack: list[tuple[tuple, tuple]] = [((-1,) * 9, ())]
    while stack:
        board, path = stack.pop()
        if board in seen or is_terminal(board):
            continue
        seen[board] = path
        stack.extend((play(board, i), path + (i,)) for i in range(8, -1, -1) if board[i] < 0)
    boards = list(seen)
    moves = np.full((len(boards), 8), -1, np.int32)
    for k, board in enumerate(boards):
        moves[k, : len(seen[board])] = seen[board]
    return Positions(
        boards=np.array(boards, np.int32),
        moves=moves,
        optimal=np.stack([optimal_moves(b) for b in boards]),
        value=np.array([value(b) for b in boards], np.int32),
    )


# The optimal-move table indexed by a board's base-3 code, for use inside jitted code (perfect_player).
_POWERS = 3 ** np.arange(9)


@functools.cache
def _table() -> np.ndarray:
    """[3^9, 9] bool: the optimal moves of every reachable non-terminal board code (False elsewhere)."""
    solved = positions()
    table = np.zeros((3**9, 9), bool)
    table[(solved.boards + 1) @ _POWERS] = solved.optimal
    return table


def perfect_player(state: pgx.State, rng_key: jax.Array) -> jax.Array:
    """Uniformly random among the minimax-optimal moves; an arena player. state: batched pgx tic_tac_toe State [B]."""
    codes = jnp.sum((state._x.board + 1) * jnp.asarray(_POWERS), axis=-1)  # [B]
    best = jnp.asarray(_table())[codes] & state.legal_action_mask  # [B, 9]
    best = jnp.where(best.any(-1, keepdims=True), best, state.legal_action_mask)  # terminal rows: any legal
    return jax.random.categorical(rng_key, jnp.where(best, 0.0, -jnp.inf))


def check(player, rng_key: jax.Array) -> positions_lib.Result:
    """Runs `player` (states [P, ...], key) -> actions [P] once on all 4,520 positions; the key is consumed."""
    solved = positions()
    return positions_lib.evaluate(player, pgx.make("tic_tac_toe"), solved.moves, solved.optimal, solved.value, rng_key)
