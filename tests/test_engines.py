"""External engines: GTP (GNU Go) and UCI (Stockfish) clients, and pgx <-> engine notation.

The main cases use the real engines (Debian packages `gnugo` and `stockfish`, listed in
.ci/apt-packages.txt); failure modes that a real engine cannot be made to produce on demand
(hanging, garbage replies) use tiny fake engines written in Python. Every test that starts a
process checks that it was killed and reaped afterwards.
"""

import os
import signal
import sys
import textwrap
import threading
import time

import chess
import jax
import numpy as np
import pgx
import pytest

from az_jax.engines import gtp, uci
from envs.notation import chess_moves as cm
from envs.notation import go as gn

from conftest import process_gone, wait_process_gone

GNUGO = gtp.find_executable("gnugo")
STOCKFISH = gtp.find_executable("stockfish")
needs_gnugo = pytest.mark.skipif(GNUGO is None, reason="gnugo not installed (apt-get install gnugo)")
needs_stockfish = pytest.mark.skipif(STOCKFISH is None, reason="stockfish not installed (apt-get install stockfish)")
GNUGO_CMD = [GNUGO, "--mode", "gtp", "--level", "0", "--chinese-rules", "--seed", "1"]  # seeded: reproducible
N = 9  # go_9x9


def _fake_engine(body: str) -> list[str]:
    """Command line of a fake GTP engine: a Python loop over stdin lines running `body` per line."""
    script = "import sys, time, subprocess\n" + textwrap.dedent(body)
    return [sys.executable, "-u", "-c", script]


# --------------------------------------------------------------------------------------------------
# pgx environments, jitted once per module.


@pytest.fixture(scope="module")
def go_env():
    env = pgx.make("go_9x9")
    return env, jax.jit(env.init), jax.jit(env.step)


@pytest.fixture(scope="module")
def chess_env():
    env = pgx.make("chess")
    return env, jax.jit(env.init), jax.jit(env.step)


# --------------------------------------------------------------------------------------------------
# Go notation (pure).


def test_go_vertex_mapping_hand_cases():
    # pgx row 0 is the top row; GTP row 1 is the bottom row; column letters skip I.
    assert gn.action_to_vertex(0, 9) == "A9"  # top-left
    assert gn.action_to_vertex(8, 9) == "J9"  # top-right (no I)
    assert gn.action_to_vertex(72, 9) == "A1"  # bottom-left = 8 * 9
    assert gn.action_to_vertex(80, 9) == "J1"  # bottom-right
    assert gn.action_to_vertex(4 * 9 + 4, 9) == "E5"  # tengen
    assert gn.action_to_vertex(81, 9) == "pass"
    assert gn.action_to_vertex(18, 19) == "T19"
    assert gn.vertex_to_action("d4", 19) == (19 - 4) * 19 + 3
    vertices = [gn.action_to_vertex(a, 9) for a in range(82)]
    assert len(set(vertices)) == 82 and not any(v.startswith("I") for v in vertices)
    assert [gn.vertex_to_action(v, 9) for v in vertices] == list(range(82))
    for bad in ("I5", "K5", "A10", "A0", "resign", "", "E5 x"):
        with pytest.raises(ValueError):
            gn.vertex_to_action(bad, 9)
    assert gn.parse_score("B+3.5") == 3.5 and gn.parse_score("W+7.5") == -7.5 and gn.parse_score("0") == 0.0


# --------------------------------------------------------------------------------------------------
# GTP against GNU Go.


