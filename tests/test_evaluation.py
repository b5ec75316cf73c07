"""Strength measurement: the rollout-MCTS baseline is a real player, openings pair up, player specs parse, matches
against GNU Go and Stockfish complete through the match layer, engine failures stop a match as errors, and
`az-jax eval` / `az-jax ladder` work end to end on a tiny run.

Tests whose programs (pgx's Go and chess rules, a rollout search) compile for far longer than they run take conftest's
`fast_compiles`: which moves are played and how games end do not depend on how XLA optimised the machine code. The
rollout-vs-random match is the exception: its ~20 searches of 50 simulations each play tens of thousands of batched
rollout plies, which run several times slower unoptimised."""

import json
import os
import sys

import jax
import numpy as np
import pgx
import pytest
from test_cli import az_here, error_line, tiny_trained_run  # noqa: F401 (a fixture)

from az_jax.core import arena
from az_jax.engines import EngineError
from az_jax.evaluation import elo, match, players, rollout_mcts


# --- the classic rollout MCTS baseline --------------------------------------------------------------------------------
def test_rollout_mcts_beats_random_at_connect_four_by_a_wide_margin():
    # Measured while writing this test: 50 simulations score 0.98 over 100 games against uniform random (200: 1.00).
    # Random play against random play scores 0.5 ± 0.1 over 40 games, so ≥ 0.85 can only come from a real player.
    env = pgx.make("connect_four")
    player = rollout_mcts.rollout_mcts_player(env, num_simulations=50, max_length=42)
    results = jax.jit(lambda k: arena.play_match(env, player, arena.uniform_random_player, k, 40, 42, opening_plies=2))(
        jax.random.key(3)
    )
    assert arena.score(results) >= 0.85


def test_rollout_mcts_takes_a_win_in_one(fast_compiles):
    # XLA's optimisation passes off (conftest.py): this one search compiles for tens of seconds and runs for tens of
    # milliseconds; which move it picks does not depend on how the machine code is optimised.
    # Connect four, columns 0..6. X (first mover) has three in column 0 (plies X0 O1 X0 O1 X0 O2); X to move wins with
    # column 0. With 200 simulations every root child is expanded and the winning one backs up +1 on each visit
    # (reward 1 at a terminal node), so it must be the most visited.
    env = pgx.make("connect_four")
    state = env.init(jax.random.key(0))
    for a in [0, 1, 0, 1, 0, 2]:
        state = env.step(state, a)
    batched = jax.tree.map(lambda x: x[None], state)
    player = rollout_mcts.rollout_mcts_player(env, num_simulations=200, max_length=42)
    assert int(jax.jit(player)(batched, jax.random.key(1))[0]) == 0


def test_random_rollout_values_a_finished_position_as_zero_and_a_forced_one_correctly(fast_compiles):
    env = pgx.make("tic_tac_toe")
    # X: 0, 1 ; O: 3, 4 ; X to move (ply 4). Any random continuation from here is a real game; its value from X's
    # view must lie in {−1, 0, +1}, and after X plays 2 (top row complete) the game is over: the rollout adds nothing.
    s = env.init(jax.random.key(0))
    for a in [0, 3, 1, 4]:
        s = env.step(s, a)
    done = env.step(s, 2)
    batch = jax.tree.map(lambda *x: np.stack(x), s, done)
    values = rollout_mcts.random_rollout(env, jax.tree.map(jax.numpy.asarray, batch), jax.random.key(0), 9)
    assert float(values[0]) in (-1.0, 0.0, 1.0)
    assert float(values[1]) == 0.0


