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

import dataclasses
import functools
import io
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import chess
import chess.pgn
import jax
import numpy as np
from sgfmill import common, sgf

from envs import notation
from envs.notation import go
from envs.notation.chess_moves import action_to_move, move_to_action
from envs.registry import GAMES
from envs.state import is_over

__all__ = [
    "GameRecord",
    "RecordError",
    "env_functions",
    "first_mover_result",
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

GO_GAMES = ("go_9x9", "go_19x19")
UNTERMINATED = "unterminated"  # meta["termination"] of a game stopped before the rules ended it
_EXTENSIONS = {"sgf": ".sgf", "pgn": ".pgn", "json": ".json"}
_META_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PGN_ROSTER = ("Event", "Site", "Date", "Round")  # the roster tags a meta item may fill
_PGN_RESERVED = ("White", "Black", "Result", "FEN", "SetUp", "PgxFirstPlayer")
_SGF_TAG = "az_jax "  # prefix of our JSON in the SGF game comment
_RESULT_PGN = {1.0: "1-0", -1.0: "0-1", 0.0: "1/2-1/2"}


class RecordError(ValueError):
    """A game record that cannot be built, written, read or replayed (one-line message)."""


# ---------------------------------------------------------------------------------------------------------------------
# the record


@dataclasses.dataclass(frozen=True)
class GameRecord:
    """One game, as played from pgx's initial position. Fields are normalised on construction (any int-like sequence
    for `actions`, a mapping or pairs for `meta`), so equal games compare equal.

    game:         registry name (`envs.GAMES`), equal to pgx's env id
    actions:      pgx action ids, one per ply                                   # [plies]
    result:       +1 / 0 / -1 for the player who moved first (0 also for an unfinished game)
    players:      (name of the first mover, name of the second mover)
    first_player: pgx player id (0 or 1) of the first mover, i.e. `env.init(key).current_player`
    meta:         extra facts as sorted (key, value) string pairs; keys are identifiers, values one line
    """

    game: str
    actions: tuple[int, ...]
    result: float
    players: tuple[str, str]
    first_player: int = 0
    meta: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.game not in GAMES:
            raise RecordError(f"unknown game {self.game!r}; choose one of: {', '.join(GAMES)}")
        try:
            actions = tuple(int(a) for a in self.actions)
        except (TypeError, ValueError):
            raise RecordError(f"actions must be integers, got {self.actions!r}") from None
        result = float(self.result)
        if result not in (1.0, 0.0, -1.0):
            raise RecordError(f"result must be +1, 0 or -1 (for the first mover), got {self.result!r}")
        players = tuple(str(p) for p in self.players)
        if len(players) != 2:
            raise RecordError(f"players must be (first mover, second mover), got {self.players!r}")
        if self.first_player not in (0, 1):
            raise RecordError(f"first_player must be pgx player id 0 or 1, got {self.first_player!r}")
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "result", result)
        object.__setattr__(self, "players", players)
        object.__setattr__(self, "first_player", int(self.first_player))
        object.__setattr__(self, "meta", _normalise_meta(self.meta))

    @property
    def meta_dict(self) -> dict[str, str]:
        return dict(self.meta)