@needs_gnugo
def test_gnugo_replays_random_pgx_game_move_by_move(go_env):
    """Random legal pgx play sent to GNU Go: legal moves and stones (after captures) agree every move."""
    _, init, step = go_env
    rng = np.random.default_rng(7)
    state = init(jax.random.PRNGKey(0))
    captured_stones = 0
    with gtp.GTPEngine(GNUGO_CMD, timeout=10.0) as engine:
        pid = engine.pid
        assert "GNU Go" in engine.name()
        engine.boardsize(N)
        engine.komi(7.5)
        engine.clear_board()
        for ply in range(160):
            color = "black" if int(state._x.color) == 0 else "white"
            mask = np.asarray(state.legal_action_mask)
            legal = set(np.flatnonzero(mask[:-1]).tolist())  # board moves (pass is always legal)
            # Same legal moves (suicide illegal, simple ko) in pgx and GNU Go.
            gnugo_legal = {gn.vertex_to_action(v, N) for v in engine.send(f"all_legal {color}").split()}
            assert gnugo_legal == legal, (ply, sorted(gnugo_legal ^ legal))
            action = int(rng.choice(sorted(legal))) if legal else N * N
            before = int((np.asarray(state._x.board) != 0).sum())
            engine.play(color, gn.action_to_vertex(action, N))
            state = step(state, action)
            board = np.asarray(state._x.board)
            captured_stones += before + (action < N * N) - int((board != 0).sum())
            black, white = gn.board_to_vertices(board, N)
            assert engine.list_stones("black") == black, ply
            assert engine.list_stones("white") == white, ply
            if bool(state.terminated):
                break
    assert captured_stones > 20, "the random game should exercise captures"
    assert wait_process_gone(pid)


@needs_gnugo
def test_board_orientation_matches_via_sgf(tmp_path):
    """Orientation pin: pgx's SGF reader and GNU Go's `loadsgf` put the same stones on the same vertices."""
    from pgx.experimental.go import from_sgf

    # Asymmetric stones, including a capture of the white stone at B9 ([ba]).
    sgf = "(;GM[1]FF[4]SZ[9];B[aa];W[ba];B[cb];W[ge];B[ca];W[hh];B[bb])"
    state = from_sgf(sgf)
    black, white = gn.board_to_vertices(np.asarray(state._x.board), N)
    assert black == {"A9", "C8", "C9", "B8"} and white == {"G5", "H2"}  # B9 was captured
    path = tmp_path / "game.sgf"
    path.write_text(sgf)
    with gtp.GTPEngine(GNUGO_CMD, timeout=10.0) as engine:
        engine.send(f"loadsgf {path}")
        assert engine.list_stones("black") == black
        assert engine.list_stones("white") == white


@needs_gnugo
def test_full_game_random_vs_gnugo(go_env):
    """pgx random player (black) against GNU Go level 0 (white), Chinese rules, komi 7.5."""
    from pgx._src.games.go import _count_scores

    _, init, step = go_env
    rng = np.random.default_rng(11)
    state = init(jax.random.PRNGKey(1))
    last_gnugo_move = None
    gnugo_resigned = False
    plies = 0
    with gtp.GTPEngine(GNUGO_CMD, timeout=20.0) as engine:
        engine.boardsize(N)
        engine.komi(7.5)
        engine.clear_board()
        while not bool(state.terminated):
            mask = np.asarray(state.legal_action_mask)
            if int(state._x.color) == 0:  # random black: board moves; passes back after a GNU Go pass
                board_moves = np.flatnonzero(mask[:-1])
                if last_gnugo_move == "pass" or board_moves.size == 0:
                    action = N * N
                else:
                    action = int(rng.choice(board_moves))
                engine.play("black", gn.action_to_vertex(action, N))
            else:
                move = engine.genmove("white")
                last_gnugo_move = move
                if move == "resign":
                    gnugo_resigned = True
                    break
                action = gn.vertex_to_action(move, N)
                assert mask[action], f"GNU Go played {move}, illegal in pgx"
            state = step(state, action)
            plies += 1
        gnugo_score = engine.final_score()
    gnugo_margin = gn.parse_score(gnugo_score)  # black's margin under GNU Go's (Chinese) scoring
    black_area, white_area = (int(x) for x in _count_scores(state._x, N))  # pgx: Tromp-Taylor area
    pgx_margin = black_area - white_area - 7.5
    assert plies > 0 and (bool(state.terminated) or gnugo_resigned)
    if bool(state.terminated):
        black_reward = float(state.rewards[int(state._player_order[0])])
        assert black_reward in (-1.0, 1.0)
        if not bool(state._x.is_psk):
            assert (black_reward > 0) == (pgx_margin > 0)
    agree = (pgx_margin > 0) == (gnugo_margin > 0)
    print(
        f"\n[go_9x9 random(B) vs gnugo(W)] plies={plies} pgx Tromp-Taylor B-W-komi={pgx_margin:+.1f} "
        f"gnugo final_score={gnugo_score} winners agree={agree} "
        f"(passes end={int(state._x.consecutive_pass_count) >= 2}, psk={bool(state._x.is_psk)})"
    )


