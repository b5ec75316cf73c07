"""The value network's data set on the host and on disk (Silver et al., Nature 2016, Methods, "Reinforcement
learning of value networks": one position s_{U+1} a game with its outcome z): `ValuePositions`, and its two file
forms, which `value_data.build` writes and every reader takes:

* a directory (the default): two append-only column stores (az_jax/runtime/columns.py), DIR/train and DIR/test,
  to which each save appends the games since the last one; read as memory maps, so nothing loads the whole set;
* a single `.npz` (a path ending in .npz; small sets, tests), rewritten whole at each save and read whole.

    train, test = load_split(path)       # ValuePositions; a directory's arrays are memory maps
    every = load(path)                   # both parts, in memory
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import jax
import numpy as np

from az_jax.alphago import position as position_lib
from az_jax.alphago.position import Position
from az_jax.runtime import columns, files

FORMAT = 1  # version of the .npz layout
TEST_EVERY = 20  # one game in 20 is held out (5 %)


class ValueDataError(Exception):
    """A value data set file that is missing, corrupt or in the way: one line, for the CLI."""


@dataclasses.dataclass(frozen=True)
class ValuePositions:
    """M positions s_{U+1} with their outcomes (numpy arrays on the host)."""

    position: Position  # numpy leaves: board [M, N²] int8, turns_since [M, N²] int8, ko [M] int32, black_to_move [M]
    outcome: np.ndarray  # [M] int8 z: +1 the player to move won, -1 lost
    u: np.ndarray  # [M] int32 U: moves played before the position (its move number is U + 1)
    game: np.ndarray  # [M] int32: the game's index (held out when game % test_every == test_every − 1)
    moves: np.ndarray  # [M, U_max] int16: a_1 … a_U (pgx actions), -1 after
    attempts: np.ndarray  # [M] int32: games started for this one (1 + redraws)

    def __len__(self) -> int:
        return int(self.outcome.shape[0])

    @property
    def size(self) -> int:
        return int(round(self.position.board.shape[-1] ** 0.5))

    @property
    def move_number(self) -> np.ndarray:
        """[M] the number of the move about to be played at each position (U + 1)."""
        return self.u + 1

    def take(self, indices: np.ndarray) -> ValuePositions:
        return ValuePositions(
            position=jax.tree.map(lambda x: x[indices], self.position),
            outcome=self.outcome[indices],
            u=self.u[indices],
            game=self.game[indices],
            moves=self.moves[indices],
            attempts=self.attempts[indices],
        )


def concatenate(parts: list[ValuePositions]) -> ValuePositions:
    return ValuePositions(
        position=jax.tree.map(lambda *xs: np.concatenate(xs), *(p.position for p in parts)),
        **{f: np.concatenate([getattr(p, f) for p in parts]) for f in ("outcome", "u", "game", "moves", "attempts")},
    )


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def read_file(path: str | os.PathLike) -> tuple[dict, ValuePositions, int]:
    """(metadata, positions, games played) of the value data set at `path`; ValueDataError (one line) if it is not
    one."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = json.loads(str(arrays["meta"]))
        games_done = int(arrays["games_done"])
        positions = ValuePositions(
            position=Position(
                board=arrays["board"].astype(np.int8),
                turns_since=arrays["turns_since"].astype(np.int8),
                ko=arrays["ko"].astype(np.int32),
                black_to_move=arrays["black_to_move"].astype(bool),
            ),
            outcome=arrays["outcome"].astype(np.int8),
            u=arrays["u"].astype(np.int32),
            game=arrays["game"].astype(np.int32),
            moves=arrays["moves"].astype(np.int16),
            attempts=arrays["attempts"].astype(np.int32),
        )
    except FileNotFoundError:
        raise ValueDataError(f"no value data set at {path}") from None
    except KeyError as e:
        raise ValueDataError(f"{path} is not a value data set: no {e}") from None
    except (OSError, ValueError, TypeError, EOFError, zipfile.BadZipFile) as e:
        raise ValueDataError(f"{path} is not a readable value data set: {_one_line(e)}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueDataError(f"{path} has value data set format {meta.get('format')!r}, expected {FORMAT}")
    m = positions.outcome.shape[0]
    points = meta.get("size", 0) ** 2
    shapes = [positions.position.board.shape, positions.position.turns_since.shape, positions.moves.shape[:1]]
    leaves = [positions.position.ko, positions.position.black_to_move, positions.u, positions.game, positions.attempts]
    if shapes != [(m, points), (m, points), (m,)] or any(a.shape != (m,) for a in leaves):
        raise ValueDataError(f"{path} is not a value data set: its arrays do not have matching shapes")
    return meta, positions, games_done


def write_file(path: Path, meta: dict, positions: ValuePositions, games_done: int) -> None:
    """The whole data set to a temporary file beside `path`, renamed over it (a crash leaves the old file)."""
    p = positions.position
    arrays = {
        "meta": np.asarray(json.dumps(meta, sort_keys=True)),
        "games_done": np.asarray(games_done, np.int64),
        "board": np.asarray(p.board, np.int8),
        "turns_since": np.asarray(p.turns_since, np.int8),
        "ko": np.asarray(p.ko, np.int32),
        "black_to_move": np.asarray(p.black_to_move, bool),
        "outcome": positions.outcome,
        "u": positions.u,
        "game": positions.game,
        "moves": positions.moves,
        "attempts": positions.attempts,
    }
    with files.replaced_whole_bytes(os.fspath(path)) as f:  # a crash leaves the old file
        np.savez_compressed(f, allow_pickle=False, **arrays)  # type: ignore[arg-type]


def load(path: str | os.PathLike) -> ValuePositions:
    """Every position of the value data set at `path`, in memory (a directory's two parts read whole and joined);
    ValueDataError (one line) if missing or not one."""
    if os.path.isdir(path):
        return concatenate(list(read_directory(path)[1:3]))
    return read_file(path)[1]


def split(positions: ValuePositions, test_every: int = TEST_EVERY) -> tuple[ValuePositions, ValuePositions]:
    """(train, test): game g is held out when g % test_every == test_every − 1."""
    test = positions.game % test_every == test_every - 1
    return positions.take(~test), positions.take(test)


def load_split(path: str | os.PathLike) -> tuple[ValuePositions, ValuePositions]:
    """(train, test) of the value data set at `path`: a directory's parts as memory maps (nothing read until a batch
    gathers its rows), a single .npz read whole and split by the `test_every` it was built with."""
    if os.path.isdir(path):
        _, train, test, _ = read_directory(path)
        return train, test
    meta, positions, _ = read_file(path)
    return split(positions, int(meta["test_every"]))


# A value data directory: two column stores (az_jax/runtime/columns.py), DIR/train and DIR/test, appended to at every
# save. Each commit's metadata holds the settings, the games played so far ("games_done") and the state before it
# ("previous": [games, rows]). A save appends to test first, then to train: a build killed between the two leaves
# test one commit ahead, which readers ignore and the next build takes back (columns.truncate).
_PARTS = ("train", "test")
_PROGRESS = ("games_done", "previous")
_LABELS = ("outcome", "u", "game", "moves", "attempts")  # the columns besides the position's


def _schema(size: int, u_max: int) -> dict[str, tuple[Any, tuple[int, ...]]]:
    return {
        **position_lib.schema(size),
        "outcome": (np.int8, ()),
        "u": (np.int32, ()),
        "game": (np.int32, ()),
        "moves": (np.int16, (u_max,)),
        "attempts": (np.int32, ()),
    }


def _state(path: str | os.PathLike) -> tuple[dict, int, dict[str, int]]:
    """(settings, games done, rows of each part) of the directory at `path` as its train part last committed it."""
    try:
        (train_meta, train_rows), (test_meta, test_rows) = (columns.meta(os.path.join(path, n)) for n in _PARTS)
    except columns.ColumnsError as e:
        raise ValueDataError(f"{path} is not a readable value data set: {e}") from None
    settings = {k: v for k, v in train_meta.items() if k not in _PROGRESS}
    ok = isinstance(train_meta.get("games_done"), int) and isinstance(test_meta.get("previous"), list)
    if not ok or settings != {k: v for k, v in test_meta.items() if k not in _PROGRESS}:
        raise ValueDataError(f"{path} is not a value data set (its two parts do not belong together)")
    if settings.get("format") != FORMAT:
        raise ValueDataError(f"{path} has value data set format {settings.get('format')!r}, expected {FORMAT}")
    games = train_meta["games_done"]
    if test_meta["games_done"] != games:  # killed between the two appends of a save: test is one commit ahead
        if test_meta["previous"][0] != games:
            raise ValueDataError(f"{path} is damaged: its parts hold {games} and {test_meta['games_done']} games")
        test_rows = test_meta["previous"][1]
    return settings, games, {"train": train_rows, "test": test_rows}


def read_directory(path: str | os.PathLike) -> tuple[dict, ValuePositions, ValuePositions, int]:
    """(settings, train, test, games done) of a value data directory; the parts' arrays are memory maps."""
    settings, games, rows = _state(path)
    parts = []
    for name in _PARTS:
        try:
            a, _ = columns.read(os.path.join(path, name))
        except columns.ColumnsError as e:
            raise ValueDataError(f"{path} is not a readable value data set: {e}") from None
        a = {k: v[: rows[name]] for k, v in a.items()}
        parts.append(ValuePositions(position=position_lib.from_columns(a), **{f: a[f] for f in _LABELS}))
    return settings, parts[0], parts[1], games


def check_settings(target: Path, meta: dict, old: dict) -> None:
    """ValueDataError (one line) when the set at `target` was built with other settings than `meta`."""
    changed = sorted(k for k in set(meta) | set(old) if meta.get(k) != old.get(k))
    if changed:
        raise ValueDataError(
            f"{target} holds a value data set with other settings ({', '.join(changed)} differ); "
            "use another path or pass overwrite"
        )


def open_directory(target: Path, meta: dict, overwrite: bool) -> int:
    """Games already in the value data directory `target` built with `meta` (a new one is created, an old one with
    other settings is an error unless `overwrite`); a save cut short between its two appends is taken back."""
    if target.is_dir() and overwrite:
        shutil.rmtree(target)
    elif target.exists() and overwrite:
        target.unlink()
    if not target.exists():
        for name in _PARTS:
            progress = {"games_done": 0, "previous": [0, 0]}
            columns.create(target / name, _schema(meta["size"], meta["u_range"][1]), {**meta, **progress})
        return 0
    if not target.is_dir():
        raise ValueDataError(f"{target} exists and is not a value data directory; use another path or pass overwrite")
    try:
        old, games, rows = _state(target)
    except ValueDataError as e:
        raise ValueDataError(f"{target} exists and is not this value data set ({e}); pass overwrite") from None
    check_settings(target, meta, old)
    test_meta, test_rows = columns.meta(target / "test")
    if test_rows != rows["test"]:
        taken_back = {**meta, "games_done": games, "previous": test_meta["previous"]}
        columns.truncate(target / "test", rows["test"], taken_back)
    return games


def append_directory(target: Path, meta: dict, part: ValuePositions, games_done: int) -> None:
    """Appends the games of a save to the directory: the held-out ones to test, then the rest to train."""
    held_out = part.game % meta["test_every"] == meta["test_every"] - 1
    for name, mask in (("test", held_out), ("train", ~held_out)):
        store = target / name
        old, rows = columns.meta(store)
        chosen = part.take(mask)
        arrays = position_lib.as_columns(chosen.position) | {f: getattr(chosen, f) for f in _LABELS}
        columns.append(store, arrays, {**meta, "games_done": games_done, "previous": [old["games_done"], rows]})
