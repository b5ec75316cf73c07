"""Records of every other game as JSON; the format is described in envs/records/__init__.py."""

from __future__ import annotations

import json
import math
from typing import Any

from envs import notation
from envs.records.pgx_replay import initial_state, replay, step
from envs.records.record import GameRecord, RecordError
from envs.registry import GAMES


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