def _normalise_meta(meta: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> tuple[tuple[str, str], ...]:
    items = meta.items() if isinstance(meta, Mapping) else meta
    out: dict[str, str] = {}
    for key, value in items:
        key, value = str(key), str(value)
        if not _META_KEY.fullmatch(key) or key in _PGN_RESERVED:
            raise RecordError(
                f"meta key {key!r} must be an identifier (letters, digits, _), not one of {', '.join(_PGN_RESERVED)}"
            )
        if "\n" in value or "\r" in value:
            raise RecordError(f"meta value of {key!r} must be one line")
        out[key] = value
    return tuple(sorted(out.items()))


def _unterminated(record: GameRecord) -> bool:
    return record.meta_dict.get("termination") == UNTERMINATED


# ---------------------------------------------------------------------------------------------------------------------
# replay with pgx (host side, one jitted step per ply)


@functools.cache
def env_functions(game: str):
    """(env, jitted init, jitted step) for `game`, built once per process (use them to play games that will be
    recorded, and the replay does not compile again)."""
    env = GAMES[game].make()
    return env, jax.jit(env.init), jax.jit(env.step)


@functools.cache
def _init_key_seed(game: str, first_player: int) -> int:
    """The smallest s whose `env.init(jax.random.key(s))` gives `first_player` the first move. pgx draws that id with
    `bernoulli(key)` and nothing else in the initial state depends on the key, so this only selects the id; it is a
    deterministic search, not a source of randomness."""
    _, init, _ = env_functions(game)
    for seed in range(256):  # each seed fails with probability 1/2, so 256 misses never happen in practice
        if int(init(jax.random.key(seed)).current_player) == first_player:
            return seed
    raise RecordError(f"no init key gives player {first_player} the first move in {game}")  # pragma: no cover


def initial_state(game: str, first_player: int = 0):
    """pgx's initial state of `game` (unbatched) in which player id `first_player` moves first."""
    if game not in GAMES:
        raise RecordError(f"unknown game {game!r}; choose one of: {', '.join(GAMES)}")
    _, init, _ = env_functions(game)
    return init(jax.random.key(_init_key_seed(game, first_player)))


def step(game: str, state, action: int, ply: int):
    """The state after `action` (checked legal: RecordError naming the 1-based `ply` if not)."""
    _, _, step_fn = env_functions(game)
    if is_over(state):
        raise RecordError(f"ply {ply}: action {action} after the end of the game")
    legal = np.asarray(state.legal_action_mask)  # (not env.num_actions: pgx computes it with an eager init)
    if not 0 <= action < legal.shape[0]:
        raise RecordError(f"ply {ply}: action {action} out of range 0..{legal.shape[0] - 1} for {game}")
    if not bool(legal[action]):
        try:
            text = f" ({notation.format_move(game, state, action)})"
        except ValueError:
            text = ""
        raise RecordError(f"ply {ply}: illegal action {action}{text} in {game}")
    return step_fn(state, action)


def replay(record: GameRecord) -> list:
    """pgx states of the game: `states[k]` is the position after k plies (`states[0]` the initial one), so the list
    has len(actions) + 1 unbatched states. RecordError (naming the ply) on an illegal action."""
    states = [initial_state(record.game, record.first_player)]
    for ply, action in enumerate(record.actions, start=1):
        states.append(step(record.game, states[-1], action, ply))
    return states


def first_mover_result(state, first_player: int) -> float:
    """+1 / 0 / -1 for the first mover from a pgx state (0 while the game is not over)."""
    return float(np.asarray(state.rewards)[first_player]) if is_over(state) else 0.0


def go_margin(game: str, state) -> float:
    """Black's Tromp-Taylor area minus White's minus komi in a Go state (what pgx's rewards compare with 0); store it
    as meta "margin" to get RE[B+3.5] instead of RE[B+]."""
    from pgx._src.games.go import _count_scores  # local: private to pgx, and builds jax arrays at import

    env, _, _ = env_functions(game)
    scores = np.asarray(_count_scores(state._x, env._game.size))
    return float(scores[0] - env._game.komi - scores[1])


# ---------------------------------------------------------------------------------------------------------------------
# writers


def record_format(game: str) -> str:
    """ "sgf" for Go, "pgn" for chess, "json" for every other game."""
    return "sgf" if game in GO_GAMES else "pgn" if game == "chess" else "json"


def _go_size(game: str) -> int:
    return int(game.split("x")[-1])


def _go_komi(game: str) -> float:
    return float(env_functions(game)[0]._game.komi)


def _sgf_result(record: GameRecord) -> str:
    if _unterminated(record):
        return "?"
    if record.result == 0:
        return "0"
    meta = record.meta_dict
    if meta.get("resigned", "").lower() in ("true", "1"):
        return ("B+" if record.result > 0 else "W+") + "R"
    try:
        margin = f"{abs(float(meta['margin'])):g}" if "margin" in meta else ""
    except ValueError:
        raise RecordError(f"meta margin must be a number, got {meta['margin']!r}") from None
    return ("B+" if record.result > 0 else "W+") + margin


def to_sgf(record: GameRecord) -> str:
    """SGF text of a Go record (see the module docstring for the properties written)."""
    if record.game not in GO_GAMES:
        raise RecordError(f"SGF is for Go, not {record.game}")
    size, komi = _go_size(record.game), _go_komi(record.game)
    game = sgf.Sgf_game(size=size)
    root = game.get_root()
    root.set("KM", komi)
    root.set("RU", "Tromp-Taylor")
    root.set(
        "C",
        f"pgx {record.game} rules: area scoring with every stone counted alive (Tromp-Taylor), komi "
        f"{komi:g}; a move repeating an earlier position loses (positional superko); the game ends after "
        f"two passes or {2 * size * size} moves",
    )
    root.set("PB", record.players[0])
    root.set("PW", record.players[1])
    root.set("RE", _sgf_result(record))
    root.set("GC", _SGF_TAG + json.dumps({"first_player": record.first_player, "meta": record.meta_dict}))
    for ply, action in enumerate(record.actions, start=1):
        node = game.extend_main_sequence()
        colour = "B" if ply % 2 == 1 else "W"  # pgx Go: Black first, strict alternation (passes are moves)
        try:
            vertex = go.action_to_vertex(action, size)
        except ValueError as e:
            raise RecordError(f"ply {ply}: {e}") from None
        if vertex == go.PASS:
            node.set_raw(colour, b"")  # FF[4] pass; sgfmill's own set_move would write [tt]
        else:
            node.set_move(colour.lower(), common.move_from_vertex(vertex, size))
    return game.serialise().decode("utf-8")


def _pgn_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _pgn_unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def to_pgn(record: GameRecord) -> str:
    """PGN text of a chess record (see the module docstring for the tags written)."""
    if record.game != "chess":
        raise RecordError(f"PGN is for chess, not {record.game}")
    game = chess.pgn.Game()
    meta = record.meta_dict
    for tag in _PGN_ROSTER:
        if tag in meta:
            game.headers[tag] = _pgn_escape(meta.pop(tag))
    game.headers["White"] = _pgn_escape(record.players[0])
    game.headers["Black"] = _pgn_escape(record.players[1])
    game.headers["Result"] = "*" if _unterminated(record) else _RESULT_PGN[record.result]
    game.headers["PgxFirstPlayer"] = str(record.first_player)
    for key, value in meta.items():
        game.headers[key] = _pgn_escape(value)
    board = chess.Board()
    node: chess.pgn.GameNode = game
    for ply, action in enumerate(record.actions, start=1):
        try:
            move = action_to_move(action, board)
        except ValueError as e:
            raise RecordError(f"ply {ply}: {e}") from None
        if move not in board.legal_moves:
            raise RecordError(f"ply {ply}: illegal action {action} ({move.uci()}) in {board.fen()}")
        node = node.add_variation(move)
        board.push(move)
    return game.accept(chess.pgn.StringExporter(headers=True, variations=False, comments=False)) + "\n"


def to_json(record: GameRecord) -> str:
    """JSON text of a record of any game, with the move text of each ply (replays the game with pgx)."""
    states = replay(record)
    moves = [notation.format_move(record.game, s, a) for s, a in zip(states, record.actions)]
    fields = {
        "game": record.game,
        "players": list(record.players),
        "result": int(record.result),
        "first_player": record.first_player,
        "meta": record.meta_dict,
        "moves": moves,
        "actions": list(record.actions),
    }
    # one key a line, lists inline
    return "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in fields.items()) + "\n}\n"


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


