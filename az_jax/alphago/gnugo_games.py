"""Games for AlphaGo's supervised stage on 9x9 Go, where there are no human records here: GNU Go self-play.

AlphaGo's SL policy network learns from expert games (Silver et al. 2016, "Supervised learning of policy networks":
KGS 6-9 dan games). For 9x9 the stand-in is engine games: GNU Go (level 10 by default, an engine of roughly 5-8 kyu
strength, not an expert) playing both colours from randomised openings, with duplicates dropped.

    report = generate(default_dir(9), 1000, workers=2)   # resumable; a rerun continues where this one stopped

One game, for index i (everything random derives from (seed, i), so the same index gives the same game again):

* a GNU Go process (one per worker, reused: `clear_board`, `clear_cache`, then `set_random_seed` per game) with
  Chinese (area) rules, positional superko and `--capture-all-dead` (it captures every stone it judges dead before it
  passes, so the final board scores the same under pgx's Tromp-Taylor area rules, as tests/test_gtp_engine.py checks);
* the first k plies, k uniform in `random_opening_plies` (both ends included), are uniformly random legal moves off
  the first line (GNU Go's `all_legal`; any legal point if no such move is left), played with `play`;
* then GNU Go's `genmove` for each colour in turn until two passes in a row, a resignation, or 2*N*N plies in all
  (pgx's own move limit, so a game never runs past the end of the pgx game it replays as);
* the result is GNU Go's `final_score` (e.g. RE[B+3.5]), or B+R / W+R after a resignation.

Files: out_dir/game-{i:06d}.sgf (the project's SGF writer, envs/records/sgf.py, with KM, RU[Chinese] and a root
comment on where the game comes from; the game comment's JSON meta has "opening_plies", "termination", "level",
"gnugo_seed"). Each file is written to a temporary name and renamed into place, so a file is either whole or absent.
A game whose moves equal those of a game already in out_dir is not written; out_dir/game-{i:06d}.dup (one line: the
game it repeats) marks its index as done, so a rerun neither replays it nor counts it. The index of moves is rebuilt
from the directory at the start of every run. `games` is the number of distinct games wanted in out_dir in all.

Agreement with pgx (go_9x9): GNU Go forbids suicide and (with --positional-superko) any repeated position, so every
move is legal in pgx and no move ends the pgx game early by superko. After two passes, GNU Go's final_score equals
pgx's Tromp-Taylor margin whenever GNU Go has captured every dead stone, which --capture-all-dead makes it do before
it passes; the two can differ after a resignation (pgx would score the board as it stands) and at the ply cap, where
stones GNU Go counts as dead may still stand.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import itertools
import os
import re
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from sgfmill import sgf

from az_jax.engines.errors import EngineError
from az_jax.engines.gtp import GTPEngine, find_executable
from envs.notation import go
from envs.records import GO_GAMES, GameRecord, RecordError, from_sgf, to_sgf

DEFAULT_OPENING_PLIES = (2, 6)  # k random plies, both ends included
DEFAULT_MOVE_TIMEOUT_S = 60.0  # per genmove; GNU Go 3.8 level 10 takes well under a second a move on 9x9
_GAME_FILE = re.compile(r"^game-(\d{6,})\.(sgf|dup)$")
_ENDINGS = {
    "passes": "Ended by two passes; the result is GNU Go's final_score.",
    "resignation": "Ended by a resignation.",
    "ply_cap": "Stopped at {plies} plies (pgx's limit); the result is GNU Go's final_score of that position.",
}
_TEMP_FILE = re.compile(r"^\.game-\d{6,}\.(sgf|dup)\.tmp$")


class GnuGoGamesError(EngineError):
    """GNU Go failed (crash, timeout, bad reply) while playing a game, or is not installed; one line, naming the game
    index. Games finished before it stay on disk."""


@dataclasses.dataclass(frozen=True)
class EngineGame:
    """One finished GNU Go self-play game."""

    index: int
    moves: tuple[str, ...]  # [plies] GTP vertices ('D4') or 'pass', Black first; no 'resign'
    opening_plies: int  # how many of the first moves were random
    score: str  # GNU Go's final_score ('B+3.5', 'W+0.5', '0'), or 'B+R' / 'W+R' after a resignation
    termination: str  # 'passes', 'resignation' or 'ply_cap'
    gnugo_seed: int  # GNU Go's random seed in this game


def default_dir(size: int = 9) -> Path:
    """Where callers keep the games by default: $AZ_JAX_DATA (else ~/.cache/az_jax) / gnugo{size}."""
    base = os.environ.get("AZ_JAX_DATA") or os.path.join(os.path.expanduser("~"), ".cache", "az_jax")
    return Path(base) / f"gnugo{size}"


def gnugo_command(level: int, executable: str | None = None) -> list[str]:
    """GNU Go's GTP command line for these games (Chinese rules, positional superko, all dead stones captured)."""
    exe = executable or find_executable("gnugo")
    if exe is None:
        raise GnuGoGamesError("gnugo is not installed (Debian package gnugo, listed in .ci/apt-packages.txt)")
    return [exe, "--mode", "gtp", "--level", str(int(level)), "--chinese-rules", "--capture-all-dead",
            "--positional-superko"]  # fmt: skip


