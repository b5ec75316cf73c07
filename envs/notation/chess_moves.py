"""Notation of chess and gardner_chess (envs/notation/__init__.py documents both), and pgx chess actions <->
python-chess moves (used by the chess records and the UCI engine client).

pgx chess convention (read from `pgx/_src/games/chess.py` and `pgx/experimental/chess.py`):

* A square index is `s = file * 8 + rank` (a1 = 0, a2 = 1, ..., h8 = 63). Note python-chess uses
  `rank * 8 + file` (a1 = 0, b1 = 1, ...).
* pgx stores the board from the side to move's point of view: after every move the board is
  mirrored top-bottom (rank -> 7 - rank; files are NOT mirrored), so when black is to move pgx
  square `file * 8 + r` is the real square on rank `7 - r`.
* An action is `from_square * 73 + plane` (64 x 73 = 4,672, AlphaZero style), in the side to
  move's coordinates:
  - planes 0..8 are under-promotions: `plane // 3` picks rook / bishop / knight and `plane % 3`
    picks the direction: straight ahead (`+1`), capture towards file + 1 (`+9`), capture towards
    file - 1 (`-7`);
  - planes 9..72 are "queen" moves (56: 8 directions x 7 distances) then knight moves (8);
    a pawn reaching the last rank with a queen-move plane promotes to a queen;
  - castling is the king's two-square move (e1g1 = 32 -> 48, e1c1 = 32 -> 16), as in UCI.

Conversions take a `chess.Board` for the side to move and for the piece on the from-square
(needed to tell a queen promotion from a plain pawn move). `pgx_state_to_board` builds that board
from a pgx state with pgx's own FEN writer (repetition history is not carried; it does not affect
move legality).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from string import ascii_lowercase
from typing import Any

import chess
import numpy as np

from envs.notation.base import Notation

__all__ = [
    "CHESS",
    "FROM_PLANE",
    "GARDNER_CHESS",
    "NUM_ACTIONS",
    "TO_PLANE",
    "action_to_move",
    "action_to_uci",
    "legal_action_set",
    "move_to_action",
    "pgx_state_to_board",
    "to_fen",
    "uci_to_action",
]

NUM_ACTIONS = 64 * 73  # 4,672

# -- static tables, built in plain Python at import (same construction as pgx's FROM_PLANE) ------
# Directions of planes 9..72: down, up, left, right, down-left, down-right, up-right, up-left
# (7 distances each) then the 8 knight jumps; (dr, dc) = (rank delta, file delta).
_ZEROS, _SEQ, _RSEQ = [0] * 7, list(range(1, 8)), list(range(-7, 0))
_DR = _RSEQ + _SEQ + _ZEROS + _ZEROS + _RSEQ + _SEQ + _SEQ[::-1] + _RSEQ[::-1] + [-1, +1, -2, +2, -1, +1, -2, +2]
_DC = _ZEROS + _ZEROS + _RSEQ + _SEQ + _RSEQ + _SEQ + _RSEQ + _SEQ + [-2, -2, -1, -1, +2, +2, +1, +1]
_UNDERPROMOTION_STEP = (+1, +9, -7)  # plane % 3: ahead, towards file + 1, towards file - 1
_UNDERPROMOTION_PIECE = (chess.ROOK, chess.BISHOP, chess.KNIGHT)  # plane // 3

FROM_PLANE = -np.ones((64, 73), dtype=np.int32)  # [from, plane] -> to (pgx squares), -1 = off board
TO_PLANE = -np.ones((64, 64), dtype=np.int32)  # [from, to] -> plane 9..72 (no under-promotions)
for _from in range(64):
    for _plane in range(73):
        if _plane < 9:
            _to = _from + _UNDERPROMOTION_STEP[_plane % 3] if _from % 8 == 6 else -1
            if 0 <= _to < 64:
                FROM_PLANE[_from, _plane] = _to
        else:
            _r, _c = _from % 8 + _DR[_plane - 9], _from // 8 + _DC[_plane - 9]
            if 0 <= _r < 8 and 0 <= _c < 8:
                FROM_PLANE[_from, _plane] = _c * 8 + _r
                TO_PLANE[_from, _c * 8 + _r] = _plane
FROM_PLANE.setflags(write=False)
TO_PLANE.setflags(write=False)


def _pgx_to_chess_square(sq: int, turn: chess.Color) -> chess.Square:
    """pgx square (side-to-move coordinates) -> python-chess square."""
    file, rank = divmod(int(sq), 8)
    return chess.square(file, rank if turn == chess.WHITE else 7 - rank)


def _chess_to_pgx_square(sq: chess.Square, turn: chess.Color) -> int:
    """python-chess square -> pgx square in the side to move's coordinates."""
    file, rank = chess.square_file(sq), chess.square_rank(sq)
    return file * 8 + (rank if turn == chess.WHITE else 7 - rank)