# ---------------------------------------------------------------------------------------------------------------------
# readers


def _first_mover_score(text: str, first: str, second: str) -> float:
    """+1 if the result text starts with `first`, -1 with `second`, else 0 (draw / unknown / unfinished)."""
    t = text.strip().upper()
    return 1.0 if t.startswith(first) else -1.0 if t.startswith(second) else 0.0


def _sgf_node_line(data: bytes, index: int) -> int:
    """The 1-based line of the `index`-th node (the root is 0) of the SGF main line: its ';' in document order (the
    main line is every branch's first variation, so its nodes come first), skipping property values."""
    count, in_value, escaped = -1, False, False
    for position, byte in enumerate(data):
        if in_value:
            in_value, escaped = (escaped or byte != ord("]")), (not escaped and byte == ord("\\"))
        elif byte == ord("["):
            in_value = True
        elif byte == ord(";"):
            count += 1
            if count == index:
                return data.count(b"\n", 0, position) + 1
    return data.count(b"\n") + 1


def _sgf_raw_move(node) -> str:
    """A node's move property as written, e.g. 'B[zz]'."""
    colour = "B" if node.has_property("B") else "W"
    return f"{colour}[{node.get_raw(colour).decode('utf-8', 'replace')}]"


def from_sgf(text: str | bytes) -> GameRecord:
    """A Go record from SGF text (ours or another program's: the main line, Black first, alternating colours).
    RecordError with one line on anything that does not parse (naming the line of a bad move)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        return _from_sgf(data)
    except RecordError:
        raise
    except ValueError as e:  # sgfmill's checks of property values, e.g. HA[x]
        raise RecordError(f"not a valid SGF file: {e or 'bad property value'}") from None


def _from_sgf(data: bytes) -> GameRecord:
    try:
        game = sgf.Sgf_game.from_bytes(data)
    except ValueError as e:
        raise RecordError(f"not a valid SGF file: {e}") from None
    root = game.get_root()
    size = game.get_size()
    name = f"go_{size}x{size}"
    if name not in GO_GAMES:
        raise RecordError(f"SGF board size {size} is not one of the Go games ({', '.join(GO_GAMES)})")
    if any(root.has_property(p) for p in ("AB", "AW", "AE")) or (root.has_property("HA") and root.get("HA") > 0):
        raise RecordError("SGF set-up stones / handicap are not supported: pgx games start from the empty board")
    actions = []
    for ply, node in enumerate(game.get_main_sequence()[1:], start=1):
        try:
            colour, move = node.get_move()
        except ValueError:
            where = f"SGF line {_sgf_node_line(data, ply)}, move {ply}"
            raise RecordError(f"{where}: {_sgf_raw_move(node)} is not a point on the {size}x{size} board") from None
        if colour is None:
            if any(node.has_property(p) for p in ("AB", "AW", "AE")):
                raise RecordError(f"SGF node {ply}: set-up stones are not supported")
            raise RecordError(f"SGF node {ply} has no move")
        expected = "b" if ply % 2 == 1 else "w"
        if colour != expected:
            raise RecordError(
                f"SGF move {ply} is by {colour.upper()}, expected {expected.upper()} (pgx alternates "
                f"colours, Black first)"
            )
        vertex = go.PASS if move is None else common.format_vertex(move)
        try:
            actions.append(go.vertex_to_action(vertex, size))
        except ValueError as e:
            raise RecordError(f"SGF line {_sgf_node_line(data, ply)}, move {ply}: {e}") from None
    first_player, meta = 0, {}
    if root.has_property("GC") and root.get("GC").startswith(_SGF_TAG):
        try:
            extra = json.loads(root.get("GC")[len(_SGF_TAG) :])
            first_player, meta = int(extra.get("first_player", 0)), dict(extra.get("meta", {}))
        except (ValueError, TypeError, AttributeError) as e:
            raise RecordError(f"SGF game comment: bad az_jax data: {e}") from None
    black, white = (root.get(p) if root.has_property(p) else "?" for p in ("PB", "PW"))
    result = _first_mover_score(root.get("RE"), "B+", "W+") if root.has_property("RE") else 0.0
    return GameRecord(name, tuple(actions), result, (black, white), first_player, tuple(meta.items()))


_PGN_EXTRA_TOKEN = re.compile(r"[0-9]+\.*|[+#]+")  # move numbers and check marks, which python-chess skips


def _pgn_movetext_tokens(line: str, number: int, depth: int) -> tuple[list[str], int, bool]:
    """(SAN tokens of the main line, variation depth after the line, whether a '{' comment stays open) of one line of
    movetext at variation `depth`; RecordError naming the line on text that is not PGN movetext."""
    moves: list[str] = []
    i = 0
    while i < len(line):
        if line[i].isspace():
            i += 1
        elif line[i] == "{":
            close = line.find("}", i)
            if close < 0:
                return moves, depth, True
            i = close + 1
        elif line[i] == ";":
            break
        elif match := chess.pgn.MOVETEXT_REGEX.match(line, i) or _PGN_EXTRA_TOKEN.match(line, i):
            token = match.group(0)
            depth += (token == "(") - (token == ")")
            if depth < 0:
                raise RecordError(f"PGN line {number}: ')' closes no variation")
            if depth == 0 and match.re is chess.pgn.MOVETEXT_REGEX and match.group(1):
                moves.append(token)
            i = match.end()
        else:
            raise RecordError(f"PGN line {number}: {line[i:].split()[0]!r} is not a move, move number or result")
    return moves, depth, False


def _pgn_main_line(text: str) -> list[tuple[int, str]]:
    """(line number, SAN) of each main-line move of the first game in PGN text. Checks what python-chess skips
    silently: a malformed tag line or a word that is not a move is a RecordError naming its line."""
    moves: list[tuple[int, str]] = []
    depth, in_comment, in_movetext, comment_line = 0, False, False, 0
    for number, line in enumerate(text.splitlines(), start=1):
        if in_comment:
            close = line.find("}")
            if close < 0:
                continue
            line, in_comment = line[close + 1 :], False
        elif not line.strip():
            if in_movetext:  # an empty line ends the first game
                break
            continue
        elif line.startswith(("%", ";")):
            continue
        elif line.lstrip().startswith("[") and not in_movetext:
            if not chess.pgn.TAG_REGEX.match(line.strip()):
                raise RecordError(f'PGN line {number}: a tag must look like [Name "value"], got {line.strip()!r}')
            continue
        in_movetext = True
        tokens, depth, in_comment = _pgn_movetext_tokens(line, number, depth)
        moves.extend((number, token) for token in tokens)
        comment_line = number if in_comment else comment_line
    if in_comment:
        raise RecordError(f"PGN line {comment_line}: a '{{' comment is never closed")
    return moves


def _check_pgn_moves(moves: list[tuple[int, str]]) -> None:
    """Plays the main line's SAN on a board: an illegal or ambiguous move is a RecordError naming its line."""
    board = chess.Board()
    for ply, (number, san) in enumerate(moves, start=1):
        try:
            board.push(board.parse_san(san))
        except ValueError as e:
            raise RecordError(f"PGN line {number}, ply {ply}: {e}") from None


