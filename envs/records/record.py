"""The game record (`GameRecord`): the pgx actions of one game, who played, how it ended, and the conventions every
format shares (envs/records/__init__.py)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from envs.registry import GAMES

GO_GAMES = ("go_9x9", "go_19x19")
UNTERMINATED = "unterminated"  # meta["termination"] of a game stopped before the rules ended it
_META_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
PGN_RESERVED = ("White", "Black", "Result", "FEN", "SetUp", "PgxFirstPlayer")


class RecordError(ValueError):
    """A game record that cannot be built, written, read or replayed (one-line message)."""


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
        if not _META_KEY.fullmatch(key) or key in PGN_RESERVED:
            raise RecordError(
                f"meta key {key!r} must be an identifier (letters, digits, _), not one of {', '.join(PGN_RESERVED)}"
            )
        if "\n" in value or "\r" in value:
            raise RecordError(f"meta value of {key!r} must be one line")
        out[key] = value
    return tuple(sorted(out.items()))


def unterminated(record: GameRecord) -> bool:
    return record.meta_dict.get("termination") == UNTERMINATED


def first_mover_score(text: str, first: str, second: str) -> float:
    """+1 if the result text starts with `first`, -1 with `second`, else 0 (draw / unknown / unfinished)."""
    t = text.strip().upper()
    return 1.0 if t.startswith(first) else -1.0 if t.startswith(second) else 0.0
