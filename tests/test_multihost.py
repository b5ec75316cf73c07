"""Multi-process training: two `az-jax train` processes on CPU (one host device each, gloo collectives over loopback)
train one run, and that run is the run one process with both devices trains.

The single-process run (in this pytest process, on conftest.py's 2 host devices) trains 4 iterations and checkpoints
at 2 and 4. The two processes start from a copy of its checkpoint 2 (so both restore it through orbax, each reading
its own shards) and train iterations 3 and 4, with gradients and batch-norm statistics averaged across the two
processes, an evaluation at iteration 4 whose games are split over them, and a checkpoint at 4 that both write.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from az_jax.core.devices import make_mesh
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.evaluation.in_training import train_and_evaluate
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime import distributed
from az_jax.runtime.metrics import read_metrics
from az_jax.runtime.trainer import Trainer

from conftest import FAST_COMPILES, TINY_NETWORK

TINY = [
    *TINY_NETWORK,
    "selfplay_steps=4",
    "replay_capacity=256",
    "min_replay_size=16",
    "train_ratio=1",
    "checkpoint_every=2",
    "keep_checkpoints=5",
    "eval_games=8",
    "num_iterations=4",
]
# G = max(1, round(1 · 8 games · 4 plies / 16)) = 2 gradient steps per iteration once 16 positions have outcomes
# (tic-tac-toe games last 5-9 plies, so by iteration 2: 37 positions with outcomes in the run below).
WORKER = os.path.join(os.path.dirname(__file__), "multihost_worker.py")
TIMEOUT_S = 420


def _config(*extra):
    return override(preset("tic_tac_toe", "small"), TINY + list(extra))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_two_processes(tmp_path, run_dir, args):
    """Starts process 0 and 1 of `az-jax train ARGS` and waits for both; kills both on failure or timeout."""
    port = _free_port()
    env = {**os.environ, **FAST_COMPILES, "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    procs, logs = [], []
    try:
        for pid in range(2):
            log = open(tmp_path / f"process{pid}.log", "w")
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        WORKER,
                        str(tmp_path / f"process{pid}.npz"),
                        "--devices",
                        "1",
                        "train",
                        "--game",
                        "tic_tac_toe",
                        "--run-dir",
                        str(run_dir),
                        "--no-progress",
                        "--coordinator",
                        f"127.0.0.1:{port}",
                        "--num-processes",
                        "2",
                        "--process-id",
                        str(pid),
                        *args,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        # Wait for both, but stop at the deadline or as soon as one fails (its peer would wait for it in a collective).
        deadline = time.monotonic() + TIMEOUT_S
        while (
            any(p.poll() is None for p in procs)
            and time.monotonic() < deadline
            and not any(p.returncode for p in procs)
        ):
            time.sleep(0.5)
        codes = [p.poll() for p in procs]  # None: still running at the deadline, or beside a failed peer
    finally:
        for p in procs:  # no orphans
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs:
            log.close()
    tails = "\n".join(f"--- process {i} ---\n" + (tmp_path / f"process{i}.log").read_text()[-3000:] for i in range(2))
    assert codes == [0, 0], f"exit codes {codes}\n{tails}"
    return [dict(np.load(tmp_path / f"process{i}.npz")) for i in range(2)]


def _leaves(state) -> dict:
    return {
        jax.tree_util.keystr(path): np.asarray(leaf)
        for path, leaf in jax.tree_util.tree_leaves_with_path(jax.device_get(state))
    }


def test_two_processes_train_the_run_one_process_with_two_devices_trains(tmp_path, two_devices, fast_compiles):
    # XLA's optimisation passes off here and in the two processes (conftest.py): tiny programs, compile-bound.
    # The reference: one process, both devices, 4 iterations straight (evaluation at 4, as in the two-process run).
    reference = _leaves(train_and_evaluate(_config("eval_every=4"), str(tmp_path / "single"), progress=False))
    single = read_metrics(str(tmp_path / "single"))

    run = tmp_path / "multi"
    shutil.copytree(tmp_path / "single" / "checkpoints" / "2", run / "checkpoints" / "2")
    local = _run_two_processes(tmp_path, run, [a for kv in TINY + ["eval_every=4"] for a in ("--set", kv)])

    # Each process holds its own copy of the replicated state; the copies are bitwise identical.
    replicated = [k for k in reference if k.startswith((".params", ".batch_stats", ".opt_state", ".key"))]
    assert len(replicated) > 20 and set(local[0]) == set(local[1]) == set(reference)
    for k in replicated + [".iteration"]:
        np.testing.assert_array_equal(local[0][k], local[1][k], err_msg=k)
    assert int(local[0][".iteration"]) == 4
    # Process i played the games of device i of the single-process run: its shards are that device's rows.
    for k in reference:
        if k.startswith((".games", ".replay")):
            half = reference[k].shape[0] // 2
            np.testing.assert_array_equal(local[0][k], reference[k][:half], err_msg=k)
            np.testing.assert_array_equal(local[1][k], reference[k][half:], err_msg=k)
    # Iterations 3 and 4 trained (2 steps each), with the gradients averaged over both processes: the parameters
    # are the single-process run's, up to float reassociation (the tolerance of tests/test_parallel.py).
    multi = read_metrics(str(run))
    assert [m["train/steps"] for m in single[2:]] == [2, 2]
    for k in replicated:
        np.testing.assert_allclose(local[0][k], reference[k], rtol=1e-5, atol=1e-5, err_msg=k)
    # Only process 0 wrote metrics (one record per iteration, not two) and TensorBoard events.
    assert [m["iteration"] for m in multi] == [3, 4]
    assert len(os.listdir(run / "tensorboard")) == 1
    assert (run / "config.json").exists()
    # The evaluation gathered the 8 games of both processes (4 each) and scored them as the single process did.
    eval_keys = ["eval/vs_random_wins", "eval/vs_random_draws", "eval/vs_random_losses"]
    assert sum(multi[-1][k] for k in eval_keys) == 8
    assert {k: multi[-1][k] for k in eval_keys} == {k: single[-1][k] for k in eval_keys}
    for k in ("train/loss", "train/value_loss", "replay/positions_with_outcome", "selfplay/games_finished"):
        np.testing.assert_allclose(multi[-1][k], single[-1][k], rtol=1e-5, err_msg=k)

    # The checkpoint both processes wrote at 4 restores in one process, bitwise what the processes held.
    config = _config("eval_every=4")
    manager = ckpt.make_manager(str(run), read_only=True)
    assert sorted(manager.all_steps()) == [2, 4]
    restored = _leaves(ckpt.restore(manager, 4, Trainer(config, make_mesh(two_devices)).abstract_state(), config))
    for k in restored:
        expected = local[0][k] if k in replicated or k == ".iteration" else np.concatenate([local[0][k], local[1][k]])
        np.testing.assert_array_equal(restored[k], expected, err_msg=k)


def test_settings_come_from_arguments_then_the_environment():
    env = {"AZ_JAX_COORDINATOR": "10.0.0.1:1234", "AZ_JAX_NUM_PROCESSES": "4", "AZ_JAX_PROCESS_ID": "3"}
    assert distributed.resolve_settings(environ=env) == distributed.ProcessSettings("10.0.0.1:1234", 4, 3)
    assert distributed.resolve_settings("h:1", 2, 0, environ=env) == distributed.ProcessSettings("h:1", 2, 0)
    # JAX's own variable names the coordinator too; nothing set is a single-process run.
    assert distributed.resolve_settings(environ={"JAX_COORDINATOR_ADDRESS": "h:2"}).coordinator_address == "h:2"
    assert distributed.resolve_settings(environ={}) == distributed.ProcessSettings(None, None, None)
    with pytest.raises(distributed.DistributedError, match="number of processes must be an integer"):
        distributed.resolve_settings(environ={"AZ_JAX_NUM_PROCESSES": "two"})


def test_launchers_jax_detects_by_itself():
    slurm = {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "node[1-2]", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}
    assert distributed.detect_cluster({**slurm, "SLURM_NTASKS": "2"}) == "slurm"
    assert distributed.detect_cluster({**slurm, "SLURM_NTASKS": "1"}) is None  # one task: single process
    assert distributed.detect_cluster({"OMPI_MCA_orte_hnp_uri": "x", "OMPI_COMM_WORLD_SIZE": "4"}) == "open-mpi"
    assert distributed.detect_cluster({"TPU_WORKER_HOSTNAMES": "w0,w1"}) == "cloud-tpu"  # GKE TPU slice
    assert distributed.detect_cluster({}) is None  # this machine: no TPU


@pytest.mark.parametrize(
    "settings, needle",
    [
        (("h:1", None, None), "needs all of --coordinator HOST:PORT, --num-processes N and --process-id I"),
        ((None, 2, 1), "needs all of"),
        (("h", 2, 1), "the coordinator must be HOST:PORT, got 'h'"),
        (("h:99999", 2, 1), "must be HOST:PORT"),
        (("h:1", 0, 0), "the number of processes must be at least 1, got 0"),
        (("h:1", 2, 2), "the process id must be in 0..1, got 2"),
    ],
)
def test_bad_settings_are_refused(settings, needle):
    with pytest.raises(distributed.DistributedError, match=re.escape(needle)):
        distributed.validate(distributed.ProcessSettings(*settings), cluster=None)


def test_incomplete_flags_are_a_one_line_cli_error(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "az_jax.apps.cli",
            "--devices",
            "1",
            "train",
            "--game",
            "tic_tac_toe",
            "--run-dir",
            str(tmp_path / "run"),
            "--coordinator",
            "127.0.0.1:1234",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XLA_FLAGS": ""},
    )
    assert result.returncode == 2
    lines = [l for l in result.stderr.splitlines() if l.startswith("az-jax: error:")]
    assert len(lines) == 1 and "needs all of --coordinator" in lines[0], result.stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_sigterm_to_one_process_stops_both_at_the_same_iteration(tmp_path):
    # A preempted host of a slice: SIGTERM reaches process 1 only. Each iteration the processes gather their flags
    # (az_jax/runtime/preemption.py), so both finish the same iteration, write its checkpoint together and exit 143 with
    # the same line; no checkpoint was due (checkpoint_every=100).
    run = tmp_path / "run"
    port = _free_port()
    env = {**os.environ, **FAST_COMPILES, "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    sets = [
        a
        for kv in TINY_NETWORK
        + [
            "selfplay_steps=4",
            "replay_capacity=256",
            "min_replay_size=16",
            "eval_every=0",
            "checkpoint_every=100",
            "num_iterations=200",
        ]
        for a in ("--set", kv)
    ]
    procs = []
    try:
        for pid in range(2):
            command = [sys.executable, "-m", "az_jax.apps.cli", "--devices", "1", "train", "--game", "tic_tac_toe"]
            command += ["--run-dir", str(run), "--no-progress", "--coordinator", f"127.0.0.1:{port}"]
            command += ["--num-processes", "2", "--process-id", str(pid), *sets]
            procs.append(
                subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
            )
        deadline = time.monotonic() + TIMEOUT_S
        metrics = run / "metrics.jsonl"  # process 0's
        while (not metrics.exists() or metrics.read_text().count("\n") < 2) and time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs]
            time.sleep(0.01)
        procs[1].send_signal(signal.SIGTERM)
        errors = [p.communicate(timeout=TIMEOUT_S)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [143, 143], errors
    last = [e.strip().splitlines()[-1] for e in errors]
    logged = metrics.read_text().count("\n")
    assert 2 <= logged < 200
    expected = (
        f"az-jax: error: stopped by SIGTERM after iteration {logged}; checkpoint {logged} is saved, run the same "
    )
    assert last == [expected + "command to resume"] * 2, errors
    assert ckpt.make_manager(str(run), read_only=True).all_steps() == [logged]
