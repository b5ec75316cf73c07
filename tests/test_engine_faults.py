"""Engine faults: fake engines (tests/fake_engines/fault_engine.py) that exit, hang, answer garbage or spawn children,
for the GTP and UCI clients (az_jax/engines/). Each fault must end in an EngineError subclass with a one-line message,
within the configured time-out, with no process of the engine's group left in the process table; and the group must be
ended on every exit path (close, an exception, Ctrl-C, garbage collection, interpreter exit)."""

import gc
import os
import signal
import subprocess
import sys
import threading
import time

import chess
import pytest

from az_jax.engines import EngineCrashed, EngineProtocolError, EngineTimeout, gtp, uci

from conftest import process_gone

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
        engine.boardsize(9)  # go_9x9
        return engine.genmove("black")
    return engine.play(chess.Board(), nodes=1)


def _assert_all_gone(pidfile) -> None:
    engine_pid, child_pid = _pids(pidfile)
    assert _group_left(engine_pid) == [], f"processes of the engine's group left: {_group_left(engine_pid)}"
    assert process_gone(engine_pid)
    assert child_pid == 0 or process_gone(child_pid), "the engine's child must end with it"


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
