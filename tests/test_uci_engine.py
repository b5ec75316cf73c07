"""`az-jax uci` (az_jax/frontends/uci_engine.py, az_jax/apps/cli/uci.py): the UCI protocol in-process with
hand-checked answers, 1,000+ fuzzed lines, and a real controller: python-chess's `chess.engine` (what lichess-bot
uses) drives the `az-jax uci` process through a whole game against Stockfish and reads its `info` lines.

The agent is the tests' tiny network on chess with untrained weights (drawn with NumPy: conftest.tiny_variables);
the engine searches 8 simulations per move in a tree of 64 nodes, so every program is small. pgx chess still takes
tens of CPU seconds to compile: the in-process engine is made once for the module, and the engine process once.
"""

import io
import math
import os
import random
import subprocess
import sys
import time
import types

import chess
import chess.engine
import jax.numpy as jnp
import numpy as np
import pytest

from az_jax.core import networks
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.engines.gtp import find_executable
from az_jax.frontends import uci_engine as ue
from az_jax.frontends import uci_protocol as up
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.agent import Agent
from envs.notation import chess_moves as cm

from conftest import FAST_COMPILES, TINY_NETWORK, tiny_variables

pytestmark = pytest.mark.usefixtures("fast_compiles")

STOCKFISH = find_executable("stockfish")
SIMULATIONS, CAPACITY, CHUNK = 8, 64, 8
CONFIG = override(preset("chess", "small"), TINY_NETWORK)
AFTER_E4_E5 = "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq e6 0 2"  # e6: the square e7e5 passed over
CHESS960 = "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9"  # castling with the f- and h-rooks
MATE_IN_ONE = "7k/5Q2/6K1/8/8/8/8/8 w - - 0 1"  # Qe8, Qf8, Qg7, Qh7 mate (the last two guarded by the king)
FOOLS_MATE = "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3"  # White is checkmated
STALEMATE = "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"  # Black's king has no move and is not in check


@pytest.fixture(scope="module")
def agent() -> Agent:
    network = networks.make_network(CONFIG, cm.NUM_ACTIONS)
    variables = tiny_variables(network, jnp.zeros((1, 8, 8, 119), jnp.float32), seed=1)
    return Agent(config=CONFIG, variables=variables)


class Session:
    """An in-process UciEngine whose output lines are collected; `ask` sends lines and returns what they produced
    (after a `go`, once its bestmove is out)."""

    def __init__(self, agent):
        self.lines: list[str] = []
        self.engine = ue.UciEngine(
            agent, self.lines.append, simulations=SIMULATIONS, capacity=CAPACITY, chunk=CHUNK, info_interval_s=0.0
        )

    def ask(self, *commands: str, wait: bool = True) -> list[str]:
        start = len(self.lines)
        for command in commands:
            assert self.engine.handle(command)
        if wait:
            assert self.engine.wait(timeout=120)
        return self.lines[start:]


@pytest.fixture(scope="module")
def session(agent) -> Session:
    return Session(agent)


def bestmove(lines: list[str]) -> tuple[str, str | None]:
    """(move, ponder or None) of the one bestmove line among `lines`."""
    found = [line.split() for line in lines if line.startswith("bestmove")]
    assert len(found) == 1, lines
    tokens = found[0]
    return tokens[1], tokens[3] if len(tokens) == 4 and tokens[2] == "ponder" else None


def infos(lines: list[str]) -> list[dict]:
    """The `info` lines with a score, as {field: value} (score: "cp C" or "mate M"; pv: the list of moves)."""
    parsed = []
    for line in lines:
        tokens = line.split()
        if tokens[:1] != ["info"] or "score" not in tokens:
            continue
        fields: dict = {}
        i = 1
        while i < len(tokens):
            if tokens[i] == "pv":
                fields["pv"] = tokens[i + 1 :]
                break
            if tokens[i] == "score":
                fields["score"], i = f"{tokens[i + 1]} {tokens[i + 2]}", i + 3
            else:
                fields[tokens[i]], i = tokens[i + 1], i + 2
        parsed.append(fields)
    return parsed


def assert_legal_line(fen: str, moves: list[str]) -> None:
    board = chess.Board(fen)
    for move in moves:
        assert chess.Move.from_uci(move) in board.legal_moves, (fen, moves, move)
        board.push_uci(move)


