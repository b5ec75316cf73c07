"""Notation of the games where a move puts a piece on one cell of a grid: tic_tac_toe, connect_four, othello, hex
(envs/notation/__init__.py documents each notation and the pgx layout it is read from)."""

from __future__ import annotations

import re
from collections.abc import Callable
from string import ascii_lowercase

import numpy as np

from envs.notation.base import Notation, stone

FIRST_SECOND = ("X", "O")


def number_action(s, t: str) -> int:
    """Direct parser of moves numbered from 1 (tic_tac_toe cells, connect_four columns): action = number - 1."""
    return int(t) - 1


def board_action(width: Callable, special: str) -> Callable:
    """Direct parser of "<column letter><row number>" cells (cell = (row - 1) * width + column) plus one special word
    (the action after the last cell)."""

    def parse(s, t: str) -> int:
        n = width(s)
        if t == special:
            return n * n
        col, row = ascii_lowercase[:n].index(t[0]), int(t[1:]) - 1
        if not (col < n and 0 <= row < n):
            raise ValueError(f"{t!r} is off the {n}x{n} board")
        return row * n + col

    return parse


# ---------------------------------------------------------------------------------------------------------------------
# tic_tac_toe


def _ttt_render(s) -> str:
    board = np.asarray(s._x.board)
    cells = [str(i + 1) if board[i] < 0 else "XO"[board[i]] for i in range(9)]
    rows = [" " + " | ".join(cells[r * 3 : r * 3 + 3]) for r in range(3)]
    return "\n---+---+---\n".join(rows)


def _ttt_side(s) -> int:
    return int(s._x.color)


def _ttt_format(s, a: int) -> str:
    if not 0 <= a < 9:
        raise ValueError(f"tic_tac_toe action {a} out of range 0..8")
    return str(a + 1)


def _ttt_cell(s, square: str) -> str:
    v = int(np.asarray(s._x.board)[int(square) - 1])
    return "." if v < 0 else "XO"[v]


TIC_TAC_TOE = Notation(
    _ttt_render,
    _ttt_format,
    _ttt_side,
    FIRST_SECOND,
    re.compile(r"[1-9]"),
    str,
    "a cell number 1-9, counted row by row from the top-left (5 = centre)",
    number_action,
    _ttt_cell,
)


# ---------------------------------------------------------------------------------------------------------------------
# connect_four


def _c4_render(s) -> str:
    board = np.asarray(s._x.board).reshape(6, 7)
    lines = [" " + " ".join(str(c + 1) for c in range(7))]
    lines += [" " + " ".join("." if v < 0 else "XO"[v] for v in row) for row in board]
    return "\n".join(lines)


def _c4_format(s, a: int) -> str:
    if not 0 <= a < 7:
        raise ValueError(f"connect_four action {a} out of range 0..6")
    return str(a + 1)


CONNECT_FOUR = Notation(
    _c4_render,
    _c4_format,
    lambda s: int(s._x.color),
    FIRST_SECOND,
    re.compile(r"[1-7]"),
    str,
    "a column number 1-7, counted from the left",
    number_action,
)


# ---------------------------------------------------------------------------------------------------------------------
# othello: square i = file i % 8, rank i // 8 + 1; board > 0 = the mover's discs


def _othello_abs(s) -> np.ndarray:
    board = np.asarray(s._x.board)
    return board if int(s._x.turn) == 0 else -board  # +1 Black (first player), -1 White


def _othello_render(s) -> str:
    board = _othello_abs(s)
    legal = np.asarray(s.legal_action_mask)
    header = "   " + " ".join(ascii_lowercase[:8])
    lines = [header]
    for rank in range(8, 0, -1):
        cells = []
        for f in range(8):
            i = (rank - 1) * 8 + f
            cells.append("X" if board[i] > 0 else "O" if board[i] < 0 else "*" if legal[i] else ".")
        lines.append(f"{rank}  " + " ".join(cells) + f"  {rank}")
    lines.append(header)
    lines.append(f"X (Black) {int((board > 0).sum())}, O (White) {int((board < 0).sum())}; * = legal move")
    return "\n".join(lines)


def _othello_format(s, a: int) -> str:
    if a == 64:
        return "pass"
    if not 0 <= a < 64:
        raise ValueError(f"othello action {a} out of range 0..64")
    return f"{ascii_lowercase[a % 8]}{a // 8 + 1}"


_othello_action = board_action(lambda s: 8, "pass")

OTHELLO = Notation(
    _othello_render,
    _othello_format,
    lambda s: int(s._x.turn),
    ("X (Black)", "O (White)"),
    re.compile(r"[a-h][1-8]|pass", re.I),
    str.lower,
    "a square like d3 (files a-h from the left, ranks 1-8 from the bottom), or pass when you cannot move",
    _othello_action,
    lambda s, square: stone(_othello_abs(s)[_othello_action(s, square.lower())]),
)


# ---------------------------------------------------------------------------------------------------------------------
# hex: cell = row * N + col, row 0 on top; board > 0 = the mover's stones; action N*N = swap


def _hex_size(s) -> int:
    return int(round(np.sqrt(np.asarray(s._x.board).shape[0])))


def _hex_side(s) -> int:
    return int(s._x.step_count) % 2


def _hex_abs(s) -> np.ndarray:
    board = np.asarray(s._x.board)
    return board if _hex_side(s) == 0 else -board  # +: first player (X), -: second (O)


def _hex_render(s) -> str:
    n = _hex_size(s)
    board = _hex_abs(s)
    header = " ".join(ascii_lowercase[:n])
    lines = ["   " + header]  # cell (r, c) is drawn at column 3 + r + 2c
    for r in range(n):
        cells = [stone(v) for v in board[r * n : (r + 1) * n]]
        lines.append(f"{r + 1:>2} " + " " * r + " ".join(cells) + f" {r + 1}")
    lines.append(" " * (n + 3) + header)
    lines.append("X connects the top and bottom rows, O the left and right columns")
    return "\n".join(lines)


def _hex_format(s, a: int) -> str:
    n = _hex_size(s)
    if a == n * n:
        return "swap"
    if not 0 <= a < n * n:
        raise ValueError(f"hex action {a} out of range 0..{n * n}")
    return f"{ascii_lowercase[a % n]}{a // n + 1}"


_hex_action = board_action(_hex_size, "swap")

HEX = Notation(
    _hex_render,
    _hex_format,
    _hex_side,
    FIRST_SECOND,
    re.compile(r"[a-k](?:1[01]|[1-9])|swap", re.I),
    str.lower,
    "a cell like f6 (columns a-k from the left, rows 1-11 from the top), or swap on the second move",
    _hex_action,
    lambda s, square: stone(_hex_abs(s)[_hex_action(s, square.lower())]),
)
