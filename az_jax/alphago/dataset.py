"""Expert games -> the position data set of AlphaGo's supervised policy network (Silver et al. 2016, Methods,
"Supervised learning of policy networks": (state, expert action) pairs; passes are not labels), with the game's
outcome kept for the value network (ibid., "Reinforcement learning of value networks", outcome z from the player to
move's view).

    games, report = corpus.load_corpus(sources, 19)
    positions = positions_from_games(games, 19)      # replays every game with pgx
    train, test = split(positions, corpus.held_out(games))
    save(path, positions, test_games=corpus.held_out(games)); train, test = load_split(path)
    report = build(sources, 19, path)                 # all of the above, for the CLI: into a directory, a part
                                                      # at a time (a path ending in .npz: one file, written whole)
    train, test = load_split(directory)               # memory maps: a minibatch reads only its own rows

Games are replayed with pgx in batches (vmap over games, lax.scan over plies); a move that pgx rejects (an occupied
point, suicide, a ko capture back, a positional-superko repeat, which pgx scores as a loss for the mover, or any move
after pgx ended the game) cuts the game there: the positions before it are kept.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import time
import zipfile
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pgx
from pgx.go import State as GoState

from az_jax.alphago import corpus
from az_jax.alphago import position as position_lib
from az_jax.alphago.position import Position, from_pgx
from az_jax.runtime import columns, files

FORMAT = 1  # version of the .npz layout
_BATCH = 16  # games replayed together (more gains nothing on a CPU)
_WINDOW = 32  # plies per jitted call

# why a ply was not replayed (codes of _replay_window)
_OK, _PAD, _ILLEGAL, _SUPERKO, _OVER = 0, 1, 2, 3, 4


class DatasetError(Exception):
    """A data set file that is missing, corrupt or in the way: one line, for the CLI."""


@dataclasses.dataclass(frozen=True)
class Positions:
    """M positions (numpy arrays on the host), each the state before an expert's move."""

    position: Position  # numpy leaves: board [M, N*N] int8, turns_since [M, N*N] int8, ko [M] int32, black_to_move [M]
    action: np.ndarray  # [M] int32: the expert's move (row * N + col, never a pass)
    outcome: np.ndarray  # [M] int8: +1 the player to move won the game, -1 lost, 0 jigo or unknown
    game: np.ndarray  # [M] int32: index of the game in the list replayed
    move_number: np.ndarray  # [M] int32: 1-based number of the move in the record (handicap set-up not counted)

    def __len__(self) -> int:
        return int(self.action.shape[0])

    @property
    def size(self) -> int:
        return int(round(self.position.board.shape[-1] ** 0.5))

    def take(self, indices: np.ndarray) -> Positions:
        """The positions at `indices` (an index array or a boolean mask), in that order."""
        return Positions(
            position=jax.tree.map(lambda x: x[indices], self.position),
            action=self.action[indices],
            outcome=self.outcome[indices],
            game=self.game[indices],
            move_number=self.move_number[indices],
        )


def _position(**leaves: np.ndarray) -> Position:
    """A Position of numpy leaves (board, turns_since, ko, black_to_move)."""
    return Position(**leaves)


def empty(size: int) -> Positions:
    points = size * size
    return Positions(
        position=_position(
            board=np.zeros((0, points), np.int8),
            turns_since=np.zeros((0, points), np.int8),
            ko=np.zeros((0,), np.int32),
            black_to_move=np.zeros((0,), bool),
        ),
        action=np.zeros((0,), np.int32),
        outcome=np.zeros((0,), np.int8),
        game=np.zeros((0,), np.int32),
        move_number=np.zeros((0,), np.int32),
    )


def concatenate(parts: Sequence[Positions], size: int) -> Positions:
    if not parts:
        return empty(size)
    return Positions(
        position=jax.tree.map(lambda *xs: np.concatenate(xs), *(p.position for p in parts)),
        action=np.concatenate([p.action for p in parts]),
        outcome=np.concatenate([p.outcome for p in parts]),
        game=np.concatenate([p.game for p in parts]),
        move_number=np.concatenate([p.move_number for p in parts]),
    )


# ---------------------------------------------------------------------------------------------------------------------
# replay