# --- arena openings ---------------------------------------------------------------------------------------------------
def test_openings_are_shared_by_pairs_with_colours_swapped_and_differ_between_pairs(fast_compiles):
    env = pgx.make("connect_four")
    first = lambda s, k: jax.numpy.argmax(s.legal_action_mask, axis=-1)  # deterministic: leftmost legal column
    games = jax.jit(lambda k: arena.play_games(env, first, first, k, 16, 42, opening_plies=4))(jax.random.key(0))
    actions = np.asarray(games.actions)
    a_first = np.asarray(games.a_first)
    assert list(a_first[:4]) == [True, False, True, False]
    for k in range(8):
        # the pair plays one opening; after it, both sides play "leftmost", so the whole games are equal too
        assert (actions[2 * k, :4] == actions[2 * k + 1, :4]).all()
    openings = {tuple(actions[2 * k, :4]) for k in range(8)}
    # 8 pairs drawing 4 random columns each: 7^4 = 2401 openings, so a repeat has probability < 28/2401 ≈ 1.2%
    assert len(openings) >= 7
    # without openings every game between two deterministic players is the same game
    same = jax.jit(lambda k: arena.play_games(env, first, first, k, 4, 42))(jax.random.key(0))
    assert len({tuple(np.asarray(same.actions[i])) for i in range(4)}) == 1


def test_game_lengths_and_results_are_consistent(fast_compiles):
    env = pgx.make("tic_tac_toe")
    games = jax.jit(
        lambda k: arena.play_games(env, arena.uniform_random_player, arena.uniform_random_player, k, 32, 9)
    )(jax.random.key(5))
    lengths = np.asarray(games.lengths)
    assert ((lengths >= 5) & (lengths <= 9)).all()  # tic-tac-toe: a win needs ≥ 5 plies, at most 9
    decisive = np.asarray(games.results) != 0
    # a game that ends before the board is full must be decisive
    assert decisive[lengths < 9].all()


# --- player specs -----------------------------------------------------------------------------------------------------
def test_player_specs_parse_and_bad_ones_are_errors():
    assert players.make_player("random", "connect_four").name == "random"
    p = players.make_player("mcts:sims=123,c=0.7", "connect_four")
    assert (p.name, p.simulations) == ("mcts123_c0.7", 123)
    assert (
        players.make_player("mcts:sims=123", "connect_four").apply
        is players.make_player("mcts:sims=123", "connect_four").apply
    )  # one compiled function per setting
    for spec, needle in [
        ("alphabeta", "unknown player"),
        ("mcts:sims=0", "sims must be >= 1"),
        ("mcts:sims=ten", "sims must be a int"),
        ("mcts:sims=5,depth=3", "unknown option(s) depth"),
        ("run:", "give a run directory"),
        ("run:/nonexistent@x", "the step after @"),
    ]:
        with pytest.raises(players.PlayerSpecError, match=needle.replace("(", r"\(").replace(")", r"\)")):
            players.make_player(spec, "connect_four")
    with pytest.raises(players.PlayerSpecError, match="not a Go game"):
        players.make_player("gnugo", "chess")
    with pytest.raises(players.PlayerSpecError, match="not chess"):
        players.make_player("uci:stockfish", "go_9x9")
    uci = players.make_player("uci:stockfish:elo=1400,nodes=500", "chess")
    assert uci.name == "stockfish_elo1400_nodes500"


# --- engines through the match layer ----------------------------------------------------------------------------------
def test_go_9x9_random_vs_gnugo_complete_scored_games(fast_compiles):
    gnugo = players.make_player("gnugo:level=0", "go_9x9")
    rand = players.make_player("random", "go_9x9")
    games = match.play_host_match("go_9x9", rand, gnugo, jax.random.key(0), 2, opening_plies=2)
    env = pgx.make("go_9x9")
    step = jax.jit(env.step)
    for g in games:
        # replaying the moves through pgx is legal throughout, and ends where the match says it ended
        s = env.init(jax.random.key(0))
        for a in g.actions:
            assert bool(s.legal_action_mask[a])
            s = step(s, a)
        info = dict(g.info)
        if not g.resigned:
            assert bool(s.terminated)
            # the result is the sign of pgx's Tromp-Taylor margin from A's colour (A = black when it moved first)
            black_margin = info["pgx_margin_black"]
            a_black = g.a_first
            assert g.result == np.sign(black_margin if a_black else -black_margin)
            assert "engine_final_score" in info
    # GNU Go at level 0 still beats uniform random at 9×9 every time
    assert all(g.result < 0 for g in games)