def game_rng(seed: int, index: int) -> np.random.Generator:
    """The random numbers of game `index` (opening length and moves, GNU Go's seed): a function of (seed, index)."""
    return np.random.default_rng([int(seed), int(index)])


def moves_key(actions) -> bytes:
    """The de-duplication key of a move sequence (pgx actions): a 16-byte hash of the actions in order."""
    return hashlib.blake2b(np.asarray(actions, dtype=np.int32).tobytes(), digest_size=16).digest()


def _on_edge(vertex: str, size: int) -> bool:
    row, col = divmod(go.vertex_to_action(vertex, size), size)
    return row in (0, size - 1) or col in (0, size - 1)


def play_game(
    engine: GTPEngine,
    index: int,
    *,
    size: int,
    seed: int,
    opening_plies: tuple[int, int],
    stop: threading.Event | None = None,
) -> EngineGame | None:
    """Play game `index` in `engine` (a GNU Go already set to `size` and komi). None if `stop` is set mid-game."""
    rng = game_rng(seed, index)
    low, high = opening_plies
    k = int(rng.integers(low, high + 1))
    gnugo_seed = int(rng.integers(1, 2**31 - 1))  # GNU Go reads 0 as "seed from the clock"
    engine.clear_board()
    engine.send("clear_cache")  # a reused process then plays exactly as a fresh one
    engine.send(f"set_random_seed {gnugo_seed}")
    max_plies = 2 * size * size  # pgx Go's game length limit
    moves: list[str] = []
    colours = ("black", "white")
    for ply in range(min(k, max_plies)):
        colour = colours[ply % 2]
        legal = sorted(go.normalize_vertices(engine.send(f"all_legal {colour}").split()),
                       key=lambda v: go.vertex_to_action(v, size))  # fmt: skip
        pool = [v for v in legal if not _on_edge(v, size)] or legal
        move = pool[int(rng.integers(len(pool)))] if pool else go.PASS
        engine.play(colour, move)
        moves.append(move)
    termination, score = "ply_cap", ""
    while len(moves) < max_plies:
        if moves[-2:] == [go.PASS, go.PASS]:
            termination = "passes"
            break
        if stop is not None and stop.is_set():
            return None
        colour = colours[len(moves) % 2]
        move = engine.genmove(colour)
        if move == go.RESIGN:
            termination, score = "resignation", ("W+R" if colour == "black" else "B+R")
            break
        moves.append(move)
    else:
        if moves[-2:] == [go.PASS, go.PASS]:
            termination = "passes"
    if not score:
        score = engine.final_score()
    return EngineGame(index, tuple(moves), k, score, termination, gnugo_seed)


def to_record(game: EngineGame, size: int, player: str, level: int) -> GameRecord:
    """The game as a GameRecord of pgx go_{size}x{size} (`player` names both sides)."""
    margin = go.parse_score(game.score)
    result = 1.0 if margin > 0 else -1.0 if margin < 0 else 0.0
    meta: dict[str, str] = {
        "source": "gnugo",
        "level": str(level),
        "index": str(game.index),
        "gnugo_seed": str(game.gnugo_seed),
        "opening_plies": str(game.opening_plies),
        "termination": game.termination,
    }
    if game.termination == "resignation":
        meta["resigned"] = "true"
    else:
        meta["margin"] = f"{abs(margin):g}"
    actions = tuple(go.vertex_to_action(m, size) for m in game.moves)
    return GameRecord(f"go_{size}x{size}", actions, result, (player, player), 0, tuple(meta.items()))


