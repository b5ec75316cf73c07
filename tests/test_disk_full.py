"""Disk full while saving: a checkpoint write that fails (here the file-size limit of RLIMIT_FSIZE, which makes a write
fail as a full disk does, without root) ends `az-jax train` with one line and a non-zero status; the checkpoints
already written stay whole and readable, and the same command, once there is room, resumes to the run's end, bitwise
equal to the run that was never stopped."""

import os
import subprocess
import sys

import chex

from az_jax.core.devices import make_mesh
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.metrics import read_metrics
from az_jax.runtime.trainer import Trainer

from test_kill import ITERATIONS, SETTINGS, _command, _env, _final_state


def _at_most(size: int, command: list[str]) -> list[str]:
    """`command` run with writes past `size` bytes a file failing (EFBIG), not killing it (SIGXFSZ ignored)."""
    limit = (
        "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({size}, {size})); os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", limit, *command]


def _largest_file(path: str) -> int:
    return max(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def test_a_failed_save_keeps_the_checkpoints_and_the_run_resumes(tmp_path):
    straight = str(tmp_path / "straight")
    subprocess.run(_command(straight), env=_env(), check=True, capture_output=True, timeout=600)

    run = str(tmp_path / "run")
    first = _command(run)
    first[first.index(f"num_iterations={ITERATIONS}")] = "num_iterations=3"
    subprocess.run(first, env=_env(), check=True, capture_output=True, timeout=600)
    manager = ckpt.make_manager(run, read_only=True)
    assert manager.all_steps() == [2, 3]  # keep_checkpoints=2
    largest = _largest_file(os.path.join(run, "checkpoints", "3"))

    # the next checkpoint's largest file cannot be written: the save of iteration 4 fails
    full = subprocess.run(_at_most(largest - 1, _command(run)), env=_env(), capture_output=True, text=True, timeout=600)
    lines = full.stderr.strip().splitlines()
    assert full.returncode == 2, full.stderr[-3000:]
    assert len(lines) == 2, full.stderr[-3000:]  # the run's first line, then the error
    assert lines[-1].startswith("az-jax: error: could not save checkpoint 4 ("), lines[-1]
    assert lines[-1].endswith("); checkpoints 2, 3 are whole: make room and run the same command to resume"), lines[-1]
    manager = ckpt.make_manager(run, read_only=True)
    assert manager.all_steps() == [2, 3]
    config = override(preset("tic_tac_toe", "small"), SETTINGS)
    restored = ckpt.restore(manager, 3, Trainer(config, make_mesh()).abstract_state(), config)  # whole, verified
    assert int(restored.iteration) == 3

    subprocess.run(_command(run), env=_env(), check=True, capture_output=True, timeout=600)
    assert [r["iteration"] for r in read_metrics(run)] == list(range(1, ITERATIONS + 1))
    chex.assert_trees_all_equal(_final_state(straight), _final_state(run))
