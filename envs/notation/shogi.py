"""Notation of the shogi family: shogi in USI, animal_shogi in our own notation (envs/notation/__init__.py documents
both and the pgx layouts they are read from)."""

from __future__ import annotations

import functools
import re

import numpy as np

from envs.notation.base import Notation

# ---------------------------------------------------------------------------------------------------------------------
# shogi: square = x * 9 + y in the mover's view (x = file - 1, y = rank a..i), whole board rotated 180 degrees for
# White; pieces 0..13 the mover's (P L N S B R G K +P +L +N +S +B +R), 14..27 the opponent's, -1 empty.

_SHOGI_PIECES = ["P", "L", "N", "S", "B", "R", "G", "K", "+P", "+L", "+N", "+S", "+B", "+R"]
_SHOGI_HAND = "PLNSBRG"  # pgx hand / drop order


@functools.cache
def _shogi_from_idx() -> np.ndarray:
    """[direction 0..9, to, 8] candidate from-squares along the direction, nearest first (pgx's LEGAL_FROM_IDX)."""
    deltas = [(0, 1), (-1, 1), (1, 1), (-1, 0), (1, 0), (0, -1), (-1, -1), (1, -1), (-1, 2), (1, 2)]
    table = -np.ones((10, 81, 8), dtype=np.int64)
    for d, (dx, dy) in enumerate(deltas):
        for to in range(81):
            x, y = divmod(to, 9)
            for i in range(8):
                x, y = x + dx, y + dy
                if not (0 <= x < 9 and 0 <= y < 9):
                    break
                table[d, to, i] = x * 9 + y
                if d >= 8:
                    break
    return table


def _shogi_color(s) -> int:
    return int(s._x.color)


def _shogi_square(sq: int, color: int) -> str:
    sq = int(sq) if color == 0 else 80 - int(sq)
    x, y = divmod(sq, 9)
    return f"{x + 1}{'abcdefghi'[y]}"


def _shogi_absolute(s) -> tuple[np.ndarray, np.ndarray]:
    """(board [81] with 0..13 Black's and 14..27 White's pieces, hands [2 (Black, White), 7])."""
    board, hand = np.asarray(s._x.board), np.asarray(s._x.hand)
    if _shogi_color(s) == 0:
        return board, hand
    flipped = np.where(board < 0, -1, (board + 14) % 28)[::-1]
    return flipped, hand[::-1]


def _shogi_render(s) -> str:
    board, hand = _shogi_absolute(s)
    header = "  " + "".join(f"{f:>3}" for f in range(9, 0, -1))
    lines = [header]
    for y in range(9):
        cells = []
        for f in range(9, 0, -1):
            p = board[(f - 1) * 9 + y]
            cells.append("." if p < 0 else _SHOGI_PIECES[p] if p < 14 else _SHOGI_PIECES[p - 14].lower())
        lines.append("  " + "".join(f"{c:>3}" for c in cells) + f"  {'abcdefghi'[y]}")

    def hand_text(h):
        items = [f"{_SHOGI_HAND[i]}{'' if h[i] == 1 else h[i]}" for i in range(7) if h[i] > 0]
        return " ".join(items) or "-"

    lines.append(f"hands: Black (sente, uppercase) {hand_text(hand[0])}; White (gote, lowercase) {hand_text(hand[1])}")
    return "\n".join(lines)


def _shogi_format(s, a: int) -> str:
    color = _shogi_color(s)
    direction, to = divmod(int(a), 81)
    if not 0 <= direction < 27:
        raise ValueError(f"shogi action {a} out of range 0..{27 * 81 - 1}")
    if direction >= 20:
        return f"{_SHOGI_HAND[direction - 20]}*{_shogi_square(to, color)}"
    idx = _shogi_from_idx()[direction % 10, to]
    board = np.asarray(s._x.board)
    cand = np.where(idx >= 0, board[np.maximum(idx, 0)], -1)
    own = (idx >= 0) & (cand >= 0) & (cand < 14)
    if not own.any():
        raise ValueError(f"shogi action {a}: no piece of the side to move can make it")
    from_ = int(idx[np.argmax(own)])
    return _shogi_square(from_, color) + _shogi_square(to, color) + ("+" if direction >= 10 else "")


# ---------------------------------------------------------------------------------------------------------------------
# animal_shogi: square = x * 4 + y in the mover's view, x = 0 the right column, y = 0 the far row; rotated 180
# degrees for the second player. Pieces 0..4 = chick, elephant, giraffe, lion, hen of the mover; 5..9 the opponent's.