# --- pure parts: score, go, position ----------------------------------------------------------------------------------
def test_score_cp_is_lc0s_mapping():
    # cp = 111.714640912 · tan(1.5620688421 · v): tan(0.78103) = 0.99131 -> 110.74; tan(1.56207) = 114.5776 -> 12800
    assert up.score_cp(0.0) == 0
    assert up.score_cp(0.5) == 111 and up.score_cp(-0.5) == -111
    assert up.score_cp(1.0) == 12800 and up.score_cp(-1.0) == -12800
    assert up.score_cp(1.5) == 12800 and up.score_cp(float("nan")) == 0  # clipped to [-1, 1]; not a number -> 0
    values = np.linspace(-1, 1, 41)
    assert all(np.diff([up.score_cp(v) for v in values]) > 0)  # strictly increasing


def test_parse_go():
    go, notes = up.parse_go("wtime 60000 btime 59000 winc 1000 binc 900 movestogo 12 nodes 77".split())
    assert (go.wtime, go.btime, go.winc, go.binc, go.movestogo, go.nodes) == (60000, 59000, 1000, 900, 12, 77)
    assert not go.infinite and notes == []
    go, notes = up.parse_go("searchmoves e2e4 D2D4 infinite depth 3".split())
    assert go.searchmoves == ("e2e4", "d2d4") and go.infinite and go.depth == 3 and notes == []
    # malformed values and tokens are noted and skipped, never an exception: a go always gets its bestmove
    go, notes = up.parse_go("nodes 1e9 movetime 99999999999999999999 bogus wtime".split())
    assert go == up.GoCommand()
    assert len(notes) == 6  # nodes 1e9, then 1e9 as a token; movetime's 20 digits, then them as a token; bogus; wtime


def test_parse_position():
    assert up.parse_position(["startpos"]) == up.Position(chess.STARTING_FEN, ())
    pos = up.parse_position("fen rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 moves e2e4 E7E5".split())
    assert pos.root == chess.STARTING_FEN and [m.uci() for m in pos.moves] == ["e2e4", "e7e5"]
    errors = {
        "": "startpos",
        "fen": "needs a FEN",
        "somewhere": "startpos",
        "startpos e2e4": "expected 'moves'",
        "startpos moves e2e5": "illegal or malformed move 'e2e5'",
        "startpos moves e2e4 zz": "illegal or malformed move 'zz'",
        "startpos moves 0000": "null move",
        "fen rnbqkbnr/pppppppp/8/8 w": "bad FEN",
        "fen 8/8/8/8/8/8/8/8 w - - 0 1": "no white king, no black king",
        f"fen {CHESS960}": "bad castling rights",
    }
    for args, message in errors.items():
        with pytest.raises(up.PositionError, match=message):
            up.parse_position(args.split())


# --- the engine in-process --------------------------------------------------------------------------------------------
def test_handshake_and_isready(session):
    assert session.ask("uci") == [
        "id name az-jax chess",
        "id author the az_jax authors",
        "option name Simulations type spin default 8 min 0 max 1000000",
        "option name MultiPV type spin default 1 min 1 max 256",
        "option name Move Overhead type spin default 50 min 0 max 60000",
        "option name Ponder type check default false",
        "option name Threads type spin default 1 min 1 max 1024",
        "uciok",
    ]
    assert session.ask("isready") == ["readyok"]
    assert session.ask("ucinewgame", "setoption name Threads value 4", "isready") == [
        "info string Threads has no effect: the search is one program on one JAX device",
        "readyok",
    ]


def test_position_reaches_the_fen_python_chess_gives(session):
    from pgx.experimental.chess import to_fen

    assert session.ask("position startpos moves e2e4 e7e5") == []
    board = chess.Board()
    board.push_uci("e2e4")
    board.push_uci("e7e5")
    assert board.fen(en_passant="fen") == AFTER_E4_E5  # python-chess agrees with the hand-written FEN
    assert to_fen(session.engine.tree.state) == AFTER_E4_E5  # and so does the state pgx reached
    assert session.engine._board().fen() == board.fen()