@functools.cache
def _game(size: int):
    """pgx's Go rules object of `pgx.make(f"go_{size}x{size}")` (its `step`, `is_terminal`), used directly: the env's
    step would also compute rewards, the observation and the next legal-action mask at every ply, about 3x the cost."""
    return pgx.make(f"go_{size}x{size}")._game  # type: ignore[arg-type, attr-defined]


def _legal(x, action: jax.Array, after) -> jax.Array:
    """Whether pgx's legal-action mask allows `action` (a point, not a pass) in GameState `x`, read from the state
    `after` pgx played it: the point was empty, it was not the ko point, and the stone's chain has a liberty once the
    captures are taken (pgx's mask: an empty neighbour, a capture, or an own neighbour chain with a second liberty,
    which are exactly the ways the new chain keeps a liberty)."""
    size = round(x.board.shape[-1] ** 0.5)
    board = after.board.reshape(size, size)
    empty = jnp.pad(board == 0, 1)
    next_to_empty = (empty[:-2, 1:-1] | empty[2:, 1:-1] | empty[1:-1, :-2] | empty[1:-1, 2:]).reshape(-1)
    has_liberty = jnp.any((after.board == after.board[action]) & next_to_empty)
    return (x.board[action] == 0) & (x.ko != action) & has_liberty


@functools.cache
def _replay_window(size: int):
    """jit((x [B] pgx GameState, stopped [B], actions [W, B] int32, -1 = none) -> (x, stopped, (Position [W, B, ...],
    code [W, B] int8))): plays up to W plies of B games; the position is the one before each ply; code _OK for a ply
    played, _PAD for none (padding, or the game already cut), _ILLEGAL / _SUPERKO / _OVER for the ply that cut it."""
    game = _game(size)
    points = size * size

    def one(x, action):  # one game, one ply
        wanted = action >= 0
        a = jnp.clip(action, 0, points)
        after = game.step(x, a)
        over = game.is_terminal(x)  # two passes, superko or pgx's move limit
        legal = (a == points) | _legal(x, jnp.minimum(a, points - 1), after)
        superko = after.is_psk
        played = wanted & ~over & legal & ~superko
        code = jnp.where(
            ~wanted,
            _PAD,
            jnp.where(over, _OVER, jnp.where(~legal, _ILLEGAL, jnp.where(superko, _SUPERKO, _OK))),
        ).astype(jnp.int8)
        x = jax.tree.map(lambda new, old: jnp.where(played, new, old), after, x)
        return x, code

    def ply(carry, action):
        x, stopped = carry
        action = jnp.where(stopped, -1, action)
        position = from_pgx(GoState(_x=x))  # from_pgx reads only the GameState `_x`
        x, code = jax.vmap(one)(x, action)
        return (x, stopped | (code != _OK) & (code != _PAD)), (position, code)

    @jax.jit
    def window(x, stopped, actions):
        (x, stopped), out = jax.lax.scan(ply, (x, stopped), actions)
        return x, stopped, out

    return window


@functools.cache
def _initial(size: int, batch: int):
    game = _game(size)
    return jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (batch, *leaf.shape)), game.init())


_CUT_REASONS = {
    _ILLEGAL: "illegal move in pgx (occupied point, suicide or ko)",
    _SUPERKO: "positional superko (pgx: the mover loses)",
    _OVER: "moves after pgx ended the game (two passes or the move limit)",
}


