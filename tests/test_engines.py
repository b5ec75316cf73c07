"""External engines: GTP (GNU Go) and UCI (Stockfish) clients, and pgx <-> engine notation.

The main cases use the real engines (Debian packages `gnugo` and `stockfish`, listed in
.ci/apt-packages.txt); failure modes that a real engine cannot be made to produce on demand
(hanging, garbage replies) use tiny fake engines written in Python. Every test that starts a
process checks that it was killed and reaped afterwards.
"""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import chess
import jax
import numpy as np
import pgx
import pytest

from az_jax.engines import EngineCrashed, EngineProtocolError, EngineTimeout, gtp, uci
from envs.notation import chess_moves as cm
from envs.notation import go as gn

GNUGO = gtp.find_executable("gnugo")
STOCKFISH = gtp.find_executable("stockfish")
needs_gnugo = pytest.mark.skipif(GNUGO is None, reason="gnugo not installed (apt-get install gnugo)")
needs_stockfish = pytest.mark.skipif(STOCKFISH is None, reason="stockfish not installed (apt-get install stockfish)")
GNUGO_CMD = [GNUGO, "--mode", "gtp", "--level", "0", "--chinese-rules", "--seed", "1"]  # seeded: reproducible
N = 9  # go_9x9


def _gone(pid: int) -> bool:
    """The process no longer runs: reaped, or a zombie awaiting its (new) parent's reaping."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:  # no procfs: fall back to signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.02)
    return _gone(pid)


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
    assert _wait_gone(pid)


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
    assert _gone(pid) and engine.returncode == -9


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
    assert _gone(pid), "the hung engine must be killed at once"
    assert _wait_gone(child_pid), "the engine's child must be killed with it"
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
        assert _gone(pid)  # killed: the stream can no longer be trusted

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
            assert _gone(engine.pid)


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
    assert _gone(engine.pid)


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
    assert _wait_gone(pid)
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
    assert _wait_gone(pid)

    # Killed in the middle of a search.
    engine = uci.UCIEngine([STOCKFISH])
    pid = engine.pid
    threading.Timer(0.3, os.kill, args=(pid, signal.SIGKILL)).start()
    with pytest.raises(uci.EngineCrashed, match="terminated"):
        engine.play(chess.Board(), time=5.0)
    engine.close()
    assert _wait_gone(pid)


@needs_stockfish
def test_stopped_stockfish_times_out_and_is_killed():
    engine = uci.UCIEngine([STOCKFISH])
    pid = engine.pid
    os.kill(pid, signal.SIGSTOP)  # a hung engine
    start = time.monotonic()
    with pytest.raises(uci.EngineTimeout):
        engine.play(chess.Board(), nodes=1000, timeout=1.0)
    assert time.monotonic() - start < 3.0
    assert _wait_gone(pid)
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


# --------------------------------------------------------------------------------------------------
# Engine faults: fake engines (tests/fake_engines/fault_engine.py) that exit, hang, answer garbage or
# spawn children. Each fault must end in an EngineError subclass with a one-line message, within the
# configured time-out, with no process of the engine's group left in the process table; and the group
# must be ended on every exit path (close, an exception, Ctrl-C, garbage collection, interpreter exit).

FAULT_ENGINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_engines", "fault_engine.py")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHORT = 1.0  # the time-outs of the cases that must time out, in seconds
LONG = 20.0  # the time-outs of the cases that must fail (or finish) well before any time-out
SLACK = 2.0  # allowance on top of a time-out for a loaded 2-core machine


def _group_left(pgid: int) -> list[int]:
    """Running (non-zombie) processes of process group `pgid`, read from /proc (written independently of
    az_jax/engines/process.py, which it checks)."""
    left = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                left.append(int(name))
    return left


def _fault_cmd(protocol: str, behaviour: str, pidfile) -> list[str]:
    return [sys.executable, "-u", FAULT_ENGINE, protocol, behaviour, str(pidfile)]


def _pids(pidfile) -> tuple[int, int]:
    """(engine pid = its process group, child pid or 0), as the fake engine wrote them at its start."""
    engine_pid, child_pid = (int(x) for x in pidfile.read_text().split())
    return engine_pid, child_pid


def _open(protocol: str, behaviour: str, pidfile, limit: float):
    cmd = _fault_cmd(protocol, behaviour, pidfile)
    if protocol == "gtp":  # the first command (`name`) gets start_timeout + timeout = limit
        return gtp.GTPEngine(cmd, timeout=limit / 2, start_timeout=limit / 2, move_timeout=limit)
    return uci.UCIEngine(cmd, timeout=limit, start_timeout=limit, move_timeout=limit)


def _ask_for_a_move(engine) -> object:
    if isinstance(engine, gtp.GTPEngine):
        assert engine.name() == "fake"
        engine.boardsize(N)
        return engine.genmove("black")
    return engine.play(chess.Board(), nodes=1)


def _assert_all_gone(pidfile) -> None:
    engine_pid, child_pid = _pids(pidfile)
    assert _group_left(engine_pid) == [], f"processes of the engine's group left: {_group_left(engine_pid)}"
    assert _gone(engine_pid)
    assert child_pid == 0 or _gone(child_pid), "the engine's child must end with it"


# (protocol, behaviour, error, message pattern, time-out). GTP engines start without a handshake, so their
# faults show at the first command; UCI engines fail in the constructor's `uci` handshake.
ENGINE_FAULTS = [
    ("gtp", "exit", EngineCrashed, r"exit code 3; stderr: fatal: out of cheese", LONG),
    ("gtp", "hang", EngineTimeout, r"did not answer 'name' within 1 s; killed", SHORT),
    ("gtp", "garbage", EngineProtocolError, r"does not start with '=' or '\?': 'hello, I am not", LONG),
    ("gtp", "badmove", EngineProtocolError, r"not a vertex, pass or resign: 'Z99'", LONG),
    ("gtp", "child-hang", EngineTimeout, r"did not answer 'genmove black' within 1 s", SHORT),
    ("gtp", "child-exit", EngineCrashed, r"exit code 4; stderr: fatal: out of cheese", LONG),
    ("uci", "exit", EngineCrashed, r"terminated with exit code 3 during start-up.*; stderr: fatal: out of", LONG),
    ("uci", "hang", EngineTimeout, r"did not finish start-up .* within 1 s; killed; it wrote nothing", SHORT),
    ("uci", "garbage", EngineTimeout, r"within 1 s; killed; its last output: 'hello, I am not an engine'", SHORT),
    ("uci", "badmove", EngineProtocolError, r"sent an invalid reply during play: .*z9z9", LONG),
    ("uci", "child-hang", EngineTimeout, r"did not finish play within 1 s; killed", SHORT),
    ("uci", "child-exit", EngineCrashed, r"terminated with exit code 4 during start-up", LONG),
]


@pytest.mark.parametrize(("protocol", "behaviour", "error", "pattern", "limit"), ENGINE_FAULTS)
def test_engine_fault_gives_one_line_error_in_time_and_leaves_no_process(
    protocol, behaviour, error, pattern, limit, tmp_path, caplog
):
    pidfile = tmp_path / "pids"
    start = time.monotonic()
    with pytest.raises(error, match=pattern) as info:
        with _open(protocol, behaviour, pidfile, limit) as engine:
            _ask_for_a_move(engine)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert "\n" not in message and message.strip() == message, message
    if limit == SHORT:  # the time-out itself, and not much more
        assert SHORT * 0.9 <= elapsed < SHORT + SLACK, elapsed
    else:  # noticed at once, not at the (long) time-out
        assert elapsed < 3.0, elapsed
    _assert_all_gone(pidfile)
    gc.collect()  # would flush asyncio's "Task was destroyed" / "exception was never retrieved" complaints
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


@pytest.mark.parametrize("protocol", ["gtp", "uci"])
def test_engine_with_a_child_works_and_close_ends_its_group(protocol, tmp_path):
    pidfile = tmp_path / "pids"
    with _open(protocol, "child-work", pidfile, LONG) as engine:
        move = _ask_for_a_move(engine)
        assert move in ("pass", chess.Move.from_uci("e2e4"))
        engine_pid, child_pid = _pids(pidfile)
        assert child_pid != 0 and _group_left(engine_pid) == sorted([engine_pid, child_pid])  # the child is in it
    _assert_all_gone(pidfile)


@pytest.fixture
def sigint_raises():
    """Ctrl-C raises KeyboardInterrupt here, whatever the test runner did with SIGINT."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("protocol", ["gtp", "uci"])
