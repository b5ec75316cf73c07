"""Text boards and human move notation for every game in `envs.GAMES`: `render`, `format_move`, `parse_move`.

All functions take ONE unbatched pgx state (no leading batch axis) and work on host (numpy) copies of it, so they never
trigger a jit compile. `parse_move(game, state, format_move(game, state, a)) == a` for every legal action `a`, and the
formats of the legal actions of a position are distinct (tests/test_play.py checks this on random positions).

Notation per game, with the pgx layout it is read from (pgx 2.x sources, `pgx/<game>.py` and `pgx/_src/games/`):

* tic_tac_toe -- cells "1".."9", row-major from the top-left ("5" is the centre). pgx: `_x.board[9]` row-major from the
  top-left, action = cell index, so action = number - 1. X (colour 0) moves first.
* connect_four -- the column "1".."7" from the left. pgx: action = column index, `_x.board[42]` row-major, row 0 on top.
* othello -- "d3" style squares, files a-h from the left, ranks 1-8 from the bottom, and "pass" (pgx action 64, legal
  only when nothing else is). pgx square i is file i % 8, rank i // 8 + 1; under this reading the first player has
  the discs of Black in the standard set-up (d5, e4) and the standard first moves d3, c4, f5, e6, so it is Black.
  (pgx's SVG drawer puts square 0 on the top row; that is the same board mirrored top-bottom.)
* hex -- "a1" .. "k11": column letter a-k from the left, row number 1-11 from the top (pgx cell = (row-1)*11 + col),
  and "swap" (pgx action 121, the pie rule, legal on the second move only). The first player (X) connects the top and
  bottom rows, the second (O) the left and right columns (checked against pgx's terminal test in the tests).
* go_9x9, go_19x19 -- GTP vertices ("D4", letter I skipped, row 1 at the bottom, case-insensitive) and "pass", via
  `envs.go_notation`. Black (X) moves first.
* chess -- UCI long algebraic: "e2e4", castling as the king's move "e1g1", promotions "e7e8q" (a four-letter pawn move
  to the last rank is taken as a queen promotion when parsing). pgx stores the board from the mover's side (ranks
  mirrored when Black is to move) and actions as from-square * 73 + plane (AlphaZero); we undo the mirror.
* gardner_chess -- the same UCI style on the 5x5 board: squares a1..e5, "a4a5q" etc.; action = from * 49 + plane.
* shogi -- USI: "7g7f", promotion "8h2b+", drops "P*5e" (piece letters P L N S G B R). Files 1-9 from the right (as
  seen by Black/sente), ranks a-i from the top. pgx action = direction * 81 + to-square (dlshogi encoding, board seen
  from the mover; the from-square is the first own piece along the direction), decoded as pgx does.
* animal_shogi -- our own chess-like notation: files a-c from the left and ranks 1-4 from the bottom, both as seen by
  the first player; a move is from-square + to-square ("b2b3"), a drop is piece letter + "*" + square ("C*a3"). Pieces:
  L lion, G giraffe, E elephant, C chick, H hen. A chick reaching the far rank always becomes a hen, so there is no
  promotion suffix. Capitals are the first player's pieces on the board; drops are typed with either case.

Errors: `parse_move` raises ValueError with a one-line message for malformed text (naming the expected notation) and
for well-formed but illegal moves (listing some legal ones).
"""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Callable

import jax
import numpy as np

from envs import go_notation
from envs.notation_shogi import (  # the shogi family lives in its own module
    _ANIMAL_PIECES, _SHOGI_PIECES, _animal_absolute, _animal_color, _animal_format, _animal_render, _animal_square,
    _shogi_absolute, _shogi_color, _shogi_format, _shogi_render, _shogi_square)

__all__ = ["NOTATION_GAMES", "format_move", "legal_moves", "notation_help", "parse_move", "player_names", "render",
           "side_to_move"]

_MAX_LISTED = 24  # legal moves quoted in an "illegal move" message


