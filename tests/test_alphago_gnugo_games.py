"""GNU Go self-play games for AlphaGo's 9x9 supervised stage (az_jax/alphago/gnugo_games.py), with the real GNU Go at
level 0 (about a second of CPU a game): the SGF files replay legally in pgx go_9x9, their results agree with pgx's
Tromp-Taylor score, openings are random, runs resume without touching finished files, the same index gives the same
game, duplicates are not written, and a GNU Go failure names the game."""

import re
import shutil

import jax
import numpy as np
import pgx
import pytest
from pgx._src.games.go import _count_scores
from sgfmill import sgf

from az_jax.alphago import gnugo_games
from az_jax.engines import gtp
from envs.notation import go
from envs.records import from_sgf

N = 9
LEVEL = 0  # the fastest GNU Go; the generator's default is 10
GAMES = 3


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    assert gtp.find_executable("gnugo"), "gnugo is needed (Debian package gnugo, .ci/apt-packages.txt)"
    out = tmp_path_factory.mktemp("gnugo9")
    report = gnugo_games.generate(out, GAMES, level=LEVEL, seed=0)
    files = sorted(out.glob("game-*.sgf"))
    return out, report, {p.name: p.read_bytes() for p in files}


@pytest.fixture(scope="module")
def pgx_go():
    env = pgx.make("go_9x9")
    return jax.jit(env.init), jax.jit(env.step)