@needs_gnugo
def test_killed_gnugo_raises_engine_crashed_and_is_reaped():
    engine = gtp.GTPEngine(GNUGO_CMD, timeout=10.0)
    pid = engine.pid
    engine.boardsize(N)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(gtp.EngineCrashed, match="exit code -9"):
        engine.genmove("black")
    with pytest.raises(gtp.EngineCrashed):  # stays dead
        engine.name()
    engine.close()
    assert process_gone(pid) and engine.returncode == -9


def test_hung_engine_times_out_and_is_killed_with_its_children():
    # Answers `protocol_version` (with its child's pid) and `name`, then hangs on anything else. It
    # spawns a child (a `sleep`) that must die with it: the engine runs in its own process group,
    # which the client's kill takes down as a whole.
    cmd = _fake_engine(
        """
        child = subprocess.Popen(["sleep", "600"])
        for line in sys.stdin:
            if line.startswith("protocol_version"):
                print(f"= {child.pid}\\n", flush=True)  # test hook: report the child's pid
            elif line.startswith("name"):
                print("= fake\\n", flush=True)
            else:
                time.sleep(600)
        """
    )
    engine = gtp.GTPEngine(cmd, timeout=5.0)
    pid = engine.pid
    child_pid = int(engine.send("protocol_version"))
    assert engine.name() == "fake"
    start = time.monotonic()
    with pytest.raises(gtp.EngineTimeout):
        engine.genmove("black", timeout=1.0)
    elapsed = time.monotonic() - start
    assert 0.9 < elapsed < 3.0, elapsed
    assert process_gone(pid), "the hung engine must be killed at once"
    assert wait_process_gone(child_pid), "the engine's child must be killed with it"
    with pytest.raises(gtp.EngineCrashed):
        engine.name()
    engine.close()


def test_malformed_replies_raise_protocol_errors():
    garbage = _fake_engine(
        """
        for line in sys.stdin:
            print("hello, I am not a GTP engine\\n", flush=True)
        """
    )
    with gtp.GTPEngine(garbage, timeout=5.0) as engine:
        pid = engine.pid
        with pytest.raises(gtp.EngineProtocolError, match="does not start with"):
            engine.name()
        assert process_gone(pid)  # killed: the stream can no longer be trusted

    # A well-formed reply that is not a move ('I5' has the forbidden letter I; Z99 is off the board).
    for bad_move in ("I5", "Z99", "E5E5", "banana"):
        bad = _fake_engine(
            f"""
            for line in sys.stdin:
                cmd = line.split()[0]
                if cmd == "genmove":
                    print("= {bad_move}\\n", flush=True)
                elif cmd in ("boardsize", "clear_board", "quit"):
                    print("=\\n", flush=True)
                else:
                    print("? unknown command\\n", flush=True)
            """
        )
        with gtp.GTPEngine(bad, timeout=5.0) as engine:
            engine.boardsize(N)
            with pytest.raises(gtp.GTPError, match="unknown command"):  # a failure reply is not fatal
                engine.send("frobnicate")
            engine.clear_board()  # still usable after '?'
            with pytest.raises(gtp.EngineProtocolError, match="not a vertex"):
                engine.genmove("b")
            assert process_gone(engine.pid)


def test_engine_exiting_midway_raises_engine_crashed():
    cmd = _fake_engine(
        """
        sys.stdin.readline()
        sys.stderr.write("fatal: out of cheese\\n")
        sys.exit(3)
        """
    )
    engine = gtp.GTPEngine(cmd, timeout=5.0)
    with pytest.raises(gtp.EngineCrashed, match="exit code 3") as info:
        engine.name()
    assert "out of cheese" in str(info.value)
    engine.close()
    assert process_gone(engine.pid)