def from_pgn(text: str) -> GameRecord:
    """A chess record from PGN text (the first game's main line, from the standard starting position). RecordError
    with one line, naming the line, on text that is not PGN or a move that is not legal."""
    moves = _pgn_main_line(text)

    class _Builder(chess.pgn.GameBuilder):
        def handle_error(self, error):  # collect, do not log: the caller reports one line
            self.game.errors.append(error)

    game = chess.pgn.read_game(io.StringIO(text), Visitor=_Builder)
    if game is None:
        raise RecordError("no game in the PGN text")
    headers = {k: _pgn_unescape(v) for k, v in game.headers.items()}
    if "FEN" in headers or headers.get("SetUp") == "1":
        raise RecordError("PGN starts from a set-up position (FEN); pgx chess games start from the initial position")
    _check_pgn_moves(moves)
    if game.errors:  # e.g. an illegal move in a variation
        raise RecordError(f"PGN: {game.errors[0]}")
    board, actions = chess.Board(), []
    for ply, move in enumerate(game.mainline_moves(), start=1):
        try:
            actions.append(move_to_action(move, board))
        except ValueError as e:
            raise RecordError(f"ply {ply}: {e}") from None
        board.push(move)
    result = {"1-0": 1.0, "0-1": -1.0}.get(headers.get("Result", "*"), 0.0)
    try:
        first_player = int(headers.get("PgxFirstPlayer", "0"))
    except ValueError:
        raise RecordError(f"PGN tag PgxFirstPlayer must be 0 or 1, got {headers['PgxFirstPlayer']!r}") from None
    defaults = {"Event": "?", "Site": "?", "Date": "????.??.??", "Round": "?"}
    meta = {k: v for k, v in headers.items() if k not in _PGN_RESERVED and defaults.get(k) != v}
    players = (headers.get("White", "?"), headers.get("Black", "?"))
    return GameRecord("chess", tuple(actions), result, players, first_player, tuple(meta.items()))


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_json_types(data: Any) -> None:
    """RecordError naming the first field of a JSON record whose type is wrong."""
    if not isinstance(data, dict):
        raise RecordError(f"JSON record: expected an object, got {type(data).__name__}")
    checks = {
        "game": lambda v: isinstance(v, str),
        "result": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
        "first_player": lambda v: _is_int(v) and v in (0, 1),
        "players": lambda v: isinstance(v, list) and len(v) == 2 and all(isinstance(p, str) for p in v),
        "meta": lambda v: isinstance(v, dict) and all(isinstance(x, (str, int, float, bool)) for x in v.values()),
        "moves": lambda v: isinstance(v, list) and all(isinstance(m, str) for m in v),
        "actions": lambda v: isinstance(v, list) and all(_is_int(a) for a in v),
    }
    wanted = {
        "game": "a game name",
        "result": "+1, 0 or -1",
        "first_player": "0 or 1",
        "players": "a list of two names",
        "meta": "an object of strings",
        "moves": "a list of moves (strings)",
        "actions": "a list of integers",
    }
    if "game" not in data:
        raise RecordError('JSON record: no "game"')
    for key, check in checks.items():
        if key in data and not check(data[key]):
            raise RecordError(f"JSON record: {key} must be {wanted[key]}, got {json.dumps(data[key])[:80]}")


def from_json(text: str) -> GameRecord:
    """A record from our JSON text ("actions", or only "moves" in the game's notation). RecordError with one line on
    text that is not JSON (naming the line) or a field of the wrong type."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:  # RecursionError: nested thousands deep
        raise RecordError(f"not a game record in JSON: {e}") from None
    _check_json_types(data)
    game = data["game"]
    first_player, players = data.get("first_player", 0), data.get("players", ["?", "?"])
    actions = data.get("actions")
    if actions is None:
        if game not in GAMES:
            raise RecordError(f"unknown game {game!r}; choose one of: {', '.join(GAMES)}")
        state, actions = initial_state(game, first_player), []
        for ply, text_move in enumerate(data.get("moves", []), start=1):
            try:
                action = notation.parse_move(game, state, text_move)
            except ValueError as e:
                raise RecordError(f"ply {ply}: {e}") from None
            actions.append(action)
            state = step(game, state, action, ply)
    if not isinstance(actions, list) or not all(isinstance(a, int) and not isinstance(a, bool) for a in actions):
        raise RecordError("JSON record: actions must be a list of integers")
    return GameRecord(game, tuple(actions), data.get("result", 0), tuple(players), first_player, data.get("meta", {}))


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
