"""Pictures of positions: pgx's own SVG drawing of a state, and PNG through cairosvg.

The position comes from a game record at some ply (`position_from_record`) or from a game name and a list of moves in
the game's usual notation (`position_from_moves`, see `envs/notation/`). The drawing is pgx's
(`pgx.State.to_svg`, light colour theme, scale 1): e.g. connect_four is 280 x 280 px with the first player's discs
drawn as black circles and the second player's as white ones; Go draws Black's stones black.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from envs import notation, records
from envs.records import RecordError

__all__ = [
    "OUTPUT_FORMATS",
    "RenderError",
    "check_output_path",
    "position_from_moves",
    "position_from_record",
    "render_png",
    "render_svg",
    "svg_to_png",
    "write_image",
]

OUTPUT_FORMATS = (".svg", ".png")


class RenderError(RecordError):
    """A position or picture that cannot be made (one-line message)."""


def render_svg(game: str, state) -> str:
    """pgx's SVG drawing of one unbatched state of `game`."""
    if state.env_id != game:
        raise RenderError(f"the state is a {state.env_id} position, not {game}")
    if getattr(state.current_player, "ndim", 0) != 0:
        raise RenderError(f"expected one unbatched state, got a batch of shape {state.current_player.shape}")
    return state.to_svg(color_theme="light", scale=1.0)


def svg_to_png(svg: str) -> bytes:
    """PNG bytes of an SVG document (cairosvg, 96 dpi: one SVG px is one PNG pixel)."""
    import cairosvg  # local: slow to import (loads the cairo C library), and only PNG output needs it

    return cairosvg.svg2png(bytestring=svg.encode("utf-8"))


def render_png(game: str, state, path: str | os.PathLike) -> str:
    """Write a PNG picture of one unbatched state to `path`; returns the path."""
    return _write(path, svg_to_png(render_svg(game, state)))


def _write(path, data: bytes) -> str:
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def check_output_path(path: str | os.PathLike) -> str:
    """The lower-case extension of an output picture path (".svg" or ".png"); RenderError otherwise."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in OUTPUT_FORMATS:
        raise RenderError(f"cannot write {os.fspath(path)!r}: the output must end in .svg or .png")
    return ext


def write_image(game: str, state, path: str | os.PathLike) -> str:
    """Write an SVG or PNG picture of `state`, by the extension of `path`; returns the path. Everything is rendered
    before the file is opened, so a failure writes nothing."""
    ext = check_output_path(path)
    svg = render_svg(game, state)
    return _write(path, svg.encode("utf-8") if ext == ".svg" else svg_to_png(svg))


def position_from_record(path: str | os.PathLike, ply: int | None = None) -> tuple[str, object]:
    """(game, state after `ply` plies) of a record file; `ply` None means the final position."""
    record = records.read_record(path)
    n = len(record.actions)
    if ply is None:
        ply = n
    if not 0 <= ply <= n:
        raise RenderError(f"ply {ply} out of range: the record has {n} plies (0..{n})")
    record = records.GameRecord(
        record.game, record.actions[:ply], record.result, record.players, record.first_player, record.meta
    )
    return record.game, records.replay(record)[-1]


def position_from_moves(game: str, moves: str | Sequence[str] = ()):
    """The state of `game` after `moves` (a whitespace-separated string or a list, in the game's notation)."""
    if isinstance(moves, str):
        moves = moves.split()
    state = records.initial_state(game)
    for ply, text in enumerate(moves, start=1):
        try:
            action = notation.parse_move(game, state, text)
        except ValueError as e:
            raise RenderError(f"move {ply} ({text!r}): {e}") from None
        state = records.step(game, state, action, ply)
    return state