def action_to_move(action: int, board: chess.Board) -> chess.Move:
    """pgx chess action in [0, 4672) -> `chess.Move` for `board`'s side to move.

    Raises ValueError if the action points off the board. The move is not checked for legality.
    """
    action = int(action)
    if not 0 <= action < NUM_ACTIONS:
        raise ValueError(f"chess action {action} not in [0, {NUM_ACTIONS})")
    from_, plane = divmod(action, 73)
    to = int(FROM_PLANE[from_, plane])
    if to < 0:
        raise ValueError(f"chess action {action} (from {from_}, plane {plane}) leaves the board")
    from_sq = _pgx_to_chess_square(from_, board.turn)
    to_sq = _pgx_to_chess_square(to, board.turn)
    promotion = None
    if plane < 9:
        promotion = _UNDERPROMOTION_PIECE[plane // 3]
    elif board.piece_type_at(from_sq) == chess.PAWN and to % 8 == 7:
        promotion = chess.QUEEN  # a pawn reaching the last rank on a queen-move plane
    return chess.Move(from_sq, to_sq, promotion=promotion)


def move_to_action(move: chess.Move, board: chess.Board) -> int:
    """`chess.Move` (standard, non-960 castling e1g1 / e1c1) for `board`'s side to move -> pgx action."""
    from_ = _chess_to_pgx_square(move.from_square, board.turn)
    to = _chess_to_pgx_square(move.to_square, board.turn)
    if move.promotion in _UNDERPROMOTION_PIECE:
        step = to - from_
        if from_ % 8 != 6 or step not in _UNDERPROMOTION_STEP:
            raise ValueError(f"{move.uci()} is not a pawn promotion move")
        plane = _UNDERPROMOTION_PIECE.index(move.promotion) * 3 + _UNDERPROMOTION_STEP.index(step)
    else:
        plane = int(TO_PLANE[from_, to])
        if plane < 0:
            raise ValueError(f"{move.uci()} is not expressible as a pgx chess action")
    return from_ * 73 + plane


def action_to_uci(action: int, board: chess.Board) -> str:
    """pgx chess action -> UCI string ('e2e4', 'e7e8q')."""
    return action_to_move(action, board).uci()


def uci_to_action(uci: str, board: chess.Board) -> int:
    """UCI string -> pgx chess action for `board`'s side to move."""
    return move_to_action(chess.Move.from_uci(uci), board)


def legal_action_set(board: chess.Board) -> frozenset[int]:
    """The pgx actions of all of python-chess's legal moves in `board`."""
    return frozenset(move_to_action(m, board) for m in board.legal_moves)


def to_fen(state) -> str:
    """FEN of a pgx chess state (unbatched), by pgx's own writer."""
    from pgx.experimental.chess import to_fen as pgx_to_fen  # local: builds jax arrays at import (starts JAX)

    return pgx_to_fen(state)


def pgx_state_to_board(state: Any) -> chess.Board:
    """pgx chess `State` (unbatched) -> `chess.Board`, via pgx's own FEN writer."""
    return chess.Board(to_fen(state))


# ---------------------------------------------------------------------------------------------------------------------
# the chess and gardner_chess notations: square = file * N + rank in the mover's view (ranks mirrored for Black),
# board > 0 = the mover's pieces, 1..6 = P N B R Q K


@functools.cache
def _gardner_to_map() -> np.ndarray:
    from pgx._src.gardner_chess_utils import TO_MAP  # local: private to pgx, and builds jax arrays at import

    return np.asarray(TO_MAP)  # [25, 49] -> to-square, -1 off board


def _piece(v: int) -> str:
    return "." if v == 0 else "PNBRQK"[v - 1] if v > 0 else "pnbrqk"[-v - 1]


@dataclasses.dataclass(frozen=True)
class _ChessLike:
    size: int
    planes: int
    to_table: Callable[[], np.ndarray]
    fields: Callable  # state -> (board, colour to move)

    def square(self, sq: int, color: int) -> str:
        f, r = divmod(int(sq), self.size)
        r = r if color == 0 else self.size - 1 - r
        return f"{ascii_lowercase[f]}{r + 1}"

    def absolute(self, s) -> np.ndarray:
        """Board [file, rank] in real coordinates; + white, - black."""
        board, color = self.fields(s)
        board = np.asarray(board).reshape(self.size, self.size)
        return board if color == 0 else -board[:, ::-1]

    def render(self, s) -> str:
        board = self.absolute(s)
        header = "   " + " ".join(ascii_lowercase[: self.size])
        lines = [header]
        for r in range(self.size - 1, -1, -1):
            lines.append(f"{r + 1}  " + " ".join(_piece(v) for v in board[:, r]) + f"  {r + 1}")
        lines.append(header)
        lines.append("uppercase = White, lowercase = Black")
        return "\n".join(lines)

    def format(self, s, a: int) -> str:
        board, color = self.fields(s)
        color = int(color)
        from_, plane = divmod(int(a), self.planes)
        table = self.to_table()
        if not 0 <= from_ < self.size * self.size or table[from_, plane] < 0:
            raise ValueError(f"action {a} is not a move on the {self.size}x{self.size} board")
        to = int(table[from_, plane])
        promo = ""
        if plane < 9:
            promo = "rbn"[plane // 3]
        elif np.asarray(board)[from_] == 1 and from_ % self.size == self.size - 2:
            promo = "q"
        return self.square(from_, color) + self.square(to, color) + promo

    def cell(self, s, square: str) -> str:
        return _piece(int(self.absolute(s)[ascii_lowercase.index(square[0]), int(square[1:]) - 1]))


_CHESS = _ChessLike(8, 73, lambda: FROM_PLANE, lambda s: (s._x.board, int(s._x.color)))
_GARDNER = _ChessLike(5, 49, _gardner_to_map, lambda s: (s._board, int(s._turn)))

CHESS = Notation(
    lambda s: _CHESS.render(s) + "\nFEN: " + to_fen(s),
    _CHESS.format,
    lambda s: int(s._x.color),
    ("White", "Black"),
    re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?", re.I),
    str.lower,
    "UCI long algebraic: from and to squares like e2e4, castling e1g1, promotion e7e8q",
    cell=_CHESS.cell,
)
GARDNER_CHESS = Notation(
    _GARDNER.render,
    _GARDNER.format,
    lambda s: int(s._turn),
    ("White", "Black"),
    re.compile(r"[a-e][1-5][a-e][1-5][qrbn]?", re.I),
    str.lower,
    "UCI style on the 5x5 board: from and to squares like a2a3 (a1-e5), promotion b4b5q",
    cell=_GARDNER.cell,
)