_ANIMAL_PIECES = "CEGLH"
_ANIMAL_DIRS = [(-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)]  # pgx `_to` (dx, dy)


def _animal_color(s) -> int:
    return int(s._turn)


def _animal_square(sq: int, color: int) -> str:
    sq = int(sq) if color == 0 else 11 - int(sq)
    x, y = divmod(sq, 4)
    return f"{'abc'[2 - x]}{4 - y}"


def _animal_absolute(s) -> tuple[np.ndarray, np.ndarray]:
    """(board [12]: 0..4 first player's, 5..9 second's, -1 empty; hands [2 (first, second), 3])."""
    board, hand = np.asarray(s._board), np.asarray(s._hand)
    if _animal_color(s) == 0:
        return board, hand
    return np.where(board < 0, -1, (board + 5) % 10)[::-1], hand[::-1]


def _animal_render(s) -> str:
    board, hand = _animal_absolute(s)
    header = "   a b c"
    lines = [header]
    for rank in range(4, 0, -1):
        cells = []
        for f in range(3):
            p = board[(2 - f) * 4 + (4 - rank)]
            cells.append("." if p < 0 else _ANIMAL_PIECES[p] if p < 5 else _ANIMAL_PIECES[p - 5].lower())
        lines.append(f"{rank}  " + " ".join(cells) + f"  {rank}")
    lines.append(header)

    def hand_text(h):
        return " ".join(f"{_ANIMAL_PIECES[i]}{'' if h[i] == 1 else h[i]}" for i in range(3) if h[i] > 0) or "-"

    lines.append(f"hands: first (uppercase) {hand_text(hand[0])}; second (lowercase) {hand_text(hand[1])}")
    lines.append("L lion, G giraffe, E elephant, C chick, H hen")
    return "\n".join(lines)


def _animal_format(s, a: int) -> str:
    color = _animal_color(s)
    kind, sq = divmod(int(a), 12)
    if not 0 <= kind < 11:
        raise ValueError(f"animal_shogi action {a} out of range 0..131")
    if kind >= 8:
        return f"{_ANIMAL_PIECES[kind - 8]}*{_animal_square(sq, color)}"
    x, y = divmod(sq, 4)
    dx, dy = _ANIMAL_DIRS[kind]
    if not (0 <= x + dx < 3 and 0 <= y + dy < 4):
        raise ValueError(f"animal_shogi action {a} moves off the board")
    return _animal_square(sq, color) + _animal_square((x + dx) * 4 + y + dy, color)


# ---------------------------------------------------------------------------------------------------------------------
# the notations


def _drop_or_move(t: str) -> str:
    """Piece letter of a drop upper-case, squares lower-case ("p*5E" -> "P*5e")."""
    return t[0].upper() + t[1:].lower() if "*" in t else t.lower()


def _shogi_cell(s, square: str) -> str:
    p = int(_shogi_absolute(s)[0][(int(square[0]) - 1) * 9 + "abcdefghi".index(square[1])])
    return "." if p < 0 else _SHOGI_PIECES[p] if p < 14 else _SHOGI_PIECES[p - 14].lower()


def _animal_cell(s, square: str) -> str:
    p = int(_animal_absolute(s)[0][(2 - "abc".index(square[0])) * 4 + 4 - int(square[1])])
    return "." if p < 0 else _ANIMAL_PIECES[p] if p < 5 else _ANIMAL_PIECES[p - 5].lower()


SHOGI = Notation(
    _shogi_render,
    _shogi_format,
    _shogi_color,
    ("Black (sente)", "White (gote)"),
    re.compile(r"[1-9][a-i][1-9][a-i]\+?|[plnsgbr]\*[1-9][a-i]", re.I),
    _drop_or_move,
    "USI: from and to squares like 7g7f (files 1-9 from the right, ranks a-i from the top), promotion 8h2b+, drop P*5e",
    cell=_shogi_cell,
)
ANIMAL_SHOGI = Notation(
    _animal_render,
    _animal_format,
    _animal_color,
    ("first (uppercase)", "second (lowercase)"),
    re.compile(r"[a-c][1-4][a-c][1-4]|[ceg]\*[a-c][1-4]", re.I),
    _drop_or_move,
    "from and to squares like b2b3 (files a-c from the left, ranks 1-4 from the first player's side), "
    "drop C*a3 (C chick, E elephant, G giraffe)",
    cell=_animal_cell,
)