def test_fen_reader_agrees_with_pgxs(agent):
    """The engine's FEN reader gives the state of pgx's own (pgx.experimental.chess.from_fen), less from_fen's
    default history (the start position as the previous board)."""
    from pgx.experimental.chess import from_fen, to_fen

    fens = [
        AFTER_E4_E5,  # python-chess writes no e6: no en passant capture is legal
        "r3k2r/8/8/3pP3/8/8/8/R3K2R w Kq d6 0 20",  # exd6 en passant legal; two castling rights of four
        "rnbqkbnr/ppp1pppp/8/8/3pP3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 3",  # Black to move, dxe3 en passant legal
        MATE_IN_ONE,
        FOOLS_MATE,
    ]
    for fen in fens:
        board = chess.Board(fen)
        ours, theirs = ue._fen_state(board), from_fen(board.fen())
        assert to_fen(ours) == board.fen()
        for field in ("board", "color", "castling_rights", "en_passant", "halfmove_count", "legal_action_mask"):
            np.testing.assert_array_equal(getattr(ours._x, field), getattr(theirs._x, field), err_msg=field)
        for field in ("current_player", "terminated", "rewards"):
            np.testing.assert_array_equal(getattr(ours, field), getattr(theirs, field), err_msg=field)
        assert ue._legal_actions(ours) == cm.legal_action_set(board)
        # observation planes: 8 boards × 14 (this one first), then colour, move count, castling ×4, no-progress count
        obs, reference = np.asarray(ours.observation), np.asarray(theirs.observation)
        np.testing.assert_array_equal(obs[..., :14], reference[..., :14])
        np.testing.assert_array_equal(obs[..., 112:], reference[..., 112:])
        assert not obs[..., 14:112].reshape(8, 8, 7, 14)[..., :12].any()  # no pieces on earlier boards
    # the start position read from its FEN is pgx's own start (its first player White)
    start, init = ue._fen_state(chess.Board()), ue._start(agent.env)
    np.testing.assert_array_equal(start.observation, init.observation)
    np.testing.assert_array_equal(start.legal_action_mask, init.legal_action_mask)
    np.testing.assert_array_equal(start._x.board_history, init._x.board_history)


def test_go_nodes_info_bestmove_and_tree_reuse(session):
    session.ask("ucinewgame", "position startpos moves e2e4 e7e5")
    lines = session.ask("go nodes 48")
    move, ponder = bestmove(lines)
    assert_legal_line(AFTER_E4_E5, [move] + ([ponder] if ponder else []))
    final = infos(lines)[-1]
    assert final["nodes"] == "48" and final["depth"] == str(len(final["pv"])) and final["pv"][0] == move
    assert final["score"].startswith("cp ") and abs(int(final["score"].split()[1])) <= 12800
    assert_legal_line(AFTER_E4_E5, final["pv"])
    board = chess.Board(AFTER_E4_E5)
    carried = next(m.visits for m in session.engine.tree.moves() if cm.action_to_uci(m.action, board) == move)
    # The GUI plays our move: the tree goes on from its subtree, which holds `carried` − 1 simulations (the most
    # visited of 29 moves after 48 simulations has at least 2 visits).
    session.ask(f"position startpos moves e2e4 e7e5 {move}")
    assert session.engine.tree.reused == carried - 1 >= 1
    lines = session.ask("go nodes 56")
    assert infos(lines)[-1]["nodes"] == "56"
    # a position that is not the last one plus 0-2 moves: a fresh tree
    session.ask("position startpos moves d2d4")
    assert session.engine.tree.reused == 0 and session.engine.tree.visits == 0
    # searchmoves: the best of those moves (the tree searches all 20)
    assert bestmove(session.ask("go nodes 8 searchmoves a7a6 h7h5"))[0] in ("a7a6", "h7h5")


def test_positions_pgx_cannot_play_are_errors_and_the_engine_plays_on(session):
    session.ask("position startpos moves g1f3")
    for line in (f"position fen {CHESS960}", "position fen 8/8/8/8/8/8/8/8 w - - 0 1", "position startpos moves e7e5"):
        out = session.ask(line)
        assert len(out) == 1 and out[0].startswith("info string error: ") and "position is unchanged" in out[0]
    assert "bad castling rights" in session.ask(f"position fen {CHESS960}")[0]
    after_nf3 = "rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1"
    move, _ = bestmove(session.ask("go nodes 8"))
    assert_legal_line(after_nf3, [move])  # Black's move after 1. Nf3, the position before the errors


