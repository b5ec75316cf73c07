"""A perfect tic-tac-toe player for tests: a minimax table over all positions, used inside jitted matches.

Boards are pgx's: 9 cells row-major, -1 empty, 0 for the first player (X), 1 for the second (O); X moves when the
counts are equal. The table is built once in plain Python at import time (5,478 reachable positions).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def _winner(board):
    for a, b, c in LINES:
        if board[a] >= 0 and board[a] == board[b] == board[c]:
            return board[a]
    return -1


@functools.lru_cache(maxsize=None)
def value(board: tuple) -> int:
    """Game value for the player to move: +1 win, 0 draw, −1 loss with perfect play."""
    mover = 0 if board.count(0) == board.count(1) else 1
    if _winner(board) >= 0:
        return -1  # the previous mover completed a line
    moves = [i for i in range(9) if board[i] < 0]
    if not moves:
        return 0
    return max(-value(board[:i] + (mover,) + board[i + 1:]) for i in moves)


def _index(board) -> int:
    return sum((int(c) + 1) * 3 ** i for i, c in enumerate(board))


def optimal_table() -> np.ndarray:
    """[3^9, 9] bool: for every board index, which moves keep the minimax value."""
    table = np.zeros((3 ** 9, 9), bool)
    for code in range(3 ** 9):
        board = tuple(((code // 3 ** i) % 3) - 1 for i in range(9))
        if abs(board.count(0) - board.count(1)) > 1 or board.count(1) > board.count(0) or _winner(board) >= 0:
            continue
        mover = 0 if board.count(0) == board.count(1) else 1
        moves = [i for i in range(9) if board[i] < 0]
        if not moves:
            continue
        values = {i: -value(board[:i] + (mover,) + board[i + 1:]) for i in moves}
        best = max(values.values())
        for i, v in values.items():
            table[code, i] = v == best
    return table


TABLE = jnp.asarray(optimal_table())
POWERS = jnp.asarray(3 ** np.arange(9))


def perfect_player(state, rng_key):
    """Uniformly random among the minimax-optimal moves. state: batched pgx tic_tac_toe State [B]."""
    codes = jnp.sum((state._x.board + 1) * POWERS, axis=-1)                 # [B]
    best = TABLE[codes] & state.legal_action_mask                           # [B, 9]
    best = jnp.where(best.any(-1, keepdims=True), best, state.legal_action_mask)  # terminal rows: anything legal
    return jax.random.categorical(rng_key, jnp.where(best, 0.0, -jnp.inf))