def test_chess_random_vs_stockfish_complete_legal_game(fast_compiles):
    sf = players.make_player("uci:stockfish:skill=0,nodes=200", "chess")
    rand = players.make_player("random", "chess")
    games = match.play_host_match("chess", rand, sf, jax.random.key(1), 1, opening_plies=0)
    g = games[0]
    env = pgx.make("chess")
    step = jax.jit(env.step)
    s = env.init(jax.random.key(0))
    for a in g.actions:
        assert bool(s.legal_action_mask[a])
        s = step(s, a)
    assert bool(s.terminated) and not g.resigned
    # python-chess, kept in step by the engine session, agrees that the game is over with the same result
    outcome = dict(g.info)["python_chess_outcome"]
    first_result = {"1-0": 1.0, "0-1": -1.0, "1/2-1/2": 0.0}[outcome]
    assert g.first_mover_result() == first_result


FAKE_GTP = r"""
import sys
n = 0
for line in sys.stdin:
    cmd = line.split()
    n += 1
    if cmd and cmd[0] == "genmove":
        if n > 8:
            sys.exit(3)            # crash in the middle of a game
        print("= Z99\n", flush=True)  # not a vertex of a 9x9 board -> malformed
        continue
    print("=\n", flush=True)
"""


def test_engine_failures_stop_the_match_and_name_game_and_ply(tmp_path):
    script = tmp_path / "fake_gtp.py"
    script.write_text(FAKE_GTP)
    fake = players.make_player(f"gtp:{sys.executable} {script}", "go_9x9")
    rand = players.make_player("random", "go_9x9")
    with pytest.raises(EngineError, match=r"game 1 ply 1"):
        match.play_host_match("go_9x9", fake, rand, jax.random.key(0), 2)


# --- the CLI on a tiny run --------------------------------------------------------------------------------------------
# `az-jax eval` and `az-jax ladder` run by the CLI's main in this process (test_cli.az_here): the same commands, without
# a subprocess's start-up each, sharing compiled programs (eval's 6 games against random are the program of the
# ladder's checkpoint-vs-random pairings).
@pytest.fixture(scope="module")
def tiny_run(request):
    """The TINY run that test_cli.py's session fixture trains with `az-jax train` (checkpoints 1 and 2)."""
    return request.getfixturevalue("tiny_trained_run")


def test_eval_cli_appends_results_and_writes_games(tiny_run):
    r = az_here("eval", "--run-dir", str(tiny_run), "--opponent", "random", "--games", "6", "--simulations", "4")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "vs random (tic_tac_toe, 6 games)" in r.stdout
    lines = (tiny_run / "eval" / "results.jsonl").read_text().splitlines()
    rec = json.loads(lines[-1])
    assert rec["wins"] + rec["draws"] + rec["losses"] == 6 and rec["opponent"] == "random" and rec["step"] == 2
    s = (rec["wins"] + rec["draws"] / 2) / 6
    assert rec["score"] == pytest.approx(s)
    assert rec["elo"] == pytest.approx(elo.elo_difference(rec["wins"], rec["draws"], rec["losses"])[0])
    games_dir = tiny_run / rec["games_dir"]
    files = sorted(os.listdir(games_dir))
    assert files == [f"game-{i:04d}.json" for i in range(1, 7)]
    g = json.loads((games_dir / files[0]).read_text())
    assert 5 <= len(g["actions"]) <= 9

    # a bad spec: one-line error, exit 2, the results file untouched
    before = (tiny_run / "eval" / "results.jsonl").read_bytes()
    bad = az_here("eval", "--run-dir", str(tiny_run), "--opponent", "mcts:sims=-1", "--games", "6")
    assert bad.returncode == 2 and "sims must be >= 1" in error_line(bad)
    assert (tiny_run / "eval" / "results.jsonl").read_bytes() == before