def test_game_ends(session):
    # no legal move: bestmove 0000, whether the position is a FEN or reached by moves (pgx marks every action legal
    # at the end of a game it stepped into; the engine goes by python-chess's moves)
    assert session.ask(f"position fen {FOOLS_MATE}", "go nodes 8") == ["info depth 0 score mate 0", "bestmove 0000"]
    out = session.ask("position startpos moves f2f3 e7e5 g2g4 d8h4", "go nodes 8")
    assert out == ["info depth 0 score mate 0", "bestmove 0000"]
    assert session.ask(f"position fen {STALEMATE}", "go") == ["info depth 0 score cp 0", "bestmove 0000"]
    # a threefold repetition ends a pgx game, not a chess game (a player may claim it): on from the FEN
    knights = "g1f3 g8f6 f3g1 f6g8 " * 2 + "g1f3"  # the position after 1. Nf3 for the third time (plies 1, 5, 9)
    out = session.ask(f"position startpos moves {knights}", "go nodes 8")
    assert out[0].startswith("info string pgx's rules have ended this game") and len(out) == 3, out
    after_nf3 = "rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 9 5"
    assert_legal_line(after_nf3, [bestmove(out)[0]])
    # 50 moves without progress: pgx's game is over even from the FEN; the tree searches it anyway
    fifty = "4k3/8/8/8/8/8/8/4K2R w K - 100 80"
    out = session.ask(f"position fen {fifty}", "go nodes 8")
    assert out[0].startswith("info string pgx's rules end the game here") and len(out) == 3, out
    assert_legal_line(fifty, [bestmove(out)[0]])


def test_multipv_lists_every_move_and_scores_mate_in_one(session):
    board = chess.Board(MATE_IN_ONE)
    lines = session.ask("setoption name MultiPV value 256", f"position fen {MATE_IN_ONE}", "go nodes 1")
    session.ask("setoption name MultiPV value 1")
    final = infos(lines)[-board.legal_moves.count() :]  # the final info: one line per legal move (26), best first
    assert [int(info["multipv"]) for info in final] == list(range(1, 27))
    assert sorted(info["pv"][0] for info in final) == sorted(m.uci() for m in board.legal_moves)
    mates = {info["pv"][0] for info in final if info["score"] == "mate 1"}
    assert mates == {"f7e8", "f7f8", "f7g7", "f7h7"}


def test_go_limits(session):
    # the engine sets its agent up on the first command that needs it: here, whatever test ran first on this worker
    assert "readyok" in session.ask("isready")
    board = chess.Board()
    go = lambda text: session.engine._limits(up.parse_go(text.split())[0], board)  # noqa: E731
    assert go("") == (SIMULATIONS, math.inf)  # the Simulations option
    assert go("depth 5") == (SIMULATIONS, math.inf)  # depth is not used
    assert go("nodes 100") == (100, math.inf)
    assert go("infinite") == (None, math.inf)
    assert go("movetime 500") == (None, pytest.approx(0.45))  # 500 ms less the 50 ms overhead
    assert go("wtime 60000 btime 1000 winc 1000") == (None, pytest.approx(60 / 30 + 0.9))  # White's clock: 2.9 s
    assert go("wtime 60000 winc 1000 movestogo 10") == (None, pytest.approx(60 / 10 + 0.9))
    assert go("btime 60000") == (SIMULATIONS, math.inf)  # only the opponent's clock: no clock for us
    session.ask("setoption name Simulations value 20", "setoption name Move Overhead value 100")
    assert go("") == (20, math.inf) and go("movetime 500") == (None, pytest.approx(0.4))
    session.ask("setoption name Simulations value 8", "setoption name Move Overhead value 50")


