"""What a game's notation is made of (`Notation`); each game family's module builds one per game, and
envs/notation/__init__.py dispatches on the game name."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Notation:
    """The text side of one game. Every callable takes ONE unbatched host (numpy) state."""

    render: Callable  # host state -> board text (without the side-to-move line)
    format: Callable  # (host state, action int) -> move text
    side: Callable  # host state -> colour to move, 0 = the first player
    colors: tuple[str, str]  # names of the first and second player
    syntax: re.Pattern  # what a well-formed move looks like (full match, after strip)
    canonical: Callable  # well-formed text -> the spelling format() produces
    help: str  # one line describing the notation
    direct: Callable | None = None  # (host state, canonical text) -> action, where the notation maps straight
    cell: Callable | None = None  # (host state, square text as in the moves) -> "." or the piece/stone drawn there


def stone(value) -> str:
    """A stone of a board where > 0 is the first player's and < 0 the second's: "X", "O", or "." when empty."""
    return "X" if value > 0 else "O" if value < 0 else "."
