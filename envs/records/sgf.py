"""Go records as SGF (FF[4], via sgfmill); the format is described in envs/records/__init__.py."""

from __future__ import annotations

import json

from sgfmill import common, sgf

from envs.notation import go
from envs.records.pgx_replay import env_functions
from envs.records.record import GO_GAMES, GameRecord, RecordError, first_mover_score, unterminated

_SGF_TAG = "az_jax "  # prefix of our JSON in the SGF game comment


def go_size(game: str) -> int:
    return int(game.split("x")[-1])


def go_komi(game: str) -> float:
    return float(env_functions(game)[0]._game.komi)


def _sgf_result(record: GameRecord) -> str:
    if unterminated(record):
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
    size, komi = go_size(record.game), go_komi(record.game)
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
    result = first_mover_score(root.get("RE"), "B+", "W+") if root.has_property("RE") else 0.0
    return GameRecord(name, tuple(actions), result, (black, white), first_player, tuple(meta.items()))
