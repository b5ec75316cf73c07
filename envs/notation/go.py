"""Go notation: pgx action indices <-> GTP vertices, pgx boards -> stone lists, and the text board of go_9x9 and
go_19x19.

pgx convention (read from `pgx/_src/games/go.py`, `pgx/experimental/go.py` and the SVG drawer
`pgx/_src/dwg/go.py`):

* A board of size N has actions `0 .. N*N`; `a == N*N` is pass.
* For `a < N*N`, `row = a // N` and `col = a % N`, with **row 0 the top row** and col 0 the left
  column. Evidence: pgx's SGF reader maps SGF `[xy]` (x = column from the left, y = row from the
  top) to `action = x + N * y`, and the drawer puts `a // N` on the SVG y axis (downwards).
* `state._x.board[a]` is > 0 for a black stone, < 0 for a white stone, 0 for empty (the magnitude
  is a chain id). Black moves first.

GTP convention (GTP 2 spec, section 2.11): a vertex is a column letter from "ABCDEFGHJKLMNOPQRST"
(the letter I is skipped) followed by a row number, with row 1 at the **bottom**; `pass` is a
move, `resign` is not a board move. GTP vertices are case-insensitive.

Hence `vertex(a) = COLUMNS[a % N] + str(N - a // N)`: pgx's top row (row 0) is GTP row N.

Note on verification: rules of Go are invariant under the 8 symmetries of the board, so replaying
games into GNU Go (tests/test_engines.py) proves the mapping is a consistent bijection that
preserves adjacency, captures and ko, while the orientation (which pgx row is GTP row N) is pinned
by pgx's SGF reader and drawer as cited above.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from envs.notation.base import Notation, stone

# GTP column letters; "I" is skipped by the GTP spec (enough for boards up to 25x25).
GTP_COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"
MAX_BOARD_SIZE = len(GTP_COLUMNS)

PASS = "pass"
RESIGN = "resign"

_VERTEX_RE = re.compile(r"^([A-HJ-Za-hj-z])([1-9][0-9]?)$")


def _check_size(size: int) -> None:
    if not 1 <= size <= MAX_BOARD_SIZE:
        raise ValueError(f"board size must be in [1, {MAX_BOARD_SIZE}], got {size}")


def pass_action(size: int) -> int:
    """The pgx pass action for an N x N board (`N * N`)."""
    _check_size(size)
    return size * size


def action_to_vertex(action: int, size: int) -> str:
    """pgx Go action (int in [0, N*N]) -> GTP vertex ('D4', or 'pass' for N*N)."""
    _check_size(size)
    action = int(action)
    if action == size * size:
        return PASS
    if not 0 <= action < size * size:
        raise ValueError(f"action {action} out of range for a {size}x{size} board")
    row, col = divmod(action, size)  # row 0 = top (pgx)
    return f"{GTP_COLUMNS[col]}{size - row}"  # GTP row 1 = bottom


def is_vertex(text: str, size: int | None = None) -> bool:
    """Whether `text` is a GTP board vertex (not pass/resign), on the board if `size` is given."""
    m = _VERTEX_RE.match(text.strip())
    if m is None:
        return False
    col = GTP_COLUMNS.index(m.group(1).upper())
    row = int(m.group(2))
    limit = MAX_BOARD_SIZE if size is None else size
    return col < limit and 1 <= row <= limit


def vertex_to_action(vertex: str, size: int) -> int:
    """GTP vertex ('D4', 'd4' or 'pass') -> pgx Go action. 'resign' and off-board vertices raise ValueError."""
    _check_size(size)
    text = vertex.strip()
    if text.lower() == PASS:
        return size * size
    if not is_vertex(text, size):
        raise ValueError(f"not a vertex of a {size}x{size} board: {vertex!r}")
    col = GTP_COLUMNS.index(text[0].upper())
    row = size - int(text[1:])
    return row * size + col


def board_to_vertices(board: np.ndarray, size: int) -> tuple[frozenset[str], frozenset[str]]:
    """pgx Go board `[N*N]` (black > 0, white < 0) -> (black vertices, white vertices)."""
    board = np.asarray(board).reshape(-1)
    if board.shape[0] != size * size:
        raise ValueError(f"board has {board.shape[0]} points, expected {size * size}")
    black = frozenset(action_to_vertex(int(a), size) for a in np.flatnonzero(board > 0))
    white = frozenset(action_to_vertex(int(a), size) for a in np.flatnonzero(board < 0))
    return black, white


def normalize_vertices(vertices: Iterable[str]) -> frozenset[str]:
    """Upper-case a collection of GTP vertices so that sets compare equal regardless of case."""
    return frozenset(v.strip().upper() for v in vertices if v.strip())


def parse_score(text: str) -> float:
    """GTP `final_score` text ('B+3.5', 'W+7.5', '0') -> black's margin (positive = black wins).

    Resignation/time results ('B+R', 'W+Resign', 'B+T') map to +inf / -inf.
    """
    t = text.strip()
    if t in ("0", "Draw", "draw", "Jigo", "jigo"):
        return 0.0
    m = re.match(r"^([BWbw])\+(.*)$", t)
    if m is None:
        raise ValueError(f"not a GTP score: {text!r}")
    sign = 1.0 if m.group(1).upper() == "B" else -1.0
    margin = m.group(2).strip()
    if margin.upper() in ("R", "RESIGN", "T", "TIME", "F", "FORFEIT"):
        return sign * float("inf")
    try:
        return sign * float(margin)
    except ValueError as e:
        raise ValueError(f"not a GTP score: {text!r}") from e


# ---------------------------------------------------------------------------------------------------------------------
# the go_9x9 and go_19x19 notations: board > 0 black, < 0 white


def _size(s) -> int:
    return int(round(np.sqrt(np.asarray(s.legal_action_mask).shape[0] - 1)))


def _side(s) -> int:
    return int(s._x.step_count) % 2


def _render(s) -> str:
    n = _size(s)
    board = np.asarray(s._x.board)
    header = "    " + " ".join(GTP_COLUMNS[:n])
    lines = [header]
    for r in range(n):
        cells = [stone(v) for v in board[r * n : (r + 1) * n]]
        lines.append(f"{n - r:>2}  " + " ".join(cells) + f"  {n - r}")
    lines.append(header)
    captured = np.asarray(s._x.num_captured)
    lines.append(f"captured by X (Black) {int(captured[0])}, by O (White) {int(captured[1])}")
    return "\n".join(lines)


def _format(s, a: int) -> str:
    return action_to_vertex(a, _size(s))


def _canonical(t: str) -> str:
    return PASS if t.lower() == PASS else t.upper()


def _action(s, t: str) -> int:
    return vertex_to_action(t, _size(s))


def _cell(s, square: str) -> str:
    return stone(np.asarray(s._x.board)[_action(s, square)])


def _notation(syntax: str, help: str) -> Notation:
    return Notation(
        _render, _format, _side, ("X (Black)", "O (White)"), re.compile(syntax, re.I), _canonical, help, _action, _cell
    )


GO_9X9 = _notation(r"[a-hj][1-9]|pass", "a point like E5 (columns A-J without I, rows 1-9 from the bottom), or pass")
GO_19X19 = _notation(
    r"[a-hj-t](?:1[0-9]|[1-9])|pass", "a point like D4 (columns A-T without I, rows 1-19 from the bottom), or pass"
)