def test_infinite_and_ponder_wait_for_stop_and_ponderhit(session):
    session.ask("position startpos")
    start = len(session.lines)
    session.ask("go infinite", wait=False)
    full = "info string the tree is full (63 simulations): waiting for stop"  # 64 nodes: the root and 63
    deadline = time.monotonic() + 60
    while full not in session.lines[start:] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    assert session.engine.searching and not any(line.startswith("bestmove") for line in session.lines[start:])
    assert "readyok" in session.ask("isready", wait=False)  # answered while the search runs
    out = session.ask("stop")
    move, _ = bestmove(out)
    assert_legal_line(chess.STARTING_FEN, [move])
    # an info line per chunk of 8 (info_interval_s=0) until the tree was full, then the note; no final info line
    # (the last one says it all)
    assert [int(info["nodes"]) for info in infos(session.lines[start:])] == list(range(8, 57, 8)) + [63]
    assert session.lines[start:][-3:] == [full, "readyok", out[-1]] and out[-1].startswith(f"bestmove {move}")
    assert not session.engine.searching

    session.ask("go ponder nodes 24", wait=False)
    time.sleep(1.0)
    assert session.engine.searching  # pondering: no bestmove, whatever the tree holds
    out = session.ask("ponderhit")  # now a normal search: it ends at 24 simulations, without a stop
    assert_legal_line(chess.STARTING_FEN, [bestmove(out)[0]])
    # `go` during a search: the running search answers first, then the new one
    out = session.ask("go infinite", wait=False) + session.ask("go nodes 8")
    assert len([line for line in out if line.startswith("bestmove")]) == 2


# --- fuzzing ----------------------------------------------------------------------------------------------------------
def fuzz_lines(rng: random.Random, n: int) -> list[str]:
    """`n` random and malformed UCI lines (never `quit`): junk, binary, empty, known commands with bad arguments."""
    fens = [chess.STARTING_FEN, AFTER_E4_E5, MATE_IN_ONE, STALEMATE, FOOLS_MATE, CHESS960]
    words = ["position", "go", "setoption", "name", "value", "moves", "fen", "startpos", "searchmoves", "isready"]
    words += ["debug", "on", "register", "ponderhit", "stop", "uci", "ucinewgame", "infinite", "ponder", "nodes"]
    words += ["wtime", "btime", "movetime", "depth", "MultiPV", "Simulations", "Threads", "e2e4", "e7e5", "z9z9"]
    numbers = ["0", "-1", "3", "1.5", "1e9", "99999999999999999999999999", "-99999999999", "0x10", "NaN", "", "٣"]

    def junk(k: int) -> str:  # printable, control (not the newline) and non-ASCII characters
        codes = [
            rng.choice([rng.randrange(32, 127), rng.randrange(0, 32), rng.randrange(128, 0x2FFF)]) for _ in range(k)
        ]
        return "".join(" " if c == 10 else chr(c) for c in codes)

    def mutated_fen() -> str:
        fen = list(rng.choice(fens))
        for _ in range(rng.randrange(0, 4)):
            fen[rng.randrange(len(fen))] = rng.choice("pnbrqkPNBRQK12345678/ -wbKQkqe3")
        return "".join(fen)

    def moves() -> str:
        board, out = chess.Board(), []
        for _ in range(rng.randrange(0, 6)):
            legal = list(board.legal_moves)
            if rng.random() < 0.85 and legal:
                move = rng.choice(legal)
                board.push(move)
                out.append(move.uci())
            else:
                out.append(rng.choice(["e2e5", "a1a1", "e7e8k", "h9h1", "0000", "e2", "E2E4", junk(4)]))
        return " ".join(out)

    makers = [
        lambda: "",
        lambda: " \t \r",
        lambda: junk(rng.randrange(1, 40)),
        lambda: " ".join(rng.choice(words + numbers) for _ in range(rng.randrange(1, 8))),
        lambda: f"position startpos moves {moves()}",
        lambda: f"position fen {mutated_fen()} moves {moves()}",
        lambda: f"position fen {mutated_fen()}",
        lambda: "position " + " ".join(rng.choice(words) for _ in range(rng.randrange(0, 4))),
        lambda: "go " + " ".join(rng.choice(words + numbers) for _ in range(rng.randrange(0, 6))),
        lambda: f"go nodes {rng.choice(numbers)} movetime {rng.choice(numbers)}",
        lambda: f"go wtime {rng.choice(numbers)} btime {rng.choice(numbers)} winc {rng.choice(numbers)}",
        lambda: (
            f"setoption name {rng.choice(['MultiPV', 'Simulations', 'Threads', 'Move Overhead', 'Ponder', 'x'])}"
            f" value {rng.choice(numbers + ['true', 'maybe'])}"
        ),
        lambda: rng.choice(["setoption", "setoption name", "setoption value 3", "debug", "debug maybe", "register"]),
        lambda: rng.choice(["isready", "uci", "ucinewgame", "stop", "ponderhit", "go infinite", "go ponder"]),
        lambda: "x" * 10_000 + " isready",
    ]
    # the three `go` makers drawn a quarter as often as the others: a search is the slow answer (~70 ms here)
    weights = [0.25 if i in (8, 9, 10) else 1.0 for i in range(len(makers))]
    lines = [maker() for maker in rng.choices(makers, weights, k=n)]
    assert not any("quit" in line.split() for line in lines)
    return lines