def test_first_run_writes_the_games(first_run):
    out, report, files = first_run
    assert sorted(files) == ["game-000000.sgf", "game-000001.sgf", "game-000002.sgf"]
    assert (report["existing"], report["written"], report["duplicates"], report["total"]) == (0, 3, 0, 3)
    assert sum(report["terminations"].values()) == 3
    assert report["engine_cpu_seconds"] > 0 and report["games_per_cpu_hour"] > 0
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_games_are_valid_sgf_that_replay_in_pgx_with_pgx_scores(first_run, pgx_go):
    """Each file: SZ 9, KM 7.5, both players named GNU Go, a result, colours alternating from Black; every move legal
    in pgx (legal_action_mask checked before each step) and none ends the pgx game early (no superko repetition).
    After two passes pgx's game is over and its Tromp-Taylor margin (black area - white area - 7.5) equals GNU Go's
    final_score in RE[], so pgx's reward has the same sign."""
    init, step = pgx_go
    _, _, files = first_run
    ended_by_passes = 0
    for name, data in files.items():
        game = sgf.Sgf_game.from_bytes(data)
        root = game.get_root()
        assert game.get_size() == N and root.get("KM") == 7.5, name
        assert root.get("PB") == root.get("PW") == f"GNU Go 3.8 (level {LEVEL})", name
        result = root.get("RE")
        assert re.fullmatch(r"[BW]\+(R|\d+(\.5)?)", result), (name, result)
        nodes = game.get_main_sequence()[1:]
        assert [n.get_move()[0] for n in nodes] == ["b", "w"] * (len(nodes) // 2) + ["b"] * (len(nodes) % 2), name
        record = from_sgf(data)
        assert len(record.actions) == len(nodes) > 0
        state = init(jax.random.key(0))
        black = int(state._player_order[0])  # pgx draws which player id is Black
        for ply, action in enumerate(record.actions, start=1):
            assert not bool(state.terminated), (name, ply)  # no pgx ending (superko, length) before the last move
            assert bool(np.asarray(state.legal_action_mask)[action]), (name, ply, go.action_to_vertex(action, N))
            state = step(state, action)
        meta = record.meta_dict
        if meta["termination"] == "passes":
            ended_by_passes += 1
            assert record.actions[-2:] == (N * N, N * N) and bool(state.terminated), name
            black_area, white_area = (int(x) for x in _count_scores(state._x, N))
            assert black_area - white_area - 7.5 == go.parse_score(result), (name, result, black_area, white_area)
            assert float(state.rewards[black]) == (1.0 if result.startswith("B+") else -1.0), name
        else:  # a resignation: RE[B+R] / W+R; not scored by pgx
            assert meta["termination"] == "resignation" and result.endswith("+R"), (name, meta)
    assert ended_by_passes >= 1  # level 0 from seed 0: all three end by passes (checked when this was written)


def test_openings_are_random_legal_moves_off_the_edge(first_run):
    """Each game begins with k in [2, 6] random plies (meta opening_plies), all off the first line, and no two games
    share their opening (3 games drawn from 49 interior points for the first move alone)."""
    _, _, files = first_run
    openings = []
    for data in files.values():
        record = from_sgf(data)
        k = int(record.meta_dict["opening_plies"])
        assert 2 <= k <= 6
        for action in record.actions[:k]:
            row, col = divmod(action, N)
            assert 1 <= row <= N - 2 and 1 <= col <= N - 2, go.action_to_vertex(action, N)
        openings.append(record.actions[:k])
    assert len(set(openings)) == len(openings), openings


def test_rerun_resumes_and_the_same_index_gives_the_same_game(first_run, tmp_path):
    """Asking the same directory for 4 games adds game 3 and leaves games 0-2 byte for byte; game 3 again, in a fresh
    directory whose indices 0-2 are marked done (.dup markers) and a fresh GNU Go process, is the same file."""
    out, _, before = first_run
    report = gnugo_games.generate(out, GAMES + 1, level=LEVEL, seed=0)
    assert (report["existing"], report["written"], report["duplicates"], report["total"]) == (3, 1, 0, 4)
    after = {p.name: p.read_bytes() for p in sorted(out.glob("game-*.sgf"))}
    assert {k: after[k] for k in before} == before
    assert sorted(after) == sorted(before) + ["game-000003.sgf"]
    again = gnugo_games.generate(out, GAMES + 1, level=LEVEL, seed=0)  # nothing left to do
    assert (again["existing"], again["written"], again["total"]) == (4, 0, 4)

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    for i in range(GAMES):
        (fresh / f"game-{i:06d}.dup").write_text("placeholder\n")
    report = gnugo_games.generate(fresh, 1, level=LEVEL, seed=0)
    assert report["written"] == 1 and sorted(p.name for p in fresh.glob("*.sgf")) == ["game-000003.sgf"]
    assert (fresh / "game-000003.sgf").read_bytes() == after["game-000003.sgf"]


def test_duplicate_games_are_not_written(first_run, tmp_path):
    """A copy of game 0 placed as game 50: the run's game 0 repeats it, so it is marked (.dup naming game 50) and not
    written, and game 1 is played instead to reach 2 distinct games; a rerun plays neither again."""
    out, _, files = first_run
    shutil.copy(out / "game-000000.sgf", tmp_path / "game-000050.sgf")
    report = gnugo_games.generate(tmp_path, 2, level=LEVEL, seed=0)
    assert (report["existing"], report["written"], report["duplicates"], report["total"]) == (1, 1, 1, 2)
    assert not (tmp_path / "game-000000.sgf").exists()
    assert (tmp_path / "game-000000.dup").read_text() == "game-000050.sgf\n"
    assert (tmp_path / "game-000001.sgf").read_bytes() == files["game-000001.sgf"]
    index, done = gnugo_games.scan(tmp_path, N)
    assert done == {0, 1, 50} and sorted(index.values()) == [1, 50]
    again = gnugo_games.generate(tmp_path, 2, level=LEVEL, seed=0)
    assert (again["written"], again["duplicates"]) == (0, 0)


def test_engine_timeout_names_the_game_and_keeps_finished_files(first_run, tmp_path):
    """GNU Go cannot answer genmove in 0.1 ms: one GnuGoGamesError naming the game (index 0 of an empty directory);
    with a finished game present, it names the next index and leaves that file alone."""
    out, _, files = first_run
    with pytest.raises(gnugo_games.GnuGoGamesError, match=r"^game 0 \(file game-000000\.sgf in .*did not answer"):
        gnugo_games.generate(tmp_path, 1, level=LEVEL, seed=0, move_timeout=1e-4)
    assert list(tmp_path.iterdir()) == []
    shutil.copy(out / "game-000000.sgf", tmp_path / "game-000000.sgf")
    with pytest.raises(gnugo_games.GnuGoGamesError, match=r"^game 1 "):
        gnugo_games.generate(tmp_path, 2, level=LEVEL, seed=0, move_timeout=1e-4)
    assert [p.name for p in tmp_path.iterdir()] == ["game-000000.sgf"]
    assert (tmp_path / "game-000000.sgf").read_bytes() == files["game-000000.sgf"]


def test_bad_arguments_and_default_dir(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="size"):
        gnugo_games.generate(tmp_path, 1, size=13)
    with pytest.raises(ValueError, match="random_opening_plies"):
        gnugo_games.generate(tmp_path, 1, random_opening_plies=(5, 2))
    monkeypatch.setenv("AZ_JAX_DATA", str(tmp_path))
    assert gnugo_games.default_dir(9) == tmp_path / "gnugo9"
    monkeypatch.delenv("AZ_JAX_DATA")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert gnugo_games.default_dir(19) == tmp_path / ".cache" / "az_jax" / "gnugo19"


def test_two_workers_write_the_same_games_as_one(first_run, tmp_path):
    """Two GNU Go processes in parallel share out the indices; every game depends on its index alone, so the files
    are those of the one-worker run, byte for byte."""
    _, _, files = first_run
    report = gnugo_games.generate(tmp_path, GAMES, level=LEVEL, seed=0, workers=2)
    assert (report["written"], report["duplicates"]) == (GAMES, 0)
    assert {p.name: p.read_bytes() for p in sorted(tmp_path.glob("game-*.sgf"))} == files
