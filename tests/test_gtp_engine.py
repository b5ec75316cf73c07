"""`az-jax gtp`: the GTP engine (az_jax/frontends/gtp_engine.py) and its command (az_jax/apps/cli/gtp.py).

The protocol is checked on the engine object with hand-checked responses (GTP 2 spec: ids, `? message` failures,
empty lines ending responses, preprocessing), then by fuzzing, then through real controllers: Sabaki's own GTP
controller library (@sabaki/gtp from npm, tests/js/driver.js) drives `az-jax gtp` through a whole game and two
analysis sessions, and a Python referee plays `az-jax gtp` against GNU Go to the end, where GNU Go's final_score must
equal ours.

Cost: one tiny go_9x9 network (tests/conftest.py TINY_NETWORK, untrained weights) saved as a run, loaded here and in
the engine subprocesses. The subprocesses see 2 host devices through XLA_FLAGS and the same run, capacity and chunk as
the engine here, so their programs are this process's and come from the session's compilation cache (conftest.py).
"""

import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import orbax.checkpoint as ocp
import pytest

from az_jax.apps.cli import build_parser
from az_jax.apps.cli.args import UsageError
from az_jax.core import networks
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.engines import gtp
from az_jax.frontends.gtp_engine import COMMANDS, GoEngine
from az_jax.frontends.gtp_protocol import format_score, preprocess, serve
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.agent import load_agent
from envs.notation import go

from conftest import TINY_NETWORK, tiny_variables