def replay_parts(
    games: Sequence[corpus.ExpertGame], size: int, batch: int = _BATCH
) -> Iterator[tuple[Positions, Counter]]:
    """The positions of `games` (see positions_from_games), `batch` games at a time (games of similar lengths
    together, so not in the list's order): each part with the games pgx cut short in it, by reason."""
    if any(game.size != size for game in games):
        raise ValueError(f"every game must be {size}x{size}")
    window = _replay_window(size)
    plies = [np.asarray(corpus.replay_actions(game), np.int32) for game in games]
    order = sorted(range(len(games)), key=lambda i: len(plies[i]))  # similar lengths share a batch
    for start in range(0, len(order), batch):
        members = order[start : start + batch]
        longest = max(len(plies[i]) for i in members)
        length = -(-longest // _WINDOW) * _WINDOW
        actions = np.full((length, batch), -1, np.int32)  # [T, B]
        for column, i in enumerate(members):
            actions[: len(plies[i]), column] = plies[i]
        x, stopped = _initial(size, batch), jnp.zeros(batch, bool)
        outs = []
        for offset in range(0, length, _WINDOW):
            x, stopped, out = window(x, stopped, actions[offset : offset + _WINDOW])
            outs.append(jax.device_get(out))
        position = jax.tree.map(lambda *xs: np.concatenate(xs), *(o[0] for o in outs))  # [T, B, ...]
        codes = np.concatenate([o[1] for o in outs])  # [T, B]
        parts: list[Positions] = []
        cut: Counter = Counter()
        for column, i in enumerate(members):
            game, n = games[i], len(plies[i])
            bad = np.flatnonzero(codes[:n, column] != _OK)
            if bad.size:
                cut[_CUT_REASONS[int(codes[bad[0], column])]] += 1
            end = int(bad[0]) if bad.size else n
            setup = corpus.num_setup_plies(game)
            first = min(setup + game.unlabelled, end)  # random opening moves are not labels
            ply = np.arange(first, end)
            ply = ply[plies[i][first:end] != size * size]  # passes are not labels
            black = position.black_to_move[ply, column]
            parts.append(
                Positions(
                    position=jax.tree.map(lambda leaf, ply=ply, column=column: leaf[ply, column], position),
                    action=plies[i][ply],
                    outcome=(game.winner * np.where(black, 1, -1)).astype(np.int8),
                    game=np.full(ply.shape, i, np.int32),
                    move_number=(ply - setup + 1).astype(np.int32),
                )
            )
        yield concatenate(parts, size), cut


def replay(games: Sequence[corpus.ExpertGame], size: int, batch: int = _BATCH) -> tuple[Positions, dict[str, int]]:
    """The positions of `games` (see positions_from_games), in memory, and how many games pgx cut short, by reason."""
    parts: list[Positions] = []
    cut: Counter = Counter()
    for part, part_cut in replay_parts(games, size, batch):
        parts.append(part)
        cut.update(part_cut)
    positions = concatenate(parts, size)
    by_game = np.argsort(positions.game, kind="stable")  # game order, then move order
    return positions.take(by_game), dict(sorted(cut.items()))


def positions_from_games(games: Sequence[corpus.ExpertGame], size: int) -> Positions:
    """Every position of `games` before an expert's move that is neither a pass nor a handicap set-up ply, replayed
    with pgx (`pgx.make(f"go_{size}x{size}")`), in game then move order; a game is cut at its first move that pgx
    rejects."""
    return replay(games, size)[0]


def split(positions: Positions, test_games: Collection[int]) -> tuple[Positions, Positions]:
    """(train, test): the positions of the games in `test_games` go to test, all others to train."""
    test = np.isin(positions.game, np.fromiter(test_games, np.int32, len(test_games)))
    return positions.take(~test), positions.take(test)


# ---------------------------------------------------------------------------------------------------------------------
# files

_FIELDS = ("board", "turns_since", "ko", "black_to_move", "action", "outcome", "game", "move_number")


def _arrays(positions: Positions, test_games: Collection[int]) -> dict[str, np.ndarray]:
    p = positions.position
    return {
        "format": np.asarray(FORMAT, np.int32),
        "board": np.asarray(p.board, np.int8),
        "turns_since": np.asarray(p.turns_since, np.int8),
        "ko": np.asarray(p.ko, np.int32),
        "black_to_move": np.asarray(p.black_to_move, bool),
        "action": np.asarray(positions.action, np.int32),
        "outcome": np.asarray(positions.outcome, np.int8),
        "game": np.asarray(positions.game, np.int32),
        "move_number": np.asarray(positions.move_number, np.int32),
        "test_games": np.asarray(sorted(test_games), np.int32),
    }


def _read(path: str | os.PathLike) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise DatasetError(f"no data set at {path}") from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise DatasetError(f"{path} is not a readable data set: {_one_line(e)}") from None
    missing = [name for name in ("format", *_FIELDS, "test_games") if name not in arrays]
    if missing:
        raise DatasetError(f"{path} is not a position data set: no {', '.join(missing)}")
    if int(arrays["format"]) != FORMAT:
        raise DatasetError(f"{path} has data set format {int(arrays['format'])}, expected {FORMAT}")
    m, points = arrays["board"].shape if arrays["board"].ndim == 2 else (-1, -1)
    shapes_ok = (
        m >= 0
        and arrays["turns_since"].shape == (m, points)
        and all(arrays[name].shape == (m,) for name in _FIELDS[2:])
        and round(points**0.5) ** 2 == points
        and arrays["test_games"].ndim == 1
    )
    if not shapes_ok:
        raise DatasetError(f"{path} is not a position data set: its arrays do not have matching shapes")
    return arrays


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def load(path: str | os.PathLike) -> Positions:
    """Every position of the data set at `path`, in memory (a directory's two parts read whole and joined: for tests
    and small sets; train from `load_split`); DatasetError (one line) if it is missing or not a data set."""
    if _is_directory_set(path):
        return concatenate(list(load_split(path)), _read_parts(path)[0].size)
    return _positions(_read(path))


def load_split(path: str | os.PathLike) -> tuple[Positions, Positions]:
    """(train, test) of the data set at `path`: a directory's parts as memory maps (nothing read until a batch
    gathers its rows), a single .npz read whole and split by the held-out games saved with it."""
    if _is_directory_set(path):
        return _read_parts(path)
    arrays = _read(path)
    return split(_positions(arrays), set(arrays["test_games"].tolist()))


def _positions(arrays: dict[str, np.ndarray], copy: bool = True) -> Positions:
    """Positions of the fields' arrays; `copy=False` keeps arrays already of the right dtype as they are (memory
    maps stay maps)."""
    dtypes = {"board": np.int8, "turns_since": np.int8, "ko": np.int32, "black_to_move": bool, "action": np.int32}
    dtypes |= {"outcome": np.int8, "game": np.int32, "move_number": np.int32}
    a = {name: arrays[name].astype(dtype, copy=copy) for name, dtype in dtypes.items()}
    return Positions(
        position=_position(
            board=a["board"], turns_since=a["turns_since"], ko=a["ko"], black_to_move=a["black_to_move"]
        ),
        action=a["action"],
        outcome=a["outcome"],
        game=a["game"],
        move_number=a["move_number"],
    )


def save(
    path: str | os.PathLike, positions: Positions, test_games: Collection[int] = (), overwrite: bool = False
) -> None:
    """Writes `positions` (and the held-out game indices) to `path` as a compressed .npz (no pickle), through a
    temporary file renamed over `path`. An existing file with the same contents is left as it is; one with other
    contents (or an unreadable one) gives DatasetError unless `overwrite`."""
    arrays = _arrays(positions, test_games)
    target = Path(path)
    if target.exists() and not overwrite:
        try:
            old = _read(target)
        except DatasetError as e:
            raise DatasetError(
                f"{target} exists and is not this data set ({e}); pass overwrite to replace it"
            ) from None
        if old.keys() == arrays.keys() and all(np.array_equal(old[k], arrays[k]) for k in arrays):
            return
        raise DatasetError(f"{target} exists and holds a different data set; pass overwrite to replace it")
    with files.replaced_whole_bytes(os.fspath(target)) as f:  # a crash leaves the old file
        np.savez_compressed(f, allow_pickle=False, **arrays)  # type: ignore[arg-type]


# A data set directory: two column stores (az_jax/runtime/columns.py), DIR/train and DIR/test, each with the fields of
# Positions as columns; written a part at a time by `build`, read as memory maps by `load_split`.
_PARTS = ("train", "test")
_FLUSH = 65_536  # positions gathered before they are appended (~50 MB on 19×19)


def _schema(size: int) -> dict[str, tuple[Any, tuple[int, ...]]]:
    return {
        **position_lib.schema(size),
        "action": (np.int32, ()),
        "outcome": (np.int8, ()),
        "game": (np.int32, ()),
        "move_number": (np.int32, ()),
    }


def _is_directory_set(path: str | os.PathLike) -> bool:
    return os.path.isdir(path)


def _read_parts(path: str | os.PathLike) -> tuple[Positions, Positions]:
    parts = []
    for name in _PARTS:
        try:
            rows, meta = columns.read(os.path.join(path, name))
        except columns.ColumnsError as e:
            raise DatasetError(f"{path} is not a readable data set: {e}") from None
        if meta.get("format") != FORMAT or meta.get("part") != name or set(rows) != set(_FIELDS):
            raise DatasetError(f"{path} is not a position data set (its {name} part is not one of format {FORMAT})")
        parts.append(_positions(rows, copy=False))
    return parts[0], parts[1]


def default_path(size: int) -> Path:
    """Where `build` writes unless told otherwise: the directory <cache>/alphago/go_NxN_positions."""
    return corpus.default_cache_dir() / "alphago" / f"go_{size}x{size}_positions"


def _write_directory(
    parts: Iterator[tuple[Positions, Counter]], size: int, test_games: Collection[int], target: Path, overwrite: bool
) -> tuple[Counter, dict[str, int]]:
    """Streams `parts` into a data set directory built beside `target` and renamed onto it at the end (an
    interrupted build leaves `target` as it was); returns the cuts and the positions of each part."""
    if target.exists() and not overwrite:
        raise DatasetError(f"{target} exists; pass overwrite (--overwrite) to replace it")
    building = target.with_name(f"{target.name}.building-{os.getpid()}")
    if building.exists():
        shutil.rmtree(building)
    test = np.fromiter(test_games, np.int32, len(test_games))
    for name in _PARTS:
        columns.create(building / name, _schema(size), {"format": FORMAT, "part": name, "size": size})
    cut: Counter = Counter()
    counts = dict.fromkeys(_PARTS, 0)
    pending: list[Positions] = []

    def flush() -> None:
        everything = concatenate(pending, size)
        held_out = np.isin(everything.game, test)
        for name, mask in zip(_PARTS, (~held_out, held_out)):
            rows = _arrays(everything.take(mask), ())
            counts[name] = columns.append(building / name, {f: rows[f] for f in _FIELDS})
        pending.clear()

    try:
        for part, part_cut in parts:
            cut.update(part_cut)
            pending.append(part)
            if sum(len(p) for p in pending) >= _FLUSH:
                flush()
        flush()
        if target.exists():  # overwrite: the old set goes only once the new one is whole
            old = target.with_name(f"{target.name}.old-{os.getpid()}")
            os.replace(target, old)
            os.replace(building, target)
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        else:
            os.replace(building, target)
    finally:
        if building.exists():
            shutil.rmtree(building)
    return cut, counts


def build(
    sources: Sequence[str | os.PathLike], size: int, out_path: str | os.PathLike, overwrite: bool = False
) -> dict:
    """Reads the games of `sources`, replays them and saves every position with the held-out split to `out_path`:
    a directory (train and test column stores, streamed a part at a time: memory holds one part, never the whole
    set), or, for a path ending in .npz, one file written whole (`save`). The report: the corpus counts (files,
    parsed, skipped by reason, cut by reason, duplicates, unique games), the games pgx cut short (reason -> count),
    positions, train/test games and positions, seconds, path."""
    start = time.perf_counter()
    games, report = corpus.load_corpus(sources, size)
    read = time.perf_counter()
    test_games = corpus.held_out(games)
    target = Path(out_path)
    if target.suffix == ".npz":
        positions, cut = replay(games, size)
        train, test = split(positions, test_games)
        counts = {"train": len(train), "test": len(test)}
        replayed = time.perf_counter()
        save(out_path, positions, test_games, overwrite=overwrite)
    else:
        cut_counter, counts = _write_directory(replay_parts(games, size), size, test_games, target, overwrite)
        cut = dict(sorted(cut_counter.items()))
        replayed = time.perf_counter()
    done = time.perf_counter()
    return {
        **report,
        "cut_by_pgx": cut,
        "positions": counts["train"] + counts["test"],
        "train_games": len(games) - len(test_games),
        "test_games": len(test_games),
        "train_positions": counts["train"],
        "test_positions": counts["test"],
        "seconds": round(done - start, 1),
        "seconds_reading": round(read - start, 1),
        "seconds_replaying": round(replayed - read, 1),
        "path": str(out_path),
    }