def first_command(line: str) -> str | None:
    """The command a line is (the spec: unknown tokens before it are skipped)."""
    return next((t for t in line.split() if t in ue.COMMANDS), None)


def test_fuzzed_lines_are_all_answered_and_the_engine_plays_on(agent, capfd):
    lines = fuzz_lines(random.Random(20240), 1000)
    tail = [
        "stop",
        "setoption name MultiPV value 1",
        "isready",
        "ucinewgame",
        "position startpos moves e2e4",
        "go nodes 8",
    ]
    stdout = io.StringIO()
    started = time.monotonic()
    status = ue.serve(
        agent,
        io.StringIO("\n".join(lines + tail) + "\n"),
        stdout,
        warm_up=False,
        simulations=SIMULATIONS,
        capacity=CAPACITY,
        chunk=CHUNK,
    )
    seconds = time.monotonic() - started
    out = stdout.getvalue().splitlines()
    err = capfd.readouterr().err
    assert status == 0 and "Traceback" not in err, err[-2000:]
    commands = [first_command(line) for line in lines + tail]
    # every command that asks for an answer got exactly one
    assert sum(line.startswith("bestmove") for line in out) == commands.count("go")
    assert out.count("readyok") == commands.count("isready")
    assert out.count("uciok") == commands.count("uci")
    assert all(line.startswith(("info ", "bestmove ", "readyok", "uciok", "id ", "option ")) for line in out)
    assert all(line.isascii() and line.isprintable() for line in out)  # junk is never echoed raw
    # and the engine still plays: after the last readyok, the tail's search (info lines, then its legal bestmove)
    answer = out[len(out) - out[::-1].index("readyok") :]
    assert all(line.startswith("info depth") for line in answer[:-1]) and len(answer) >= 2
    after_e4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
    assert_legal_line(after_e4, [bestmove(answer)[0]])
    print(f"\n[uci fuzz] {len(lines)} lines, {commands.count('go')} searches, {len(out)} answer lines, {seconds:.1f} s")


# --- a real controller: python-chess against Stockfish ----------------------------------------------------------------
@pytest.fixture(scope="module")
def run_dir(agent, tmp_path_factory) -> str:
    """A run directory with one checkpoint of the tiny untrained network (the training items are placeholders:
    an agent reads only the weights, the iteration and the config)."""
    run = str(tmp_path_factory.mktemp("uci") / "run")
    state = types.SimpleNamespace(
        params=agent.variables["params"],
        batch_stats=agent.variables["batch_stats"],
        opt_state={"count": np.zeros((), np.int32)},
        games={"placeholder": np.zeros((1,), np.int32)},
        replay={"placeholder": np.zeros((1,), np.int32)},
        key=np.zeros((2,), np.uint32),
        iteration=np.int32(0),
        best=None,
        resign=None,
    )
    manager = ckpt.make_manager(run)
    ckpt.save(manager, state, CONFIG)
    manager.wait_until_finished()
    return run


