"""Preempted and resumed: `az-jax train` sent SIGTERM mid-run (a spot VM's notice) finishes the iteration in flight,
saves it although no checkpoint was due, exits 143 with one line, and the resumed run ends bitwise equal to the
uninterrupted one with every iteration logged once."""

import os
import signal
import subprocess
import time

import chex

from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.metrics import read_metrics

from conftest import FAST_COMPILES
from test_kill import ITERATIONS, SETTINGS, _command, _final_state, _logged

# checkpoints only at the end: whatever SIGTERM saves is saved because of SIGTERM
NO_CHECKPOINTS = [s for s in SETTINGS if not s.startswith(("checkpoint_every", "keep_checkpoints"))]
NO_CHECKPOINTS += ["checkpoint_every=100", "keep_checkpoints=10"]


def _env() -> dict:
    return {**os.environ, **FAST_COMPILES, "XLA_FLAGS": ""}


def _run_command(run_dir: str) -> list[str]:
    command = _command(run_dir)
    head = command[: command.index("--set")]
    return head + [arg for s in NO_CHECKPOINTS for arg in ("--set", s)]


def test_sigterm_saves_the_iteration_in_flight_and_resumes_bitwise(tmp_path):
    straight = str(tmp_path / "straight")
    subprocess.run(_run_command(straight), env=_env(), check=True, capture_output=True, timeout=600)

    stopped = str(tmp_path / "stopped")
    proc = subprocess.Popen(_run_command(stopped), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while _logged(stopped) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be signalled"
    os.kill(proc.pid, signal.SIGTERM)  # during iteration 3 (or right after line 2)
    _, err = proc.communicate(timeout=300)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 143, err.decode()[-2000:]
    last = _logged(stopped)
    assert 2 <= last < ITERATIONS
    assert lines[-1] == (
        f"az-jax: error: stopped by SIGTERM after iteration {last}; checkpoint {last} is saved, run the same "
        "command to resume"
    )
    manager = ckpt.make_manager(stopped, read_only=True)
    assert manager.all_steps() == [last]  # no checkpoint was due (checkpoint_every=100): SIGTERM saved this one

    subprocess.run(_run_command(stopped), env=_env(), check=True, capture_output=True, timeout=600)
    assert [r["iteration"] for r in read_metrics(stopped)] == list(range(1, ITERATIONS + 1))
    chex.assert_trees_all_equal(_final_state(straight), _final_state(stopped))