def sgf_text(game: EngineGame, size: int, komi: float, player: str, level: int) -> str:
    """SGF of the game: envs/records/sgf.py's writer, with this game's komi, rules and origin in the root."""
    record = to_record(game, size, player, level)
    sgf_game = sgf.Sgf_game.from_bytes(to_sgf(record).encode("utf-8"))
    root = sgf_game.get_root()
    root.set("KM", float(komi))
    root.set("RU", "Chinese")
    root.set(
        "C",
        f"{player} self-play: engine games, not human expert games (GNU Go at level 10 plays at roughly 5-8 kyu, "
        f"lower levels weaker). The first "
        f"{game.opening_plies} plies are random legal moves off the first line; then GNU Go plays both colours under "
        f"Chinese (area) rules with positional superko, capturing every dead stone before it passes "
        f"(--capture-all-dead). Komi {komi:g}. {_ENDINGS[game.termination].format(plies=2 * size * size)}",
    )
    return sgf_game.serialise().decode("utf-8")


def _write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory and a rename: whole or absent."""
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)


def scan(out_dir: Path, size: int) -> tuple[dict[bytes, int], set[int]]:
    """(key of each game's moves -> its index, indices already done (games and duplicate markers)) of `out_dir`.
    Removes temporary files an interrupted run left. RecordError, naming the file, on an unreadable game."""
    index: dict[bytes, int] = {}
    done: set[int] = set()
    for entry in sorted(os.listdir(out_dir)):
        if _TEMP_FILE.match(entry):
            os.unlink(out_dir / entry)
            continue
        m = _GAME_FILE.match(entry)
        if m is None:
            continue
        i = int(m.group(1))
        done.add(i)
        if m.group(2) == "dup":
            continue
        path = out_dir / entry
        try:
            record = from_sgf(path.read_bytes())
        except RecordError as e:
            raise RecordError(f"{path}: {e}") from None
        if record.game != f"go_{size}x{size}":
            raise RecordError(f"{path}: a {record.game} game, but this directory is for go_{size}x{size}")
        index.setdefault(moves_key(record.actions), i)
    return index, done


class _Scheduler:
    """Hands out game indices to the workers and commits finished games in index order (so which of two equal games
    counts as the duplicate does not depend on the workers' timing). Thread-safe."""

    def __init__(self, out_dir: Path, needed: int, index: dict[bytes, int], done: set[int], write):
        self.out_dir, self.needed, self.index, self.write = out_dir, needed, index, write
        self._free: Iterator[int] = (i for i in itertools.count() if i not in done)
        self._claimed: list[int] = []  # heap of indices handed out and not yet committed
        self._results: dict[int, EngineGame] = {}
        self._cond = threading.Condition()
        self.stop = threading.Event()
        self.written: list[EngineGame] = []
        self.duplicates: list[tuple[int, int]] = []  # (index, index of the game it repeats)
        self.error: tuple[int, BaseException] | None = None

    def claim(self) -> int | None:
        """The next index to play, or None when enough games are written or in progress, or the run stopped."""
        with self._cond:
            while not self.stop.is_set():
                if len(self.written) + len(self._claimed) < self.needed:
                    i = next(self._free)
                    heapq.heappush(self._claimed, i)
                    return i
                if not self._claimed:
                    return None
                self._cond.wait()
            return None

    def finish(self, game: EngineGame, size: int) -> None:
        with self._cond:
            self._results[game.index] = game
            while self._claimed and self._claimed[0] in self._results:
                done = self._results.pop(heapq.heappop(self._claimed))
                key = moves_key([go.vertex_to_action(m, size) for m in done.moves])
                if key in self.index:
                    original = self.index[key]
                    _write_atomically(self.out_dir / f"game-{done.index:06d}.dup", f"game-{original:06d}.sgf\n")
                    self.duplicates.append((done.index, original))
                else:
                    self.write(done)
                    self.index[key] = done.index
                    self.written.append(done)
            self._cond.notify_all()

    def fail(self, index: int, error: BaseException) -> None:
        with self._cond:
            if self.error is None:
                self.error = (index, error)
            self.stop.set()
            self._cond.notify_all()


def _worker(scheduler: _Scheduler, command: list[str], size: int, komi: float, seed: int, opening, move_timeout):
    engine: GTPEngine | None = None
    try:
        while (i := scheduler.claim()) is not None:
            try:
                if engine is None:
                    engine = GTPEngine(command, move_timeout=move_timeout)
                    engine.boardsize(size)
                    engine.komi(komi)
                game = play_game(engine, i, size=size, seed=seed, opening_plies=opening, stop=scheduler.stop)
                if game is None:
                    return
                scheduler.finish(game, size)
            except BaseException as e:  # noqa: BLE001 - the main thread raises it, naming the game
                scheduler.fail(i, e)
                return
    finally:
        if engine is not None:
            engine.close()


def generate(
    out_dir: str | os.PathLike,
    games: int,
    *,
    size: int = 9,
    level: int = 10,
    seed: int = 0,
    komi: float = 7.5,
    random_opening_plies: tuple[int, int] = DEFAULT_OPENING_PLIES,
    workers: int = 1,
    move_timeout: float = DEFAULT_MOVE_TIMEOUT_S,
) -> dict:
    """Play GNU Go self-play games into `out_dir` until it holds `games` distinct games (see the module docstring).

    Returns a report: out_dir; existing (games found at the start); written and duplicates (this run); total (games in
    out_dir now); terminations (this run's written games by how they ended); seconds (wall clock); engine_cpu_seconds
    (user + system time of the GNU Go processes); games_per_cpu_hour (written / engine CPU hours, None if nothing was
    written). ValueError on a bad argument; RecordError on an unreadable game file in out_dir; GnuGoGamesError
    (an EngineError) naming the game index when GNU Go crashes, times out or is missing.
    """
    if f"go_{size}x{size}" not in GO_GAMES:
        raise ValueError(f"size must be one of the pgx Go boards ({', '.join(GO_GAMES)}), got {size}")
    low, high = (int(x) for x in random_opening_plies)
    if not 0 <= low <= high:
        raise ValueError(f"random_opening_plies must be (low, high) with 0 <= low <= high, got {random_opening_plies}")
    if games < 0 or workers < 1 or level < 0:
        raise ValueError(f"need games >= 0, workers >= 1 and level >= 0, got {games}, {workers}, {level}")
    command = gnugo_command(level)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    index, done = scan(out, size)
    existing = len(index)  # distinct games (a copy placed by hand counts once)
    player = _player_name(command, level)
    started, cpu_before = time.monotonic(), _children_cpu()

    def write(game: EngineGame) -> None:
        _write_atomically(out / f"game-{game.index:06d}.sgf", sgf_text(game, size, komi, player, level))

    scheduler = _Scheduler(out, games - existing, index, done, write)
    if scheduler.needed > 0:
        threads = [
            threading.Thread(
                target=_worker,
                args=(scheduler, command, size, komi, seed, (low, high), move_timeout),
                name=f"gnugo-games-{w}",
                daemon=True,
            )
            for w in range(min(workers, scheduler.needed))
        ]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.2)  # in slices, so Ctrl-C reaches this thread
        except BaseException:
            scheduler.stop.set()  # the workers stop after their current move and close their engines
            for t in threads:
                t.join()
            raise
    seconds = time.monotonic() - started
    cpu = _children_cpu() - cpu_before  # the engines are reaped (closed) by now
    if scheduler.error is not None:
        i, e = scheduler.error
        if isinstance(e, EngineError):
            raise GnuGoGamesError(f"game {i} (file game-{i:06d}.sgf in {out}): {e}") from e
        raise e  # writing the file failed (an OSError), or a bug
    written = len(scheduler.written)
    terminations = {t: 0 for t in ("passes", "resignation", "ply_cap")}
    for g in scheduler.written:
        terminations[g.termination] += 1
    return {
        "out_dir": str(out),
        "existing": existing,
        "written": written,
        "duplicates": len(scheduler.duplicates),
        "total": existing + written,
        "terminations": terminations,
        "seconds": seconds,
        "engine_cpu_seconds": cpu,
        "games_per_cpu_hour": written / (cpu / 3600) if written and cpu > 0 else None,
    }


def _children_cpu() -> float:
    """User + system CPU seconds of this process's reaped child processes (the GNU Go engines once closed)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _player_name(command: list[str], level: int) -> str:
    """'GNU Go 3.8 (level 10)': asks the installed engine its version."""
    try:
        with GTPEngine(command) as engine:
            return f"{engine.name()} {engine.version()} (level {level})"
    except EngineError as e:
        raise GnuGoGamesError(f"cannot start GNU Go ({command[0]}): {e}") from e
