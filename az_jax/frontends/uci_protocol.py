"""The parts of `az-jax uci` that are the Universal Chess Interface's text and nothing of the engine: parsing
`position` and `go`, and the centipawn scale of a value (the protocol: "UCI protocol", Stefan Meyer-Kahlen, April
2006). The engine and its decisions: uci_engine.py."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from typing import Any

import chess

MAX_ECHO = 60  # characters of a bad token quoted back in an `info string`
SCORE_SCALE, SCORE_STRETCH = 111.714640912, 1.5620688421  # lc0's cp = 111.714640912 * tan(1.5620688421 * v)
GO_NUMBERS = ("wtime", "btime", "winc", "binc", "movestogo", "depth", "nodes", "mate", "movetime")
GO_FLAGS = ("infinite", "ponder")
INTEGER = re.compile(r"[+-]?[0-9]{1,18}")


def score_cp(value: float) -> int:
    """Centipawns of a value in [-1, 1] for the side to move, by lc0's formula (see the module docstring).

    score_cp(0) = 0; score_cp(0.5) = round(111.7146 · tan(0.7810)) = round(111.7146 · 0.99130) = 111."""
    v = min(1.0, max(-1.0, float(value))) if math.isfinite(value) else 0.0
    return int(round(SCORE_SCALE * math.tan(SCORE_STRETCH * v)))


def echo(text: str) -> str:
    """`text` safe to quote on one protocol line: printable ASCII only, at most MAX_ECHO characters."""
    clean = "".join(c if " " <= c <= "~" else "?" for c in text)
    return clean if len(clean) <= MAX_ECHO else clean[: MAX_ECHO - 3] + "..."


class PositionError(ValueError):
    """A `position` command whose position cannot be played (one-line message)."""


@dataclasses.dataclass(frozen=True)
class Position:
    root: str  # the FEN of the root position (python-chess's normal form)
    moves: tuple[chess.Move, ...]  # the moves from it, each legal


def parse_position(args: Sequence[str]) -> Position:
    """The arguments of `position` (after the word) -> Position; PositionError if python-chess rejects it."""
    if not args:
        raise PositionError("position needs 'startpos' or 'fen FEN'")
    if args[0] == "startpos":
        board, rest = chess.Board(), list(args[1:])
    elif args[0] == "fen":
        end = args.index("moves") if "moves" in args else len(args)
        fen = " ".join(args[1:end])
        if not fen:
            raise PositionError("position fen needs a FEN")
        try:
            board = chess.Board(fen)
        except ValueError as e:
            raise PositionError(f"bad FEN {echo(fen)!r}: {echo(str(e))}") from None
        status = chess.Status(board.status())
        if status:
            reasons = ", ".join(str(f.name).lower().replace("_", " ") for f in chess.Status if f.value and f in status)
            raise PositionError(
                f"FEN {echo(fen)!r} is not a position of standard chess that pgx can play ({reasons or status})"
            )
        rest = list(args[end:])
    else:
        raise PositionError(f"position needs 'startpos' or 'fen', got {echo(args[0])!r}")
    root = board.fen()
    if rest and rest[0] != "moves":
        raise PositionError(f"expected 'moves' after the position, got {echo(rest[0])!r}")
    moves = []
    for text in rest[1:]:
        try:
            move = board.parse_uci(text.lower())
        except ValueError:
            raise PositionError(f"illegal or malformed move {echo(text)!r} in {board.fen()}") from None
        if not move:
            raise PositionError("the null move 0000 has no pgx chess action")
        board.push(move)
        moves.append(move)
    return Position(root, tuple(moves))


@dataclasses.dataclass(frozen=True)
class GoCommand:
    """The parameters of one `go` (times in ms, as the spec gives them)."""

    wtime: int | None = None
    btime: int | None = None
    winc: int | None = None
    binc: int | None = None
    movestogo: int | None = None
    depth: int | None = None
    nodes: int | None = None
    mate: int | None = None
    movetime: int | None = None
    infinite: bool = False
    ponder: bool = False
    searchmoves: tuple[str, ...] = ()


def parse_go(args: Sequence[str]) -> tuple[GoCommand, list[str]]:
    """The arguments of `go` -> (GoCommand, notes on what was ignored). Never raises: a `go` always gets a bestmove."""
    values: dict[str, Any] = {}
    notes: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        if token in GO_FLAGS:
            values[token] = True
            i += 1
        elif token in GO_NUMBERS:
            number = args[i + 1] if i + 1 < len(args) else ""
            if INTEGER.fullmatch(number):
                values[token] = int(number)
                i += 2
            else:
                notes.append(f"ignored 'go {token}' without an integer value")
                i += 1
        elif token == "searchmoves":
            i += 1
            moves = []
            while i < len(args) and args[i] not in GO_FLAGS + GO_NUMBERS:
                moves.append(args[i].lower())
                i += 1
            values["searchmoves"] = tuple(moves)
        else:
            notes.append(f"ignored unknown go token {echo(token)!r}")
            i += 1
    return GoCommand(**values), notes
