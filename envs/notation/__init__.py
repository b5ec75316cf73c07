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
* go_9x9, go_19x19 -- GTP vertices ("D4", letter I skipped, row 1 at the bottom, case-insensitive) and "pass"
  (`envs.notation.go`). Black (X) moves first.
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

One module per game family builds each game's `Notation` (envs/notation/base.py): `grid` (tic_tac_toe,
connect_four, othello, hex), `go`, `chess_moves` (chess, gardner_chess, and pgx chess actions <-> python-chess moves),
`shogi` (shogi, animal_shogi). This module dispatches on the game name.

Errors: `parse_move` raises ValueError with a one-line message for malformed text (naming the expected notation) and
for well-formed but illegal moves (listing some legal ones).
"""

from __future__ import annotations

import jax
import numpy as np

from envs.notation import chess_moves, go, grid, shogi
from envs.notation.base import Notation
from envs.state import is_over

__all__ = [
    "NOTATION_GAMES",
    "format_move",
    "legal_moves",
    "notation_help",
    "parse_move",
    "player_names",
    "render",
    "side_to_move",
]

_MAX_LISTED = 24  # legal moves quoted in an "illegal move" message

_NOTATIONS: dict[str, Notation] = {
    "tic_tac_toe": grid.TIC_TAC_TOE,
    "connect_four": grid.CONNECT_FOUR,
    "othello": grid.OTHELLO,
    "hex": grid.HEX,
    "go_9x9": go.GO_9X9,
    "go_19x19": go.GO_19X19,
    "chess": chess_moves.CHESS,
    "gardner_chess": chess_moves.GARDNER_CHESS,
    "shogi": shogi.SHOGI,
    "animal_shogi": shogi.ANIMAL_SHOGI,
}

NOTATION_GAMES = tuple(_NOTATIONS)


def _host(state):
    """A numpy copy of one unbatched pgx state (idempotent on host states)."""
    state = jax.device_get(state)
    if np.ndim(state.legal_action_mask) != 1:
        raise ValueError(
            f"expected one unbatched state, got legal_action_mask of shape {np.shape(state.legal_action_mask)}"
        )
    return state


def _notation(game: str) -> Notation:
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
    if is_over(s):
        r = float(np.asarray(s.rewards)[int(s.current_player)])  # for the colour that would move next
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
    n = _notation(game)
    if n.cell is None:
        raise ValueError(f"{game} has no squares")
    return n.cell(_host(state), square)


def legal_moves(game: str, state) -> dict[str, int]:
    """{move text: action} for every legal action of `state`, in action order; empty once the game is over (pgx then
    marks every action legal)."""
    n = _notation(game)
    s = _host(state)
    if is_over(s):
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
    if is_over(s):
        raise ValueError("no legal moves: the game is over")
    if n.direct is not None:
        action = n.direct(s, canon)
        if np.asarray(s.legal_action_mask)[action]:
            return action
        raise _illegal(raw, legal_moves(game, s))
    moves = legal_moves(game, s)
    if canon in moves:
        return moves[canon]
    if game in ("chess", "gardner_chess") and canon + "q" in moves:  # "e7e8" = queen promotion
        return moves[canon + "q"]
    raise _illegal(raw, moves)