def _host(state):
    """A numpy copy of one unbatched pgx state (idempotent on host states)."""
    state = jax.device_get(state)
    if np.ndim(state.legal_action_mask) != 1:
        raise ValueError(f"expected one unbatched state, got legal_action_mask of shape "
                         f"{np.shape(state.legal_action_mask)}")
    return state


def _letters(n: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[:n]


# ---------------------------------------------------------------------------------------------------------------------
# tic_tac_toe


def _ttt_render(s) -> str:
    board = np.asarray(s._x.board)
    cells = [str(i + 1) if board[i] < 0 else "XO"[board[i]] for i in range(9)]
    rows = [" " + " | ".join(cells[r * 3:r * 3 + 3]) for r in range(3)]
    return "\n---+---+---\n".join(rows)


def _ttt_side(s) -> int:
    return int(s._x.color)


def _ttt_format(s, a: int) -> str:
    if not 0 <= a < 9:
        raise ValueError(f"tic_tac_toe action {a} out of range 0..8")
    return str(a + 1)


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


# ---------------------------------------------------------------------------------------------------------------------
# othello: square i = file i % 8, rank i // 8 + 1; board > 0 = the mover's discs


def _othello_abs(s) -> np.ndarray:
    board = np.asarray(s._x.board)
    return board if int(s._x.turn) == 0 else -board    # +1 Black (first player), -1 White


def _othello_render(s) -> str:
    board = _othello_abs(s)
    legal = np.asarray(s.legal_action_mask)
    header = "   " + " ".join(_letters(8))
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
    return f"{_letters(8)[a % 8]}{a // 8 + 1}"


# ---------------------------------------------------------------------------------------------------------------------
# hex: cell = row * N + col, row 0 on top; board > 0 = the mover's stones; action N*N = swap


def _hex_size(s) -> int:
    return int(round(np.sqrt(np.asarray(s._x.board).shape[0])))


def _hex_side(s) -> int:
    return int(s._x.step_count) % 2


def _hex_render(s) -> str:
    n = _hex_size(s)
    board = np.asarray(s._x.board)
    board = board if _hex_side(s) == 0 else -board    # +: first player (X), -: second (O)
    header = " ".join(_letters(n))
    lines = ["   " + header]                                   # cell (r, c) is drawn at column 3 + r + 2c
    for r in range(n):
        cells = ["X" if v > 0 else "O" if v < 0 else "." for v in board[r * n:(r + 1) * n]]
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
    return f"{_letters(n)[a % n]}{a // n + 1}"


# ---------------------------------------------------------------------------------------------------------------------
# go: board > 0 black, < 0 white; GTP coordinates from envs.go_notation


def _go_size(s) -> int:
    return int(round(np.sqrt(np.asarray(s.legal_action_mask).shape[0] - 1)))


def _go_side(s) -> int:
    return int(s._x.step_count) % 2


def _go_render(s) -> str:
    n = _go_size(s)
    board = np.asarray(s._x.board)
    header = "    " + " ".join(go_notation.GTP_COLUMNS[:n])
    lines = [header]
    for r in range(n):
        cells = ["X" if v > 0 else "O" if v < 0 else "." for v in board[r * n:(r + 1) * n]]
        lines.append(f"{n - r:>2}  " + " ".join(cells) + f"  {n - r}")
    lines.append(header)
    captured = np.asarray(s._x.num_captured)
    lines.append(f"captured by X (Black) {int(captured[0])}, by O (White) {int(captured[1])}")
    return "\n".join(lines)


def _go_format(s, a: int) -> str:
    return go_notation.action_to_vertex(a, _go_size(s))


# ---------------------------------------------------------------------------------------------------------------------
# chess-like boards (chess 8x8, gardner 5x5): square = file * N + rank in the mover's view (ranks mirrored for Black),
# board > 0 = the mover's pieces, 1..6 = P N B R Q K


@functools.cache
def _chess_from_plane() -> np.ndarray:
    from pgx._src.games.chess import FROM_PLANE
    return np.asarray(FROM_PLANE)      # [64, 73] -> to-square, -1 off board


@functools.cache
def _gardner_to_map() -> np.ndarray:
    from pgx._src.gardner_chess_utils import TO_MAP
    return np.asarray(TO_MAP)          # [25, 49] -> to-square, -1 off board


@dataclasses.dataclass(frozen=True)
class _ChessLike:
    size: int
    planes: int
    to_table: Callable[[], np.ndarray]
    fields: Callable  # state -> (board, colour to move)

    def square(self, sq: int, color: int) -> str:
        f, r = divmod(int(sq), self.size)
        r = r if color == 0 else self.size - 1 - r
        return f"{_letters(self.size)[f]}{r + 1}"

    def absolute(self, s) -> np.ndarray:
        """Board [file, rank] in real coordinates; + white, - black."""
        board, color = self.fields(s)
        board = np.asarray(board).reshape(self.size, self.size)
        return board if color == 0 else -board[:, ::-1]

    def render(self, s) -> str:
        board = self.absolute(s)
        header = "   " + " ".join(_letters(self.size))
        lines = [header]
        for r in range(self.size - 1, -1, -1):
            cells = ["." if v == 0 else "PNBRQK"[v - 1] if v > 0 else "pnbrqk"[-v - 1] for v in board[:, r]]
            lines.append(f"{r + 1}  " + " ".join(cells) + f"  {r + 1}")
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


_CHESS = _ChessLike(8, 73, _chess_from_plane, lambda s: (s._x.board, int(s._x.color)))
_GARDNER = _ChessLike(5, 49, _gardner_to_map, lambda s: (s._board, int(s._turn)))


def _chess_render(s) -> str:
    from pgx.experimental.chess import to_fen
    return _CHESS.render(s) + "\nFEN: " + to_fen(s)



# ---------------------------------------------------------------------------------------------------------------------
# the table


@dataclasses.dataclass(frozen=True)
class _Notation:
    render: Callable            # host state -> board text (without the side-to-move line)
    format: Callable            # (host state, action int) -> move text
    side: Callable              # host state -> colour to move, 0 = the first player
    colors: tuple[str, str]     # names of the first and second player
    syntax: re.Pattern          # what a well-formed move looks like (full match, after strip)
    canonical: Callable         # well-formed text -> the spelling format() produces
    help: str                   # one line describing the notation
    direct: Callable | None = None   # (host state, canonical text) -> action, where the notation maps straight


def _lower(t: str) -> str:
    return t.lower()


def _drop_or_move(t: str) -> str:
    """Piece letter of a drop upper-case, squares lower-case ("p*5E" -> "P*5e")."""
    return t[0].upper() + t[1:].lower() if "*" in t else t.lower()


def _go_canonical(t: str) -> str:
    return "pass" if t.lower() == "pass" else t.upper()


def _number_action(s, t: str) -> int:
    return int(t) - 1


def _board_action(width: Callable, special: str) -> Callable:
    """Direct parser of "<column letter><row number>" cells (cell = (row - 1) * width + column) plus one special word
    (the action after the last cell)."""
    def parse(s, t: str) -> int:
        n = width(s)
        if t == special:
            return n * n
        col, row = _letters(n).index(t[0]), int(t[1:]) - 1
        if not (col < n and 0 <= row < n):
            raise ValueError(f"{t!r} is off the {n}x{n} board")
        return row * n + col
    return parse


def _go_action(s, t: str) -> int:
    return go_notation.vertex_to_action(t, _go_size(s))


_FIRST_SECOND = ("X", "O")

_NOTATIONS: dict[str, _Notation] = {
    "tic_tac_toe": _Notation(
        _ttt_render, _ttt_format, _ttt_side, _FIRST_SECOND, re.compile(r"[1-9]"), str,
        "a cell number 1-9, counted row by row from the top-left (5 = centre)", _number_action),
    "connect_four": _Notation(
        _c4_render, _c4_format, lambda s: int(s._x.color), _FIRST_SECOND, re.compile(r"[1-7]"), str,
        "a column number 1-7, counted from the left", _number_action),
    "othello": _Notation(
        _othello_render, _othello_format, lambda s: int(s._x.turn), ("X (Black)", "O (White)"),
        re.compile(r"[a-h][1-8]|pass", re.I), _lower,
        "a square like d3 (files a-h from the left, ranks 1-8 from the bottom), or pass when you cannot move",
        _board_action(lambda s: 8, "pass")),
    "hex": _Notation(
        _hex_render, _hex_format, _hex_side, ("X", "O"), re.compile(r"[a-k](?:1[01]|[1-9])|swap", re.I), _lower,
        "a cell like f6 (columns a-k from the left, rows 1-11 from the top), or swap on the second move",
        _board_action(_hex_size, "swap")),
    "go_9x9": _Notation(
        _go_render, _go_format, _go_side, ("X (Black)", "O (White)"), re.compile(r"[a-hj][1-9]|pass", re.I),
        _go_canonical, "a point like E5 (columns A-J without I, rows 1-9 from the bottom), or pass", _go_action),
    "go_19x19": _Notation(
        _go_render, _go_format, _go_side, ("X (Black)", "O (White)"),
        re.compile(r"[a-hj-t](?:1[0-9]|[1-9])|pass", re.I), _go_canonical,
        "a point like D4 (columns A-T without I, rows 1-19 from the bottom), or pass", _go_action),
    "chess": _Notation(
        _chess_render, _CHESS.format, lambda s: int(s._x.color), ("White", "Black"),
        re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?", re.I), _lower,
        "UCI long algebraic: from and to squares like e2e4, castling e1g1, promotion e7e8q"),
    "gardner_chess": _Notation(
        _GARDNER.render, _GARDNER.format, lambda s: int(s._turn), ("White", "Black"),
        re.compile(r"[a-e][1-5][a-e][1-5][qrbn]?", re.I), _lower,
        "UCI style on the 5x5 board: from and to squares like a2a3 (a1-e5), promotion b4b5q"),
    "shogi": _Notation(
        _shogi_render, _shogi_format, _shogi_color, ("Black (sente)", "White (gote)"),
        re.compile(r"[1-9][a-i][1-9][a-i]\+?|[plnsgbr]\*[1-9][a-i]", re.I), _drop_or_move,
        "USI: from and to squares like 7g7f (files 1-9 from the right, ranks a-i from the top), promotion 8h2b+, "
        "drop P*5e"),
    "animal_shogi": _Notation(
        _animal_render, _animal_format, _animal_color, ("first (uppercase)", "second (lowercase)"),
        re.compile(r"[a-c][1-4][a-c][1-4]|[ceg]\*[a-c][1-4]", re.I), _drop_or_move,
        "from and to squares like b2b3 (files a-c from the left, ranks 1-4 from the first player's side), "
        "drop C*a3 (C chick, E elephant, G giraffe)"),
}

NOTATION_GAMES = tuple(_NOTATIONS)


def _notation(game: str) -> _Notation:
    try:
        return _NOTATIONS[game]
    except KeyError:
        raise ValueError(f"no notation for game {game!r}; known: {', '.join(_NOTATIONS)}") from None


def notation_help(game: str) -> str:
    """One line telling a person how to type a move of `game`."""
    return _notation(game).help


def player_names(game: str) -> tuple[str, str]:
    """Names of the first and the second player ("X", "O"; "White", "Black"; ...), as `render` uses them."""
    return _notation(game).colors


def side_to_move(game: str, state) -> str:
    """Name of the side to move ("X", "White", "Black (sente)", ...)."""
    n = _notation(game)
    return n.colors[n.side(_host(state))]


def render(game: str, state) -> str:
    """A text board of one unbatched state, with labelled rows and columns and a line saying who is to move."""
    n = _notation(game)
    s = _host(state)
    me = n.side(s)
    if _over(s):
        r = float(np.asarray(s.rewards)[int(s.current_player)])     # for the colour that would move next
        status = "game over: " + ("draw" if r == 0 else f"{n.colors[me if r > 0 else 1 - me]} wins")
    else:
        status = f"{n.colors[me]} to move"
    return f"{n.render(s)}\n{status}"


def format_move(game: str, state, action: int) -> str:
    """The move text of pgx `action` in `state` (the position before the move)."""
    return _notation(game).format(_host(state), int(action))


def _cell(game: str, state, square: str) -> str:
    """What the board shows on `square` (spelt as in the game's moves): "." empty, else the rendered piece or stone
    ("X", "O", "P", "k", "+R", ...). For tests and move-effect checks; connect_four has no squares."""
    s = _host(state)

    def stone(v) -> str:
        return "X" if v > 0 else "O" if v < 0 else "."

    if game == "tic_tac_toe":
        v = int(np.asarray(s._x.board)[int(square) - 1])
        return "." if v < 0 else "XO"[v]
    if game == "othello":
        return stone(_othello_abs(s)[_board_action(lambda _: 8, "pass")(s, square.lower())])
    if game == "hex":
        board = np.asarray(s._x.board) * (1 if _hex_side(s) == 0 else -1)
        return stone(board[_board_action(_hex_size, "swap")(s, square.lower())])
    if game in ("go_9x9", "go_19x19"):
        return stone(np.asarray(s._x.board)[go_notation.vertex_to_action(square, _go_size(s))])
    if game in ("chess", "gardner_chess"):
        spec = _CHESS if game == "chess" else _GARDNER
        v = int(spec.absolute(s)[_letters(spec.size).index(square[0]), int(square[1:]) - 1])
        return "." if v == 0 else "PNBRQK"[v - 1] if v > 0 else "pnbrqk"[-v - 1]
    if game == "shogi":
        p = int(_shogi_absolute(s)[0][(int(square[0]) - 1) * 9 + "abcdefghi".index(square[1])])
        return "." if p < 0 else _SHOGI_PIECES[p] if p < 14 else _SHOGI_PIECES[p - 14].lower()
    if game == "animal_shogi":
        p = int(_animal_absolute(s)[0][(2 - "abc".index(square[0])) * 4 + 4 - int(square[1])])
        return "." if p < 0 else _ANIMAL_PIECES[p] if p < 5 else _ANIMAL_PIECES[p - 5].lower()
    raise ValueError(f"{game} has no squares")


def _over(s) -> bool:
    return bool(s.terminated) or bool(s.truncated)


def legal_moves(game: str, state) -> dict[str, int]:
    """{move text: action} for every legal action of `state`, in action order; empty once the game is over (pgx then
    marks every action legal)."""
    n = _notation(game)
    s = _host(state)
    if _over(s):
        return {}
    return {n.format(s, int(a)): int(a) for a in np.flatnonzero(np.asarray(s.legal_action_mask))}


def _illegal(raw: str, moves: dict[str, int]) -> ValueError:
    listed = " ".join(list(moves)[:_MAX_LISTED]) + (" ..." if len(moves) > _MAX_LISTED else "")
    return ValueError(f"illegal move {raw!r} in this position; legal moves: {listed}")


def parse_move(game: str, state, text: str) -> int:
    """The pgx action of move `text` in `state`; ValueError (one line) if it is malformed or illegal."""
    n = _notation(game)
    raw = str(text).strip()
    if not n.syntax.fullmatch(raw):
        raise ValueError(f"malformed move {raw!r}: expected {n.help}")
    canon = n.canonical(raw)
    s = _host(state)
    if _over(s):
        raise ValueError("no legal moves: the game is over")
    if n.direct is not None:
        action = n.direct(s, canon)
        if np.asarray(s.legal_action_mask)[action]:
            return action
        raise _illegal(raw, legal_moves(game, s))
    moves = legal_moves(game, s)
    if canon in moves:
        return moves[canon]
    if game in ("chess", "gardner_chess") and canon + "q" in moves:    # "e7e8" = queen promotion
        return moves[canon + "q"]
    raise _illegal(raw, moves)