def test_missing_engine_binary_raises():
    with pytest.raises(gtp.EngineCrashed, match="cannot start"):
        gtp.GTPEngine(["/nonexistent/engine-binary"])


# --------------------------------------------------------------------------------------------------
# UCI: pgx chess <-> python-chess, and Stockfish.

# An opening that makes castling and en passant available to both colours (checked below), then
# random play from there.
_SCRIPTED_OPENING = (
    "e2e4 d7d5 e4e5 f7f5 "  # white may capture en passant e5f6
    "g1f3 g8h6 f1e2 e7e6 e1g1 "  # white castles king side
    "f8e7 d2d3 e8g8 "  # black castles king side
    "a2a3 d5d4 c2c4"  # black may capture en passant d4c3
).split()


def test_action_tables_match_pgx():
    from pgx._src.games import chess as pgx_chess

    np.testing.assert_array_equal(np.asarray(pgx_chess.FROM_PLANE), cm.FROM_PLANE)
    np.testing.assert_array_equal(np.asarray(pgx_chess.TO_PLANE), cm.TO_PLANE)
    # Hand cases from the start position (white to move), pgx square = file * 8 + rank:
    # e2e4: from e2 = 4*8+1 = 33, plane "up, distance 2" = 9 + 7 (the 7 "down" planes) + 1 = 17
    #       -> 33*73 + 17 = 2426.
    # g1f3: from g1 = 6*8+0 = 48, knight jump (rank +2, file -1) = 4th knight plane = 9 + 56 + 3 = 68
    #       -> 48*73 + 68 = 3572. Both are in pgx's INIT_LEGAL_ACTION_MASK.
    board = chess.Board()
    assert cm.uci_to_action("e2e4", board) == 2426
    assert cm.uci_to_action("g1f3", board) == 3572
    assert cm.legal_action_set(board) == set(np.flatnonzero(np.asarray(pgx_chess.INIT_LEGAL_ACTION_MASK)).tolist())
    # Black's e7e5 in pgx's mirrored frame is the same action as white's e2e4.
    board.push_uci("e2e4")
    assert cm.uci_to_action("e7e5", board) == 2426
    assert cm.action_to_uci(2426, board) == "e7e5"


def test_pgx_chess_actions_round_trip_through_uci(chess_env):
    """On random pgx positions: pgx's legal actions == python-chess's legal moves, both ways."""
    _, init, step = chess_env
    rng = np.random.default_rng(3)
    seen: dict[tuple[str, bool], int] = {}
    positions = 0
    for game in range(2):
        state = init(jax.random.PRNGKey(game))
        board = chess.Board()
        script = list(_SCRIPTED_OPENING) if game == 0 else []
        while not bool(state.terminated) and board.ply() < 260:
            # The same position: pgx's FEN writer against the board python-chess tracked.
            pgx_board = cm.pgx_state_to_board(state)
            assert pgx_board.board_fen() == board.board_fen() and pgx_board.turn == board.turn
            assert pgx_board.castling_rights == board.castling_rights, board.fen()
            legal = set(np.flatnonzero(np.asarray(state.legal_action_mask)).tolist())
            assert cm.legal_action_set(board) == legal, board.fen()
            for action in legal:
                move = cm.action_to_move(action, board)
                assert move in board.legal_moves, (board.fen(), action, move)
                assert cm.move_to_action(move, board) == action
                kind = (
                    "castling"
                    if board.is_castling(move)
                    else "en passant"
                    if board.is_en_passant(move)
                    else "queen promotion"
                    if move.promotion == chess.QUEEN
                    else "under-promotion"
                    if move.promotion
                    else None
                )
                if kind:
                    seen[(kind, board.turn)] = seen.get((kind, board.turn), 0) + 1
            positions += 1
            if script:
                move = chess.Move.from_uci(script.pop(0))
                action = cm.move_to_action(move, board)
                assert action in legal
            else:
                action = int(rng.choice(sorted(legal)))
                move = cm.action_to_move(action, board)
            board.push(move)
            state = step(state, action)
    assert positions > 300
    for kind in ("castling", "en passant", "queen promotion", "under-promotion"):
        for color in (chess.WHITE, chess.BLACK):
            assert seen.get((kind, color), 0) > 0, f"{kind} for {'white' if color else 'black'} not exercised: {seen}"