def test_ladder_cli_rates_checkpoints_with_baselines(tiny_run):
    r = az_here("ladder", str(tiny_run), "--games", "6", "--simulations", "4", "--baselines", "random")
    assert r.returncode == 0, r.stderr[-3000:]
    out = tiny_run / "ladder"
    for name in ["ratings.csv", "ratings.md", "elo_vs_step.png", "elo_vs_time.png", "matches.jsonl"]:
        assert (out / name).exists(), name
    assert (out / "elo_vs_step.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    matches = [json.loads(l) for l in (out / "matches.jsonl").read_text().splitlines()]
    # 2 checkpoints, 1 baseline: step1-step2, step1-random, step2-random = 3 pairings of 6 games
    assert [(m["a"], m["b"]) for m in matches] == [("step1", "step2"), ("step1", "random"), ("step2", "random")]
    assert all(m["wins"] + m["draws"] + m["losses"] == 6 for m in matches)
    fit = elo.fit_elo([(m["a"], m["b"], m["wins"], m["draws"], m["losses"]) for m in matches], anchor="random")
    import csv

    rows = {row["player"]: row for row in csv.DictReader(open(out / "ratings.csv"))}
    assert float(rows["random"]["elo"]) == 0.0
    for name in ["step1", "step2"]:
        assert float(rows[name]["elo"]) == pytest.approx(fit.rating(name))
    # a second run plays nothing new (no match lines on stderr) and gives the same table
    again = az_here("ladder", str(tiny_run), "--games", "6", "--simulations", "4", "--baselines", "random")
    assert again.returncode == 0 and " vs " not in again.stderr
    assert again.stdout == r.stdout
    assert len((out / "matches.jsonl").read_text().splitlines()) == 3
    # an unknown checkpoint step is a one-line error
    bad = az_here("ladder", str(tiny_run), "--steps", "1,7")
    assert bad.returncode == 2 and "no checkpoint(s) [7]" in error_line(bad)


def test_engine_score_agreement_gives_player_a_s_mean_margin():
    # Game 1: A moved first (Black), pgx counts B+10.5, the engine B+9.5 -> agree, A's margin +10.5. Game 2: A is
    # White, pgx counts B+3.5, the engine W+0.5 -> disagree, A's margin -3.5. Game 3: resigned, no count. Mean of A's
    # margins (10.5 - 3.5) / 2 = 3.5.
    games = [
        match.GameResult((), True, 1.0, info=(("engine_margin_black", 9.5), ("pgx_margin_black", 10.5))),
        match.GameResult((), False, -1.0, info=(("engine_margin_black", -0.5), ("pgx_margin_black", 3.5))),
        match.GameResult((), True, -1.0, resigned=True),
    ]
    stats = match.engine_score_agreement(games)
    assert (stats["score_compared"], stats["score_agreed"], stats["resigned"]) == (2, 1, 1)
    assert stats["margin_mean"] == pytest.approx(3.5)


def test_eval_cli_with_a_player_spec_instead_of_a_run(tmp_path):
    # GNU Go (an engine, so the game runs on the host) against uniform random, one game on 9×9: GNU Go wins, and the
    # end is scored by GNU Go's final_score and by pgx's Tromp-Taylor count with the same winner.
    out = tmp_path / "evals"
    r = az_here(
        "eval",
        "--player",
        "gnugo:level=0",
        "--game",
        "go_9x9",
        "--opponent",
        "random",
        "--games",
        "1",
        "--out-dir",
        str(out),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rec = json.loads((out / "results.jsonl").read_text().splitlines()[-1])
    assert (rec["player"], rec["opponent"], rec["wins"], rec["games"]) == ("gnugo0", "random", 1, 1)
    assert rec["score_compared"] == 1 and rec["score_agreed"] == 1
    assert rec["margin_mean"] > 0  # gnugo0 is player A and won by pgx's count
    (match_dir,) = os.listdir(out / "games")
    assert os.listdir(out / "games" / match_dir) == ["game-0001.sgf"]
    bad = az_here("eval", "--player", "random", "--game", "go_8x8", "--opponent", "random")
    assert bad.returncode == 2 and "go_8x8" in error_line(bad)
