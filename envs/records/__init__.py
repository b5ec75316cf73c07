"""Game records on disk: SGF for Go, PGN for chess, JSON for every other game; read back and replayed with pgx.

A `GameRecord` is the list of pgx actions played from pgx's initial position, plus who played and how it ended. Every
supported game starts from the same position whatever `env.init`'s key is, except for `current_player`: pgx draws
which player id (0 or 1) moves first (`jax.random.bernoulli(key)`), and `rewards` are indexed by player id. The record
keeps that id as `first_player`, so `replay` rebuilds the exact states (rewards included), not only the boards.

Formats (`record_format(game)` picks one; `write_record` writes it, `read_record` reads all three):

* go_9x9, go_19x19 -- SGF (FF[4], via sgfmill): SZ, KM (pgx's komi, read from the env), RU[Tromp-Taylor] with a root
  comment (C) on pgx's rules, PB/PW, RE ("B+" / "W+", followed by the margin when `meta` has one under "margin" (see
  `go_margin`) or by "R" when meta "resigned" is "true"; "0" for a draw, "?" for an unfinished game), then one node
  per move, B[xy] / W[xy], a pass written as an empty move B[] (FF[4] section "Pass"). SGF point "xy" is x = column
  from the left and y = row from the top, the same as pgx's action `x + N * y` (pgx's own SGF reader,
  `pgx/experimental/go.py`; see `envs/notation/go.py`). `first_player` and `meta` go in the game comment GC as
  `az_jax {json}`.
* chess -- PGN (via python-chess): the Seven Tag Roster (White, Black, Result "1-0" / "0-1" / "1/2-1/2", "*" for an
  unfinished game; Event, Site, Date, Round from `meta` when it has them), a "PgxFirstPlayer" tag, one tag per other
  `meta` item, then the moves in SAN. pgx actions are converted with `envs.notation.chess_moves.action_to_move`.
* all other games -- JSON: {"game", "players", "result", "first_player", "meta", "moves": [move text per ply, from
  `envs.notation.format_move`], "actions": [pgx action ids]}. "actions" is authoritative when reading; a hand-written
  file may give only "moves".

Conventions: `result` is the outcome for the player who moved first (Black in Go, White in chess, X elsewhere): +1 a
win, -1 a loss, 0 a draw or an unfinished game (mark the latter with meta {"termination": "unterminated"}, PGN's own
word, so that PGN writes "*" and SGF "?"). `meta` values are stored as one-line strings (keys are identifiers), so
that every format round-trips them exactly.

`replay` and the JSON writer run pgx on the host, one jitted `env.step` per ply (compiled once per game and process);
the SGF and PGN writers and all readers do not run pgx.
"""

from __future__ import annotations

import os

from envs.records.json_record import from_json, to_json
from envs.records.pgn import from_pgn, to_pgn
from envs.records.pgx_replay import env_functions, first_mover_result, go_margin, initial_state, replay, step
from envs.records.record import GO_GAMES, UNTERMINATED, GameRecord, RecordError
from envs.records.sgf import from_sgf, to_sgf

__all__ = [
    "GO_GAMES",
    "GameRecord",
    "RecordError",
    "UNTERMINATED",
    "env_functions",
    "first_mover_result",
    "from_json",
    "from_pgn",
    "from_sgf",
    "go_margin",
    "initial_state",
    "read_record",
    "record_format",
    "record_text",
    "replay",
    "step",
    "to_json",
    "to_pgn",
    "to_sgf",
    "write_record",
]

_EXTENSIONS = {"sgf": ".sgf", "pgn": ".pgn", "json": ".json"}


def record_format(game: str) -> str:
    """ "sgf" for Go, "pgn" for chess, "json" for every other game."""
    return "sgf" if game in GO_GAMES else "pgn" if game == "chess" else "json"


_WRITERS = {"sgf": to_sgf, "pgn": to_pgn, "json": to_json}


def record_text(record: GameRecord) -> str:
    """The record in its game's format (`record_format`)."""
    return _WRITERS[record_format(record.game)](record)


def write_record(path_without_ext: str | os.PathLike, record: GameRecord) -> str:
    """Write `record` to `path_without_ext` + ".sgf" / ".pgn" / ".json" (by game) and return that path. Parent
    directories are created; nothing is written if the record cannot be converted."""
    path = os.fspath(path_without_ext) + _EXTENSIONS[record_format(record.game)]
    text = record_text(record)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


_READERS = {".sgf": from_sgf, ".pgn": from_pgn, ".json": from_json}


def read_record(path: str | os.PathLike) -> GameRecord:
    """Read a .sgf, .pgn or .json record (format by extension). RecordError with one line on any problem."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in _READERS:
        raise RecordError(f"cannot read {path!r}: a record file ends in .sgf, .pgn or .json")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise RecordError(f"cannot read record {path!r}: {e.strerror}") from None
    if ext == ".sgf":
        return from_sgf(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError(f"record {path!r} is not UTF-8 text") from None
    return _READERS[ext](text)