@needs_stockfish
def test_full_game_random_vs_stockfish(chess_env):
    """pgx random player (white) against Stockfish (black, 1,000 nodes per move) to pgx's end of game."""
    _, init, step = chess_env
    rng = np.random.default_rng(5)
    state = init(jax.random.PRNGKey(2))
    board = chess.Board()
    with uci.UCIEngine([STOCKFISH], options={"Threads": 1, "Hash": 16}, timeout=20.0) as engine:
        pid = engine.pid
        assert "Stockfish" in engine.name
        while not bool(state.terminated):
            legal = np.flatnonzero(np.asarray(state.legal_action_mask))
            if board.turn == chess.WHITE:
                action = int(rng.choice(legal))
                move = cm.action_to_move(action, board)
            else:
                move = engine.play(board, nodes=1000)
                action = cm.move_to_action(move, board)
                assert action in legal, f"Stockfish's {move.uci()} is illegal in pgx"
            assert move in board.legal_moves
            board.push(move)
            state = step(state, action)
            assert cm.pgx_state_to_board(state).board_fen() == board.board_fen()
    assert wait_process_gone(pid)
    outcome = board.outcome(claim_draw=True)
    assert outcome is not None or state._x.step_count >= 512, board.fen()
    white_reward = float(state.rewards[int(state._player_order[0])])
    if outcome is not None and outcome.termination == chess.Termination.CHECKMATE:
        assert white_reward == (1.0 if outcome.winner == chess.WHITE else -1.0)
    print(
        f"\n[chess random(W) vs stockfish(B) nodes=1000] plies={board.ply()} "
        f"python-chess outcome={outcome.result() if outcome else '*'} "
        f"({outcome.termination.name if outcome else 'pgx step limit'}) pgx white reward={white_reward:+.0f}"
    )


@needs_stockfish
def test_killed_stockfish_raises_engine_crashed_and_is_reaped():
    engine = uci.UCIEngine([STOCKFISH], options=uci.strength_options(skill_level=0))
    pid = engine.pid
    assert engine.play(chess.Board(), nodes=200) in chess.Board().legal_moves
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(uci.EngineCrashed):
        engine.play(chess.Board(), nodes=200)
    engine.close()
    assert wait_process_gone(pid)

    # Killed in the middle of a search.
    engine = uci.UCIEngine([STOCKFISH])
    pid = engine.pid
    threading.Timer(0.3, os.kill, args=(pid, signal.SIGKILL)).start()
    with pytest.raises(uci.EngineCrashed, match="terminated"):
        engine.play(chess.Board(), time=5.0)
    engine.close()
    assert wait_process_gone(pid)


@needs_stockfish
def test_stopped_stockfish_times_out_and_is_killed():
    engine = uci.UCIEngine([STOCKFISH])
    pid = engine.pid
    os.kill(pid, signal.SIGSTOP)  # a hung engine
    start = time.monotonic()
    with pytest.raises(uci.EngineTimeout):
        engine.play(chess.Board(), nodes=1000, timeout=1.0)
    assert time.monotonic() - start < 3.0
    assert wait_process_gone(pid)
    engine.close()


@needs_stockfish
def test_stockfish_options_are_validated():
    with uci.UCIEngine([STOCKFISH]) as engine:
        engine.configure(uci.strength_options(elo=1400))
        with pytest.raises(uci.EngineError, match="no option"):
            engine.configure({"No Such Option": 1})
        with pytest.raises(uci.EngineError, match="at most 20"):
            engine.configure(uci.strength_options(skill_level=99))
        assert engine.is_alive()  # client-side validation errors do not kill the engine