def test_cli_errors_are_one_line(tmp_path):
    """A run dir that does not exist is refused at once; one without checkpoints is found by the background load,
    after `uci` has been answered, and reported at the `isready` that waits for it: one line, exit status 2."""
    base = [sys.executable, "-m", "az_jax.apps.cli", "--devices", "1", "uci", "--run-dir"]
    missing = subprocess.run([*base, str(tmp_path / "nothing")], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and missing.stderr.strip().endswith(
        f"no run or checkpoint at {tmp_path / 'nothing'}"
    )
    empty = subprocess.run([*base, str(tmp_path)], input="uci\nisready\n", capture_output=True, text=True, timeout=120)
    assert empty.returncode == 2 and empty.stdout.splitlines()[-1] == "uciok", (empty.stdout, empty.stderr)
    assert empty.stderr.strip().splitlines()[-1] == f"az-jax: error: {tmp_path} has no checkpoints/ directory"
    assert "Traceback" not in empty.stderr


@pytest.mark.skipif(STOCKFISH is None, reason="stockfish not installed (apt-get install stockfish)")
def test_python_chess_plays_az_jax_uci_against_stockfish(run_dir, tmp_path):
    # one device: an engine searches one game at a time
    command = [sys.executable, "-m", "az_jax.apps.cli", "--devices", "1", "uci", "--run-dir", run_dir]
    command += ["--simulations", str(SIMULATIONS), "--capacity", str(CAPACITY)]
    stderr_path = tmp_path / "stderr.txt"
    started = time.monotonic()
    with open(stderr_path, "w") as stderr:
        # timeout: python-chess's default of 10 s per command would also bound the first isready, which waits for
        # pgx chess to compile (tens of seconds on a CPU); the handshake must still take less (checked below)
        ours = chess.engine.SimpleEngine.popen_uci(
            command, timeout=300, stderr=stderr, env={**os.environ, **FAST_COMPILES}
        )
    handshake = time.monotonic() - started
    stockfish = chess.engine.SimpleEngine.popen_uci(STOCKFISH)
    try:
        assert ours.id["name"] == "az-jax chess" and handshake < 10  # python-chess's own handshake timeout
        assert set(ours.options) >= {"Simulations", "MultiPV", "Move Overhead", "Ponder", "Threads"}
        ours.configure({"Threads": 2})  # what lichess-bot configurations set: accepted, no effect
        stockfish.configure({"Skill Level": 0, "Threads": 1, "Hash": 16})

        # raw junk on the engine's stdin (bytes that are not UTF-8, NUL, a long line), then a ping: still there
        junk = [b"\xff\xfe\x00garbage", b"position fen \xc3\x28", b"go\xff nodes 5", b"a" * 50_000, b"\x1b[2J"]
        transport = ours.protocol.transport.get_pipe_transport(0)
        for line in junk:
            ours.protocol.loop.call_soon_threadsafe(transport.write, line + b"\n")
        ready_started = time.monotonic()
        ours.ping()  # isready: waits for the start-up compilation too
        first_ready = time.monotonic() - ready_started

        board, plies, infos_seen = chess.Board(), 0, 0
        move_times = []
        while not board.is_game_over(claim_draw=True) and plies < 160:
            if board.turn == chess.WHITE:
                t = time.monotonic()
                result = ours.play(board, chess.engine.Limit(nodes=SIMULATIONS), info=chess.engine.INFO_ALL)
                move_times.append(time.monotonic() - t)
                info = result.info
                assert {"score", "pv", "nodes", "depth", "nps"} <= set(info), info
                assert info["nodes"] == SIMULATIONS and info["pv"][0] == result.move
                assert isinstance(info["score"].relative, chess.engine.Cp | chess.engine.Mate)
                infos_seen += 1
            else:
                result = stockfish.play(board, chess.engine.Limit(nodes=100))
            assert result.move in board.legal_moves
            board.push(result.move)
            plies += 1
        outcome = board.outcome(claim_draw=True)
        # a game Stockfish has not won by the cap is adjudicated by material (P 1, N B 3, R 5, Q 9)
        values = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}
        material = sum(
            v * (len(board.pieces(p, chess.WHITE)) - len(board.pieces(p, chess.BLACK))) for p, v in values.items()
        )
        verdict = outcome.result() if outcome else f"adjudicated at {plies} plies, material {material:+d} for White"

        analysis = ours.analyse(chess.Board(AFTER_E4_E5), chess.engine.Limit(nodes=16), multipv=2)
        assert len(analysis) == 2 and all({"score", "pv", "nodes", "multipv"} <= set(a) for a in analysis)
        assert analysis[0]["pv"][0] != analysis[1]["pv"][0]
    finally:
        ours.quit()
        stockfish.quit()
    err = stderr_path.read_text()
    assert "Traceback" not in err, err[-3000:]
    assert infos_seen == len(move_times) >= 1
    print(
        f"\n[az-jax uci vs Stockfish skill 0, 100 nodes] {verdict} in {plies} plies; handshake {handshake:.1f} s, "
        f"first isready {first_ready:.1f} s (compile), moves at {SIMULATIONS} simulations: median "
        f"{np.median(move_times) * 1000:.0f} ms"
    )