def test_engine_group_ends_on_exception_ctrl_c_and_garbage_collection(protocol, tmp_path, sigint_raises):
    import _thread  # only this test simulates Ctrl-C

    # An exception in the `with` block.
    pidfile = tmp_path / "raise"
    with pytest.raises(RuntimeError, match="boom"):
        with _open(protocol, "child-work", pidfile, LONG) as engine:
            _ask_for_a_move(engine)
            raise RuntimeError("boom")
    _assert_all_gone(pidfile)

    # Ctrl-C while the engine thinks (it hangs), without close(): the interrupted command ends the group.
    pidfile = tmp_path / "interrupt"
    engine = _open(protocol, "child-hang", pidfile, LONG)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        _ask_for_a_move(engine)
    timer.join()
    assert time.monotonic() - start < 3.0
    _assert_all_gone(pidfile)
    assert not engine.is_alive()
    engine.close()  # still fine afterwards

    # Dropped without close(): the finalizer ends the group.
    pidfile = tmp_path / "dropped"
    engine = _open(protocol, "child-work", pidfile, LONG)
    _ask_for_a_move(engine)
    engine_pid, _ = _pids(pidfile)
    assert _group_left(engine_pid) != []
    del engine
    gc.collect()
    _assert_all_gone(pidfile)


@pytest.mark.parametrize(
    ("protocol", "session", "move"),
    [
        ("gtp", "engine = gtp.GTPEngine(sys.argv[1:]); print(engine.genmove('black'))", "pass"),
        ("uci", "engine = uci.UCIEngine(sys.argv[1:]); print(engine.play(chess.Board(), nodes=1))", "e2e4"),
    ],
)
def test_engine_group_ends_at_interpreter_exit(protocol, session, move, tmp_path):
    # `engine` stays referenced (a module global) until the interpreter exits, without close().
    pidfile = tmp_path / "pids"
    script = f"import sys, chess; from az_jax.engines import {protocol}; {session}"
    cmd = [sys.executable, "-c", script, *_fault_cmd(protocol, "child-work", pidfile)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == move, done.stderr
    assert "Warning" not in done.stderr and "asyncio" not in done.stderr, done.stderr  # nothing on the way out
    _assert_all_gone(pidfile)


def test_engine_time_outs_must_be_positive_and_finite():
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="timeout"):
            gtp.GTPEngine(["true"], timeout=bad)
        with pytest.raises(ValueError, match="move_timeout"):
            uci.UCIEngine(["true"], move_timeout=bad)
