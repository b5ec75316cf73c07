"""Expert Go games for AlphaGo's supervised policy network (Silver et al. 2016, Methods, "Supervised learning of policy
networks": 30 million positions from 160,000 KGS games). There is no KGS data here; the sources are SGF records:

* the ~600 professional title games (1941-1997) of Debian's `goban-original-games` under /usr/share/goban (GPL-2+;
  read in place, never copied): .sgf files and .mgt files, which are SGF text with old FF[1]/FF[3] headers;
* the 35 professional games among kombilo 0.8.4's test data on PyPI (`fetch_kombilo` downloads the sdist into a cache
  directory; the games are read straight from the tarball);
* any directory of .sgf files (e.g. GNU Go self-play games on 9x9).

    games, report = load_corpus([GOBAN_DIR, fetch_kombilo()], size=19)

A game is its main line (first variations only) as pgx actions: action = row * N + col with row 0 the top row, N*N =
pass (envs/notation/go.py). pgx starts every game from the empty board, so handicap stones (AB in the root) are
replayed as Black moves with White passes in between (see `replay_actions`); records with other set-up (AW, AE, or
set-up in a later node) are skipped. A record that stops making sense part-way (two moves of one colour in a row, a
move off the board) is cut there; moves that pgx itself finds illegal are cut when the games are replayed
(az_jax/alphago/dataset.py). The same game often sits in several files (a .sgf and a .mgt of it): duplicates are
dropped by their action sequence.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from sgfmill import common, sgf, sgf_grammar, sgf_properties

from envs.notation import go

GOBAN_DIR = Path("/usr/share/goban")  # Debian package goban-original-games
KOMBILO = "kombilo==0.8.4"
KOMBILO_SDIST = "kombilo-0.8.4.tar.gz"
KOMBILO_SHA256 = "652161d77a4fafc51a4c1f3d47b6f77b796fccacb6dcb52da9abd81192980cca"
# kombilo's test data beside its 35 games: search patterns, not games (AP[Kombilo], no players, no result)
KOMBILO_NOT_GAMES = frozenset({"contlist.sgf", "under-the-stones.sgf"})
RECORD_SUFFIXES = (".sgf", ".mgt")
_AZ_JAX_TAG = "az_jax "  # envs/records/sgf.py's prefix of its JSON game comment
TEST_PERCENT = 5  # held-out games: hash of the action sequence mod 100 < 5


class CorpusError(Exception):
    """A source that cannot be read at all (missing path, failed download): one line, for the CLI."""


@dataclasses.dataclass(frozen=True)
class ExpertGame:
    source: str  # the source it came from (a directory or tarball path)
    name: str  # the file name inside the source ('#k' appended for the k-th game of a collection, k >= 1)
    size: int  # N of the N x N board
    setup: tuple[int, ...]  # handicap stones (root AB) as pgx actions, in the record's order
    actions: tuple[int, ...]  # the main line's moves as pgx actions, N*N = pass; setup excluded
    winner: int  # +1 Black won, -1 White won, 0 jigo or unknown (from RE[])
    white_first: bool = False  # the record's first move is White's (after handicap stones; never without them)
    unlabelled: int = 0  # leading moves that are not expert moves (the random opening of `az-jax alphago games`)

    @property
    def setup_plies(self) -> int:
        return num_setup_plies(self)

    @property
    def key(self) -> str:
        return game_key(self)


def default_cache_dir() -> Path:
    """Where downloads and data sets go unless told otherwise: $AZ_JAX_DATA, else ~/.cache/az_jax (never the git
    tree)."""
    return Path(os.environ.get("AZ_JAX_DATA", "~/.cache/az_jax")).expanduser()


# ---------------------------------------------------------------------------------------------------------------------
# replay order, identity, held-out split


def setup_actions(game: ExpertGame) -> tuple[int, ...]:
    """The plies that put the handicap stones on pgx's empty board before the first recorded move: stone, pass, stone,
    ..., stone (White passes between Black's stones), and one more White pass when Black also makes the first recorded
    move. This makes pgx's move count and its board history (hence the turns-since feature of the first moves) differ
    from a real handicap game; these plies are never used as labels."""
    n_pass = game.size * game.size
    plies = [a for stone in game.setup for a in (stone, n_pass)]
    return tuple(plies if not game.white_first else plies[:-1])


def num_setup_plies(game: ExpertGame) -> int:
    """How many plies of `replay_actions(game)` come before the first recorded move."""
    return len(setup_actions(game))


def replay_actions(game: ExpertGame) -> tuple[int, ...]:
    """Every pgx action of the game from the empty board: the set-up plies, then the recorded moves."""
    return setup_actions(game) + game.actions


def game_key(game: ExpertGame) -> str:
    """A digest of the board size and the replayed action sequence: equal for the same game in two files."""
    data = np.asarray((game.size, *replay_actions(game)), dtype=np.int16).tobytes()
    return hashlib.sha256(data).hexdigest()


def is_held_out(game: ExpertGame) -> bool:
    """Whether the game is in the test split: a stable function of its moves (about TEST_PERCENT of the games), so
    every position of a game falls on one side, and a game keeps its side however the corpus is assembled."""
    return int(game_key(game)[:16], 16) % 100 < TEST_PERCENT


def held_out(games: Sequence[ExpertGame]) -> set[int]:
    """The indices of the held-out (test) games of `games`."""
    return {i for i, game in enumerate(games) if is_held_out(game)}


# ---------------------------------------------------------------------------------------------------------------------
# reading one record


class Skip(Exception):
    """A record that gives no game (the message is the reason, counted in the report)."""


def winner_of(result: str) -> int:
    """RE[] text -> +1 Black won, -1 White won, 0 jigo / void / unknown. Accepts the FF[4] forms ('B+R', 'W+2.5',
    '0', 'Void', '?') and the old free text of FF[1]/FF[3] records ('White wins by resignation', 'Jigo')."""
    text = result.strip().lower()
    if text.startswith("b+") or text.startswith("black wins") or text.startswith("black won"):
        return 1
    if text.startswith("w+") or text.startswith("white wins") or text.startswith("white won"):
        return -1
    return 0


def _raw(node, identifier: str) -> str:
    return node.get_raw(identifier).decode("latin-1")


def _point(raw: bytes, size: int) -> int:
    """An SGF point value (b'dd'; b'' or b'tt' for a pass) -> pgx action. Whitespace inside the brackets (line breaks
    in old records) is dropped. sgfmill gives (row, col) with row 0 the bottom row; the GTP vertex and
    envs.notation.go turn it into pgx's top-left numbering. ValueError if it is not a point of the board."""
    point = sgf_properties.interpret_go_point(re.sub(rb"\s", b"", raw), size)
    if point is None:
        return size * size
    return go.vertex_to_action(common.format_vertex(point), size)


def _has_setup(node) -> bool:
    return any(node.has_property(p) for p in ("AB", "AW", "AE"))


def parse_game(game: sgf.Sgf_game, size: int, source: str = "", name: str = "") -> tuple[ExpertGame, str | None]:
    """The ExpertGame of a parsed SGF game and why it was cut short (None if it was not); Skip(reason) if it gives
    no game."""
    if game.get_size() != size:
        raise Skip(f"board size {game.get_size()}, not {size}")
    root = game.get_root()
    if root.has_property("AW") or root.has_property("AE"):
        raise Skip("set-up stones other than handicap (AW/AE)")
    try:
        setup = tuple(_point(raw, size) for raw in root.get_raw_list("AB")) if root.has_property("AB") else ()
    except ValueError:
        raise Skip("handicap stone off the board") from None
    if size * size in setup or len(set(setup)) != len(setup):
        raise Skip("bad handicap stones")
    winner = winner_of(_raw(root, "RE")) if root.has_property("RE") else 0
    actions: list[int] = []
    cut = None
    colour = first = "w" if setup else "b"  # who moves first in the record; Black may also move first after AB
    for node in game.get_main_sequence()[1:]:
        mover = "b" if node.has_property("B") else "w" if node.has_property("W") else None
        if _has_setup(node):
            if not actions:
                raise Skip("set-up stones outside the root node")
            cut = "set-up stones after the first move"
            break
        if mover is None:
            continue  # an empty node, or one with a comment only
        if not actions and setup and mover == "b":
            colour = first = "b"
        if mover != colour:
            if not actions:
                raise Skip("White moves first without handicap stones")
            cut = "two moves of one colour in a row"
            break
        try:
            actions.append(_point(node.get_raw(mover.upper()), size))
        except ValueError:
            cut = "move off the board"
            break
        colour = "w" if colour == "b" else "b"
    if not actions:
        raise Skip("no moves")
    game_ = ExpertGame(
        source, name, size, setup, tuple(actions), winner, white_first=first == "w", unlabelled=_random_opening(root)
    )
    return game_, cut


def _random_opening(root) -> int:
    """The random opening plies an `az-jax alphago games` record declares in its az_jax game comment (GC), else 0:
    those moves were drawn at random, not chosen by the engine, so they are never labels."""
    if not root.has_property("GC"):
        return 0
    text = root.get("GC")
    if not text.startswith(_AZ_JAX_TAG):
        return 0
    try:
        return max(0, int(json.loads(text[len(_AZ_JAX_TAG) :])["meta"]["opening_plies"]))
    except (ValueError, KeyError, TypeError):
        return 0


# ---------------------------------------------------------------------------------------------------------------------
# sources


def iter_records(source: str | os.PathLike) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each .sgf/.mgt record of a source, sorted by name: a directory (searched recursively), a
    tarball (read in memory, nothing extracted) or a single file. CorpusError if the source does not exist."""
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in RECORD_SUFFIXES)
        for p in files:
            yield str(p.relative_to(path)), p.read_bytes()
    elif path.is_file() and tarfile.is_tarfile(path):
        with tarfile.open(path, "r:*") as tar:
            members = sorted(
                (m for m in tar.getmembers() if m.isfile() and Path(m.name).suffix.lower() in RECORD_SUFFIXES),
                key=lambda m: m.name,
            )
            for member in members:
                f = tar.extractfile(member)
                if f is not None:
                    yield member.name, f.read()
    elif path.is_file():
        yield path.name, path.read_bytes()
    else:
        raise CorpusError(f"no such game source: {source} (a directory of SGF files, a tarball or an SGF file)")


def read_record(data: bytes, size: int, source: str, name: str) -> tuple[list[ExpertGame], Counter, Counter]:
    """The games of one record file (a collection may hold several), with Counters of skip and cut reasons."""
    skipped: Counter = Counter()
    cut: Counter = Counter()
    if Path(name).name in KOMBILO_NOT_GAMES and Path(source).name.startswith("kombilo"):
        skipped["kombilo search pattern, not a game"] += 1
        return [], skipped, cut
    try:
        trees = sgf_grammar.parse_sgf_collection(data)
    except ValueError:
        skipped["not SGF (parse error)"] += 1
        return [], skipped, cut
    games = []
    for index, tree in enumerate(trees):
        label = name if len(trees) == 1 else f"{name}#{index + 1}"
        try:
            parsed = sgf.Sgf_game.from_coarse_game_tree(tree)
            game, why = parse_game(parsed, size, source, label)
        except Skip as e:
            skipped[str(e)] += 1
            continue
        except ValueError:  # sgfmill: bad SZ etc.
            skipped["bad SGF property"] += 1
            continue
        if why is not None:
            cut[why] += 1
        games.append(game)
    return games, skipped, cut


def load_corpus(sources: Sequence[str | os.PathLike], size: int) -> tuple[list[ExpertGame], dict]:
    """The unique games of board size `size` from `sources` (in source order, then file name order) and a report:
    files read, games parsed, skipped (reason -> count), cut short (reason -> count), duplicates dropped, unique games,
    games with an unknown result, held-out games. Of games with the same set-up and moves the first is kept; a game
    whose moves are the start of another game's (the same game recorded less far) is dropped for the longer one."""
    parsed: list[ExpertGame] = []
    files = 0
    skipped: Counter = Counter()
    cut: Counter = Counter()
    for source in sources:
        for name, data in iter_records(source):
            files += 1
            found, why_skipped, why_cut = read_record(data, size, str(source), name)
            skipped.update(why_skipped)
            cut.update(why_cut)
            parsed.extend(found)
    first: dict[str, ExpertGame] = {}
    for game in parsed:
        first.setdefault(game_key(game), game)
    # in sorted order a game that is the start of others comes right before one of them (everything in between
    # starts with it too)
    ordered = sorted(first.values(), key=lambda g: (g.setup, g.white_first, g.actions))
    shorter = {
        id(a)
        for a, b in zip(ordered, ordered[1:])
        if (a.setup, a.white_first) == (b.setup, b.white_first) and b.actions[: len(a.actions)] == a.actions
    }
    games = [game for game in first.values() if id(game) not in shorter]
    report = {
        "files": files,
        "parsed": len(parsed),
        "skipped": dict(sorted(skipped.items())),
        "cut": dict(sorted(cut.items())),
        "duplicates": len(parsed) - len(first),
        "prefix_duplicates": len(shorter),
        "unique_games": len(games),
        "unknown_results": sum(game.winner == 0 for game in games),
        "held_out_games": len(held_out(games)),
    }
    return games, report


def fetch_kombilo(cache_dir: str | os.PathLike | None = None) -> Path:
    """kombilo 0.8.4's sdist (its tests/sgfs hold 35 professional games) in `cache_dir` (default
    default_cache_dir()), downloaded once with `python -m pip download` and checked against its SHA-256; a no-op when
    it is already there. CorpusError with pip's last line if the download fails."""
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = directory / KOMBILO_SDIST
    if target.is_file() and _sha256(target) == KOMBILO_SHA256:
        return target
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        command = [sys.executable, "-m", "pip", "download", KOMBILO, "--no-deps", "--no-binary", ":all:", "-d", tmp]
        done = subprocess.run(command, capture_output=True, text=True)
        got = Path(tmp) / KOMBILO_SDIST
        if done.returncode != 0 or not got.is_file():
            lines = (done.stderr or done.stdout or "no output").strip().splitlines()
            raise CorpusError(f"pip download {KOMBILO} failed: {lines[-1] if lines else 'no output'}")
        if _sha256(got) != KOMBILO_SHA256:
            raise CorpusError(f"{KOMBILO_SDIST} from PyPI does not have the expected SHA-256 {KOMBILO_SHA256}")
        shutil.move(str(got), target)  # same file system: a rename
    return target


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def default_sources(size: int, cache_dir: str | os.PathLike | None = None) -> list[Path]:
    """The professional 19x19 sources: /usr/share/goban (if installed) and kombilo's games (downloaded if needed).
    There are none for other sizes (pass a directory of SGF files)."""
    if size != 19:
        return []
    sources = [GOBAN_DIR] if GOBAN_DIR.is_dir() else []
    return [*sources, fetch_kombilo(cache_dir)]