N = 9
SIMULATIONS = 8
CAPACITY = 1024  # the in-process engine's and the subprocesses' (the same programs: one compile for all)
ENGINE_FLAGS = ["--simulations", str(SIMULATIONS), "--resign-threshold", "-1", "--capacity", str(CAPACITY)]
JS_DIR = os.path.join(os.path.dirname(__file__), "js")
GNUGO = gtp.find_executable("gnugo")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A go_9x9 run whose one checkpoint (step 0) holds a tiny untrained network: what load_agent reads."""
    return save_tiny_go_run(tmp_path_factory.mktemp("gtp") / "run")


def save_tiny_go_run(run) -> str:
    """Writes the run of `run_dir` (above) at the path `run`; returns it as a string."""
    config = override(preset("go_9x9", "small"), TINY_NETWORK)
    network = networks.make_network(config, N * N + 1)
    variables = tiny_variables(network, np.zeros((1, N, N, 17), np.float32))
    manager = ckpt.make_manager(str(run))
    manager.save(
        0,
        args=ocp.args.Composite(
            model=ocp.args.StandardSave(variables),
            train=ocp.args.StandardSave({"iteration": np.int32(0)}),
            config=ocp.args.JsonSave(dataclasses.asdict(config)),
        ),
    )
    manager.wait_until_finished()
    return str(run)


@pytest.fixture(scope="module")
def logs():
    return []


@pytest.fixture(scope="module")
def engine(run_dir, logs):
    return GoEngine(
        load_agent(run_dir), simulations=SIMULATIONS, resign_threshold=-1.0, capacity=CAPACITY, log=logs.append
    )


@pytest.fixture(scope="module")
def warm(engine):
    """The engine here, its programs compiled (and so in the compilation cache) before a subprocess needs them."""
    new_game(engine)
    ok(engine, "genmove b")
    ok(engine, "genmove w")  # the tree moved on: the subtree program
    ok(engine, "final_score")
    return engine


def az_env() -> dict:
    """The environment of an `az-jax gtp` subprocess: 2 host devices as here (XLA_FLAGS' device count is not part of
    the compilation cache's key; conftest.py exported the cache directory)."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2".strip()
    return {**os.environ, "XLA_FLAGS": flags}


def az_gtp(run_dir: str) -> list[str]:
    return [sys.executable, "-m", "az_jax.apps.cli", "gtp", "--run-dir", run_dir, *ENGINE_FLAGS]


class Scripted:
    """A stream for analysis: collects what the engine writes; a line is 'pending' once `stop_after` info lines were
    written (the controller's next command)."""

    def __init__(self, stop_after: int):
        self.parts: list[str] = []
        self.stop_after = stop_after

    def write(self, text: str) -> None:
        self.parts.append(text)

    def pending(self) -> bool:
        return sum(part.startswith("info") for part in self.parts) >= self.stop_after

    def wait(self) -> None:
        assert self.pending(), "the engine waited for input that a full tree cannot bring"


def ask(engine, line: str, stream=None) -> str:
    """The whole response to `line`, streamed parts included."""
    if stream is None:
        return engine.handle(line)
    rest = engine.handle(line, stream)
    return "".join(stream.parts) + rest


def ok(engine, line: str) -> str:
    """The result of a command that must succeed (no id)."""
    response = engine.handle(line)
    assert response.startswith("= ") and response.endswith("\n\n"), (line, response)
    return response[2:-2]


def new_game(engine) -> None:
    for line in ("boardsize 9", "clear_board", "komi 7.5", "time_settings 0 1 0"):  # 0 1 0: no time limit
        ok(engine, line)


def board(engine) -> list[str]:
    """The 9 rows of showboard, top (row 9) first, as 'X . O ...' strings."""
    lines = ok(engine, "showboard").split("\n")
    return [line[4:21] for line in lines[2:11]]


# --- the protocol, by hand ------------------------------------------------------------------------------------------


def test_responses_ids_errors_and_preprocessing(engine):
    assert engine.handle("protocol_version") == "= 2\n\n"
    assert engine.handle("7 name") == "=7 az_jax\n\n"
    assert re.fullmatch(r"=7 \S+ \(go_9x9, checkpoint 0\)\n\n", engine.handle("7 version"))
    # spec 3.1: control characters but HT removed, '#' starts a comment, HT is a space, empty lines get no response
    assert engine.handle("") == "" and engine.handle("  \t \r\n") == "" and engine.handle("# a comment") == ""
    assert engine.handle("na\x00m\x1be # comment") == "= az_jax\n\n"
    assert engine.handle("\t12\tname\r\n") == "=12 az_jax\n\n"
    assert engine.handle("8 foo") == "?8 unknown command\n\n"
    assert engine.handle("9") == "?9 unknown command\n\n"
    assert engine.handle("NAME") == "? unknown command\n\n"  # command names are case-sensitive
    assert engine.handle("known_command genmove") == "= true\n\n"
    assert engine.handle("known_command foo") == "= false\n\n"
    assert engine.handle("3 known_command") == "?3 syntax error: expected known_command COMMAND\n\n"
    listed = ok(engine, "list_commands").split("\n")
    assert listed == list(COMMANDS) and len(listed) == 23
    assert all(engine.handle(f"known_command {c}") == "= true\n\n" for c in listed)
    assert engine.handle("4 boardsize 19") == "?4 unacceptable size\n\n"
    assert engine.handle("boardsize 99999999999999999999") == "? unacceptable size\n\n"
    assert engine.handle("boardsize x").startswith("? syntax error")
    assert engine.handle("boardsize 9") == "= \n\n"
    for bad in ("komi abc", "komi 1e400", "komi nan", "komi 7.5 1", "komi", "komi 1001"):
        assert engine.handle(bad).startswith("? syntax error"), bad
    assert engine.handle("5 play x D4").startswith("?5 syntax error: not a colour")
    assert engine.handle("play b Z99").startswith("? syntax error: not a vertex")
    assert engine.handle("play b I5").startswith("? syntax error: not a vertex")  # GTP skips the letter I
    assert engine.handle("play b J10") == "? illegal move\n\n"  # a vertex, but off the 9x9 board
    assert engine.handle("play b resign").startswith("? syntax error")
    assert engine.handle("play b").startswith("? syntax error: expected play COLOUR VERTEX")
    assert engine.handle("undo") == "? cannot undo\n\n"
    assert engine.handle("quit") == "= \n\n" and engine.finished
    engine.finished = False


def test_play_undo_showboard_ko_and_colour_out_of_turn(engine):
    new_game(engine)
    assert ok(engine, "play b E5") == "" and ok(engine, "play W d5") == ""  # colours and vertices in any case
    assert engine.handle("play w E5") == "? illegal move\n\n"  # occupied
    rows = board(engine)
    assert rows[4] == ". . . O X . . . ." and rows[0] == ". " * 8 + "."  # row 5 (index 4): D5 white, E5 black
    assert ok(engine, "showboard").split("\n")[-2:] == ["X (Black) to move", "komi 7.5, move 2"]
    assert ok(engine, "undo") == "" and ok(engine, "undo") == "" and engine.handle("undo") == "? cannot undo\n\n"
    assert board(engine) == [". " * 8 + "."] * 9

    # White plays first: a Black pass is put in before it, and undo takes both back
    ok(engine, "play w C3")
    assert engine._actions() == (81, 6 * 9 + 2)  # pass, then C3 = row 9 - 3 = 6 from the top, column 2
    assert ok(engine, "showboard").split("\n")[-2] == "X (Black) to move"
    ok(engine, "undo")
    assert engine._actions() == () and engine.handle("undo") == "? cannot undo\n\n"
    # ... but not when that pass would end the game: B pass, then B again would need a second (game-ending) pass
    ok(engine, "play b pass")
    assert engine.handle("play b E5") == "? illegal move\n\n"
    ok(engine, "undo")

    # suicide: White A9 between Black A8 and B9
    for line in ("play b A8", "play w J1", "play b B9"):
        ok(engine, line)
    assert engine.handle("play w A9") == "? illegal move\n\n"
    # ko at E5/F5: Black D5 E4 E6 around E5, White G5 F4 F6 around F5; W E5, B F5 takes it; W may not retake at once
    new_game(engine)
    for line in ("b D5", "w G5", "b E4", "w F4", "b E6", "w F6", "b A1", "w E5", "b F5"):
        ok(engine, f"play {line}")
    assert board(engine)[4] == ". . . X . X O . ."  # row 5: E5's white stone is gone
    assert engine.handle("play w E5") == "? illegal move\n\n"
    ok(engine, "play w J9")
    ok(engine, "play b J8")
    assert ok(engine, "play w E5") == ""  # a move later, the ko can be taken back
    assert board(engine)[4] == ". . . X O . O . ."


def test_final_score_of_a_hand_built_position(engine, logs):
    new_game(engine)
    # Black walls column E, White column F: Black's area is columns A-E = 5 x 9 = 45 points (9 stones, 36 empty
    # points that reach only Black), White's F-J = 4 x 9 = 36. Komi 7.5: 45 - 36 - 7.5 = +1.5 for Black.
    for row in range(1, N + 1):
        ok(engine, f"play b E{row}")
        ok(engine, f"play w F{row}")
    assert ok(engine, "final_score") == "B+1.5"
    assert ok(engine, "final_status_list dead") == "" and ok(engine, "final_status_list seki") == ""
    alive = ok(engine, "final_status_list alive").split()
    assert sorted(alive) == sorted([f"E{r}" for r in range(1, 10)] + [f"F{r}" for r in range(1, 10)])
    assert engine.handle("final_status_list x").startswith("? syntax error")
    # two passes end the game; then passes are taken (and change nothing) and stones are not
    for line in ("play b pass", "play w pass", "play b pass"):
        ok(engine, line)
    assert engine._over() and engine.handle("play w D4") == "? illegal move\n\n"
    assert ok(engine, "genmove w") == "pass" and len(engine._actions()) == 20 and len(engine._moves) == 22
    # komi 9.5 (the moves replayed under it): 45 - 36 - 9.5 = -0.5, White by half a point; said once on stderr (the
    # network assumes 7.5)
    ok(engine, "komi 9.5")
    assert ok(engine, "final_score") == "W+0.5"
    for _ in range(3):  # the two passes after the end, then White's pass: Black passed, the game goes on
        ok(engine, "undo")
    assert not engine._over() and len(engine._states) == len(engine._actions()) + 1 == 20
    assert ok(engine, "showboard").split("\n")[-2] == "O (White) to move"
    assert [line for line in logs if "komi 9.5" in line and "trained with komi 7.5" in line]
    ok(engine, "komi 7.5")
    assert ok(engine, "final_score") == "B+1.5"
    assert (format_score(0.0), format_score(-0.5), format_score(3.0)) == ("0", "W+0.5", "B+3")


def _vertex_ok(engine, move: str) -> bool:
    return move == "pass" or (go.is_vertex(move, N) and move == move.upper())


def test_genmove_reg_genmove_tree_reuse_and_resign(engine):
    new_game(engine)
    move = ok(engine, "genmove b")
    assert _vertex_ok(engine, move) and engine._actions() == (go.vertex_to_action(move, N),)
    ts = engine._env()[3]
    assert ts.visits == SIMULATIONS  # no clock: the tree grows to `simulations` visits
    reply = ok(engine, "genmove w")
    assert _vertex_ok(engine, reply) and reply != move and len(engine._actions()) == 2
    # the subtree under the moves played was kept, and the search only topped it up to 8 visits
    assert ts.visits == SIMULATIONS and ts.state is not None and ts.reused <= SIMULATIONS
    # reg_genmove: the same search, nothing played; genmove then plays the move it named (the tree is already full)
    named = ok(engine, "reg_genmove b")
    assert len(engine._actions()) == 2
    assert ok(engine, "genmove b") == named and len(engine._actions()) == 3
    # genmove for the colour not to move: a pass is put in first, undo takes both back
    ok(engine, "genmove b")
    assert engine._actions()[3] == N * N and len(engine._actions()) == 5
    ok(engine, "undo")
    assert len(engine._actions()) == 3
    # resign: the root's value and the best move's are below the threshold (1.0: always), and the board is unchanged
    engine.resign_threshold = 1.0
    try:
        assert ok(engine, "genmove w") == "resign" and len(engine._actions()) == 3
    finally:
        engine.resign_threshold = -1.0


INFO = re.compile(r"info move (\S+) visits (\d+) winrate (\S+) prior (\S+) order (\d+) pv((?: \S+)+?)(?= info |$)")


def parse_info(line: str) -> list[tuple[str, int, float, float, int, list[str]]]:
    """An analysis line -> [(move, visits, winrate, prior, order, pv)]; the whole line must parse."""
    found = [(m[1], int(m[2]), float(m[3]), float(m[4]), int(m[5]), m[6].split()) for m in INFO.finditer(line)]
    assert " ".join(m.group(0) for m in INFO.finditer(line)) == line, line
    return found


def test_lz_and_kata_analyze(engine):
    new_game(engine)
    ok(engine, "play b E5")
    before = engine._actions()
    response = ask(engine, "5 lz-analyze w 0", Scripted(stop_after=3))
    head, *infos, tail = response.split("\n")[:-1]
    assert head == "=5" and tail == "" and response.endswith("\n\n") and len(infos) == 3
    totals = []
    for line in infos:
        moves = parse_info(line)
        assert moves and [m[4] for m in moves] == list(range(len(moves)))
        for move, visits, winrate, prior, _, pv in moves:
            assert _vertex_ok(engine, move) and move != "E5" and pv[0] == move and visits > 0
            assert winrate == int(winrate) and 0 <= winrate <= 10000 and prior == int(prior) and 0 <= prior <= 10000
        totals.append(sum(m[1] for m in moves))
    assert totals[0] < totals[1] < totals[2]  # one chunk (32 simulations) or more between reports
    assert engine._actions() == before  # analysis plays nothing

    response = ask(engine, "kata-analyze 0 maxmoves 2", Scripted(stop_after=2))
    infos = response.split("\n")[1:-2]
    assert response.startswith("=\n") and len(infos) == 2
    for line in infos:
        moves = parse_info(line)
        assert 1 <= len(moves) <= 2
        assert all(0.0 <= m[2] <= 1.0 and 0.0 <= m[3] <= 1.0 for m in moves)
        assert re.match(r"info move \S+ visits \d+ winrate [01]\.\d{6} prior [01]\.\d{6} ", line)
    assert engine.handle("lz-analyze w interval").startswith("? syntax error")

    # lz-genmove_analyze: info lines while it searches, then `play MOVE`, played
    response = ask(engine, "lz-genmove_analyze w 0", Scripted(stop_after=10**9))
    lines = response.split("\n")
    assert lines[0] == "=" and lines[-3].startswith("play ") and lines[-2:] == ["", ""]
    assert go.vertex_to_action(lines[-3][5:], N) == engine._actions()[-1] and len(engine._actions()) == 2


def test_time_settings_and_time_left(engine):
    new_game(engine)
    ok(engine, "genmove b")  # compiles the search's chunk outside the timed move below (alone, this test would time it)
    new_game(engine)
    assert engine.handle("time_settings 1 2").startswith("? syntax error")
    assert engine.handle("time_left b 10").startswith("? syntax error")
    assert engine.handle("time_left x 10 0").startswith("? syntax error")
    assert engine.clock is None  # time_settings 0 1 0 in new_game: byo-yomi time and no stones = no time limit
    ok(engine, "time_settings 300 0 0")
    ok(engine, "time_left b 1 0")  # 1 s of main time left: this move's share is 1 / 30 = 0.033 s
    engine.simulations = None  # with a clock, `simulations` caps the search; here only the clock does
    try:
        start = time.monotonic()
        move = ok(engine, "genmove b")
        elapsed = time.monotonic() - start
    finally:
        engine.simulations = SIMULATIONS
    ts = engine._env()[3]
    assert _vertex_ok(engine, move) and ts.visits >= 32  # at least one chunk
    assert elapsed < 1.5 and not ts.full, (elapsed, ts.visits)  # it stopped on the clock, before 1,023 visits
    assert engine.clock is not None and engine.clock.left_s[0] is not None and engine.clock.left_s[0] < 1.0
    ok(engine, "time_settings 0 1 0")
    assert engine.clock is None


# --- fuzzing ----------------------------------------------------------------------------------------------------------


class AlwaysPending(Scripted):
    """Analysis stops after its first chunk, as if the controller had sent the next line at once."""

    def __init__(self):
        super().__init__(stop_after=0)


JUNK = ["x", "J10", "I5", "Z25", "A0", "T19", "resign", "-1", "1e400", "nan", "-inf", "0x10", "9" * 60, "---", "\u00e9"]


def fuzz_lines(rng: np.random.Generator, count: int) -> list[str]:
    """Random and malformed GTP lines: known and unknown commands, right and wrong argument counts, good and bad colours
    and vertices, huge and odd numbers, ids, control characters, comments, binary junk (decoded as the server decodes
    stdin). Half the command lines have their command's shape (with good or junk values), so that games are played."""

    def pick(good: list[str]) -> str:
        return str(rng.choice(good)) if rng.random() < 0.85 else str(rng.choice(JUNK))

    colours = ["b", "w", "B", "white", "BLACK"]
    vertices = [go.action_to_vertex(a, N) for a in range(N * N)] + ["pass", "PASS", "e5"]
    numbers = ["0", "1", "5", "30", "2.5"]
    shapes = {
        "play": lambda: [pick(colours), pick(vertices)],
        "genmove": lambda: [pick(colours)],
        "reg_genmove": lambda: [pick(colours)],
        "boardsize": lambda: [pick(["9"])],
        "komi": lambda: [str(rng.choice(["7.5", "7.5", "x", "1e999", "", "nan", "7.5 7.5"]))],
        "known_command": lambda: [pick([*COMMANDS, "foo"])],
        "final_status_list": lambda: [pick(["alive", "dead", "seki"])],
        "time_settings": lambda: [pick(numbers), pick(numbers), pick(["0", "1", "5"])],
        "time_left": lambda: [pick(colours), pick(numbers), pick(["0", "1", "3"])],
        "set_free_handicap": lambda: [pick(vertices) for _ in range(rng.integers(1, 5))],
        "lz-analyze": lambda: [pick(colours), pick(["0", "1"]), pick(["maxmoves", "interval", "ownership"]), "2"],
        "kata-analyze": lambda: [pick(["0", "1"]), pick(["minmoves", "avoid"]), pick(colours), "D4", "1"],
        "lz-genmove_analyze": lambda: [pick(colours), pick(["0", "1"])],
        "kata-genmove_analyze": lambda: [pick(colours)],
    }
    names = [c for c in COMMANDS if c != "komi"] + ["foo", "GENMOVE", "play_", "genmove\x00b", "komi"]
    names += ["play"] * 6 + ["genmove", "undo"] * 3  # more moves, so that games go on and end
    pool = [*JUNK, *colours, *numbers, "pass", "E5", "A1", "J9", "interval", "true", "alive", "\ufffd"]
    lines = []
    for _ in range(count):
        kind = rng.integers(10)
        if kind == 0:  # binary junk
            raw = bytes(rng.integers(0, 256, rng.integers(0, 80)).astype(np.uint8))
            lines.append(raw.decode("utf-8", errors="replace"))
            continue
        if kind == 1:  # blank, whitespace, comments
            lines.append(str(rng.choice(["", "   ", "\t", "# comment", " # genmove b", "\r"])))
            continue
        name = str(rng.choice(names))
        if name in shapes and rng.random() < 0.5:
            args = shapes[name]()
        elif name == "komi":  # 7.5 or junk: another komi would compile a search for it (tested by hand above)
            args = shapes[name]()
        else:
            args = [str(rng.choice(pool)) for _ in range(rng.integers(0, 5))]
        line = " ".join([name, *args])
        if rng.random() < 0.3:
            line = f"{rng.choice(['1', '42', '007', '9' * 40, '-3', '1.5'])} {line}"
        if rng.random() < 0.1 and name != "komi":  # ("komi 7#.5" would be komi 7)
            at = int(rng.integers(0, len(line) + 1))
            line = line[:at] + str(rng.choice(["\x00", "\r", "\t", "\x1b", "\x7f", "#"])) + line[at:]
        lines.append(line)
    return lines


def check_response(line: str, response: str) -> None:
    """Per GTP 2: no response to a line that preprocesses to nothing; otherwise `=`/`?`, the line's id, and one empty
    line that ends the response (and none before)."""
    text = preprocess(line)
    if not text:
        assert response == "", (line, response)
        return
    first = text.split()[0]
    id_ = first if re.fullmatch(r"[0-9]+", first) else ""
    head = response.split("\n", 1)[0]
    assert re.fullmatch(rf"[=?]{id_}( .*)?", head), (line, response)
    assert response.endswith("\n\n") and "\n\n" not in response[:-2], (line, response)
    assert "internal error" not in response, (line, response)


def test_fuzzing_1200_lines_then_a_correct_game(engine, logs):
    new_game(engine)
    rng = np.random.default_rng(14)
    lines = fuzz_lines(rng, 1200)
    answered: dict[str, int] = {}
    for line in lines:
        response = ask(engine, line, AlwaysPending())
        check_response(line, response)
        words = preprocess(line).split()
        name = words[1] if len(words) > 1 and words[0].isdigit() else words[0] if words else ""
        key = f"{name if name in COMMANDS else 'other'} {response[:1]}"
        answered[key] = answered.get(key, 0) + 1
        engine.finished = False  # `quit` is among the lines
    # every kind of answer came, and games were played: moves were taken, generated, refused and taken back
    assert answered["other "] > 50 and answered["other ?"] > 200, answered
    assert min(answered[f"{c} ="] for c in ("play", "genmove", "undo", "lz-analyze", "kata-analyze")) >= 10, answered
    assert min(answered[f"{c} ?"] for c in ("play", "genmove", "undo", "time_left", "boardsize")) >= 10, answered
    assert not [line for line in logs if "internal error" in line]
    # the engine still plays correctly: the hand-checked position scores as before, and genmove plays a legal move
    new_game(engine)
    for row in range(1, N + 1):
        ok(engine, f"play b E{row}")
        ok(engine, f"play w F{row}")
    assert ok(engine, "final_score") == "B+1.5"
    move = ok(engine, "genmove b")
    action = go.vertex_to_action(move, N)
    assert engine._actions()[-1] == action and (move == "pass" or move[0] not in "EF")


def test_serve_reads_bytes_and_stops_at_quit(engine):
    new_game(engine)
    stdin = io.BytesIO(
        b"1 name\n\xff\xfe\x80 junk\n\n# comment\n2 play b E5\nlz-analyze 0\n3 final_score\nquit\nname\n"
    )
    stdout = io.StringIO()
    assert serve(engine, stdin, stdout) == 0 and engine.finished
    engine.finished = False
    out = [line for line in stdout.getvalue().split("\n") if not line.startswith("info")]
    # the 81 points: Black's one stone reaches every empty point, so Black's area is 81; 81 - 0 - 7.5 = 73.5
    assert out == ["=1 az_jax", "", "? unknown command", "", "=2 ", "", "=", "", "=3 B+73.5", "", "= ", "", ""]


def test_cli_argument_errors():
    with pytest.raises(UsageError, match="resign-threshold"):
        build_parser().parse_args(["gtp", "--run-dir", "x", "--resign-threshold", "2"])
    with pytest.raises(UsageError, match="capacity"):
        build_parser().parse_args(["gtp", "--run-dir", "x", "--capacity", "1"])
    args = build_parser().parse_args(["gtp", "--run-dir", "x", "--resign-threshold", "-0.5"])
    assert (args.resign_threshold, args.capacity, args.simulations) == (-0.5, None, None)


def test_cli_missing_run_is_one_line_error(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "az_jax.apps.cli", "gtp", "--run-dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=120,
        env=az_env(),
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1] == (
        f"az-jax: error: no run or checkpoint at {tmp_path / 'none'} (nor an agent file; shipped agents: "
        "connect_four, go_9x9, tic_tac_toe)"
    )


# --- real controllers -------------------------------------------------------------------------------------------------


def replay_into(engine, moves: list[str]) -> None:
    """Plays `moves` (alternately from Black) on the engine here: every one must be legal."""
    new_game(engine)
    for ply, move in enumerate(moves):
        assert ok(engine, f"play {'bw'[ply % 2]} {move}") == "", (ply, move)


def test_sabaki_gtp_controller_plays_a_game_and_analyses(warm, run_dir):
    engine = warm
    node = shutil.which("node")
    assert node, "node (v18+) is needed: the GTP controller under test is Sabaki's @sabaki/gtp"
    assert os.path.isdir(os.path.join(JS_DIR, "node_modules", "@sabaki", "gtp")), (
        "tests/js/node_modules is missing: run `npm ci --prefix tests/js` (make test does)"
    )
    r = subprocess.run(
        [node, os.path.join(JS_DIR, "driver.js"), "200", "--", *az_gtp(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        env=az_env(),
    )
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    out = json.loads(r.stdout)
    assert out["failures"] == [] and out["exit"] == {"code": 0, "signal": None}, (out["failures"], out["stderr"])
    setup = {k: v["content"] for k, v in out["setup"].items()}
    assert setup["protocol_version"] == "2" and setup["name"] == "az_jax"
    assert setup["list_commands"].split("\n") == list(COMMANDS)

    # the game: every reply a vertex of the 9x9 board or pass (resignation is off), legal when replayed here, to the
    # end (two passes: pgx's game is over after two passes or 2 x 81 = 162 plies, then the engine passes)
    moves = out["moves"]
    assert all(_vertex_ok(engine, m) for m in moves) and moves[-2:] == ["pass", "pass"], moves
    assert 2 < len(moves) <= 164
    replay_into(engine, moves)
    assert engine._over()
    assert out["final_score"]["content"] == ok(engine, "final_score")

    # the analyses: info lines as Sabaki reads them, visits growing, and the next command stops each one
    for key, stop, count in (("lz", "az_jax", 5), ("kata", "B+73.5", 3)):
        session = out[key]
        assert not session["response"]["error"] and len(session["lines"]) >= count
        totals = []
        for line in session["lines"]:
            parsed = parse_info(line)
            assert parsed and all(m[0] != "E5" and _vertex_ok(engine, m[0]) for m in parsed)
            totals.append(sum(m[1] for m in parsed))
        assert all(a <= b for a, b in zip(totals, totals[1:])) and totals[-1] > totals[0], totals
        # the stopping command's answer came after the analysis ended: `name`; final_score of B E5 alone is 81 - 7.5
        assert session["stop"] == {"id": None, "content": stop, "error": False}
    lz = parse_info(out["lz"]["lines"][0])
    assert all(m[2] == int(m[2]) and m[3] == int(m[3]) for m in lz)  # 1/10000 integers
    kata = parse_info(out["kata"]["lines"][0])
    assert all(0 <= m[2] <= 1 and 0 <= m[3] <= 1 for m in kata)


def test_complete_game_against_gnugo_final_scores_agree(warm, run_dir):
    """az-jax gtp (Black) against GNU Go level 0 (White, Chinese rules, capturing every dead stone before it passes,
    seeded), refereed here until two passes in a row: GNU Go's final_score (which removes the stones it judges dead)
    equals ours (Tromp-Taylor, every stone alive) on the finished board, and both hold the same stones."""
    assert GNUGO, "gnugo is needed (Debian package gnugo; make system-deps)"
    gnugo_cmd = [GNUGO, "--mode", "gtp", "--level", "0", "--chinese-rules", "--capture-all-dead", "--seed", "1"]
    moves: list[str] = []
    with (
        gtp.GTPEngine(az_gtp(run_dir), env=az_env(), start_timeout=240, move_timeout=120) as az,
        gtp.GTPEngine(gnugo_cmd) as gnugo,
    ):
        for e in (az, gnugo):
            e.boardsize(N)
            e.komi(7.5)
            e.clear_board()
        players = {"black": az, "white": gnugo}
        while len(moves) < 2 * N * N and moves[-2:] != ["pass", "pass"]:
            colour = "black" if len(moves) % 2 == 0 else "white"
            mover = players[colour]
            move = mover.genmove(colour)
            assert move != "resign", moves  # az: --resign-threshold -1; GNU Go does not resign a won game
            (gnugo if mover is az else az).play(colour, move)  # the other engine takes it as legal
            moves.append(move)
        assert moves[-2:] == ["pass", "pass"], f"no end by passes in {len(moves)} plies"
        ours, theirs = az.final_score(), gnugo.final_score()
        black, white = gnugo.list_stones("black"), gnugo.list_stones("white")
        alive = set(az.send("final_status_list alive").split())
    assert go.parse_score(ours) == go.parse_score(theirs), (ours, theirs, moves)
    assert alive == black | white
    replay_into(warm, moves)  # and the engine here agrees stone by stone with GNU Go's board
    assert go.board_to_vertices(np.asarray(warm.state._x.board), N) == (black, white)
    assert ok(warm, "final_score") == ours
