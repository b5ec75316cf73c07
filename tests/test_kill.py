"""Killed and resumed: `az-jax train` killed with SIGKILL at several points (mid-iteration, right after an iteration's
line, during a checkpoint write) and started again until it finishes ends bitwise equal to the uninterrupted run, and
its metrics.jsonl holds every iteration exactly once."""

import os
import signal
import subprocess
import sys
import time

import chex
import jax
import numpy as np

from az_jax.core.devices import make_mesh
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.metrics import read_metrics
from az_jax.runtime.trainer import Trainer

from conftest import FAST_COMPILES, TINY_NETWORK

ITERATIONS = 6
# Each `az-jax train` start costs ~20 s before its first iteration (imports, tracing and lowering the iteration, loading
# the compiled programs from the cache), while an iteration takes ~0.1 s: the kills, one start each, are the cost of
# this test. The first lands in a checkpoint write, the others at random points after a line.
KILLS = 3
SETTINGS = [
    *TINY_NETWORK,
    "selfplay_steps=4",
    "replay_capacity=256",
    "min_replay_size=16",
    "eval_every=0",
    "checkpoint_every=1",
    "keep_checkpoints=2",
    "train_ratio=1",
    f"num_iterations={ITERATIONS}",
]


def _command(run_dir: str) -> list[str]:
    sets = [arg for s in SETTINGS for arg in ("--set", s)]
    return [
        sys.executable,
        "-m",
        "az_jax.apps.cli",
        "--devices",
        "2",
        "train",
        "--game",
        "tic_tac_toe",
        "--run-dir",
        run_dir,
        "--no-progress",
        *sets,
    ]


def _env() -> dict:
    return {**os.environ, **FAST_COMPILES, "XLA_FLAGS": ""}


def _logged(run_dir: str) -> int:
    """Complete lines of metrics.jsonl (a killed write may leave a partial one)."""
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            return f.read().count("\n")
    except FileNotFoundError:
        return 0


def _unfinished_checkpoints(run_dir: str) -> int:
    """Checkpoint folders orbax had not finished (its temporary names) when the process died."""
    path = os.path.join(run_dir, "checkpoints")
    return sum("tmp" in name for name in os.listdir(path)) if os.path.isdir(path) else 0


def _final_state(run_dir: str):
    config = override(preset("tic_tac_toe", "small"), SETTINGS)
    manager = ckpt.make_manager(run_dir, read_only=True)
    assert max(manager.all_steps()) == ITERATIONS
    return jax.device_get(ckpt.restore(manager, ITERATIONS, Trainer(config, make_mesh()).abstract_state(), config))


def test_killed_at_random_points_and_resumed_is_the_uninterrupted_run(tmp_path):
    straight = str(tmp_path / "straight")
    subprocess.run(_command(straight), env=_env(), check=True, capture_output=True, timeout=600)

    killed = str(tmp_path / "killed")
    rng = np.random.default_rng(0)
    kills = mid_write = 0
    for _ in range(30):
        proc = subprocess.Popen(_command(killed), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if kills < KILLS:
            # Wait for the next iteration's line, then kill after 0-60 ms: inside the next iteration, or while the
            # asynchronous checkpoint of the one just logged is being written (every iteration writes one).
            target = _logged(killed) + 1
            deadline = time.monotonic() + 300
            while _logged(killed) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(0.0 if kills == 0 else rng.uniform(0.0, 0.06))  # the first kill lands in the save
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                kills += 1
                mid_write += _unfinished_checkpoints(killed)
                continue
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err.decode()[-2000:]
        break
    assert kills == KILLS, f"only {kills} kills landed before the run finished"
    assert mid_write >= 1, "no kill interrupted a checkpoint write"
    assert [r["iteration"] for r in read_metrics(killed)] == list(range(1, ITERATIONS + 1))
    chex.assert_trees_all_equal(_final_state(straight), _final_state(killed))
