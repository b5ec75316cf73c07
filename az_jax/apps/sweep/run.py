"""Running a sweep's trials: each an `az-jax train` process in its own run dir under the sweep dir, pinned to its own
group of devices; finished trials are skipped on a re-run.

Parallelism: `parallel` trials run at once, each a separate process pinned to its own group of devices: on CPU a
group is a set of cores (CPU affinity, and one JAX host device per core); on GPU a set of GPUs
(CUDA_VISIBLE_DEVICES); on TPU one chip (TPU_VISIBLE_CHIPS and one-chip process bounds; not tried here). With
`shard=(i, n)` a host runs the trials whose index is i mod n, so n hosts sharing the sweep dir split one sweep. The
trials share a persistent XLA compilation cache under the sweep dir (trials that differ only in their seed compile
their training iteration once).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence

from az_jax.apps.sweep.spec import Sweep, SweepError, Trial
from az_jax.core import config as config_lib

PLATFORMS = ("cpu", "gpu", "tpu")
DONE_FILE = "done.json"  # written in a trial dir when its process exits 0
TRIAL_FILE = "trial.json"  # the trial's overrides: a re-run with a different spec is refused
CACHE_DIR = "xla_cache"  # the trials' shared persistent compilation cache, under the sweep dir
LogFn = Callable[[str], None]


# --- devices -------------------------------------------------------------------------------------------------------
def parse_shard(text: str | None) -> tuple[int, int]:
    """'I/N' -> (I, N) with 0 <= I < N."""
    if not text:
        return 0, 1
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match or not 0 <= int(match[1]) < int(match[2]):
        raise SweepError(f"--shard must be I/N with 0 <= I < N, got {text!r}")
    return int(match[1]), int(match[2])


def device_groups(ids: Sequence[int], parallel: int) -> list[tuple[int, ...]]:
    """Splits device (or core) ids into `parallel` equal contiguous groups; leftover ids stay unused."""
    if parallel <= 0:
        raise SweepError(f"--parallel must be positive, got {parallel}")
    if len(ids) < parallel:
        raise SweepError(
            f"--parallel {parallel} needs at least {parallel} devices/cores, have {len(ids)}: {','.join(map(str, ids))}"
        )
    size = len(ids) // parallel
    return [tuple(ids[i * size : (i + 1) * size]) for i in range(parallel)]


def parse_ids(text: str | None, available: Sequence[int]) -> list[int]:
    """'0,1,4-7' -> [0, 1, 4, 5, 6, 7]; None -> `available`."""
    if text is None:
        return list(available)
    ids: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise SweepError(f"--devices must be ids like 0,1,4-7, got {text!r}")
        low, high = int(match[1]), int(match[2] or match[1])
        outside = [i for i in (low, high) if i not in available]
        if outside or low > high:  # checked before the range is built: '0-99999999999' names no real device
            raise SweepError(
                f"--devices {text!r}: {part.strip()} is not a range of available ids "
                f"(have {','.join(map(str, available))})"
            )
        ids.extend(range(low, high + 1))
    if len(set(ids)) != len(ids) or not ids:
        raise SweepError(f"--devices lists no device or one twice: {text!r}")
    missing = [i for i in ids if i not in available]
    if missing:
        raise SweepError(f"--devices {missing[0]} is not available (have {','.join(map(str, available))})")
    return ids


def available_ids(platform: str) -> list[int]:
    """Cores this process may run on (CPU), or the accelerators of `platform` (counted by a short JAX process, so
    that this process never starts an accelerator backend)."""
    if platform == "cpu":
        return sorted(os.sched_getaffinity(0))
    out = subprocess.run(
        [sys.executable, "-c", "import jax; print(jax.local_device_count())"],
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": platform},
    )
    if out.returncode != 0:
        raise SweepError(f"no {platform} devices: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return list(range(int(out.stdout.strip().splitlines()[-1])))


def detect_platform() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import jax; print(jax.default_backend())"], capture_output=True, text=True
    )
    backend = (out.stdout.strip().splitlines() or ["cpu"])[-1]
    return backend if backend in PLATFORMS else "cpu"


def trial_env(platform: str, group: Sequence[int], slot: int, cache_dir: str | None = None) -> dict:
    """The environment of a trial process that may only use the devices in `group`. With `cache_dir` (and no
    JAX_COMPILATION_CACHE_DIR set already) the trials share XLA's persistent compilation cache: trials that differ
    only in their seed compile the training iteration once."""
    env = dict(os.environ)
    if cache_dir is not None and not env.get("JAX_COMPILATION_CACHE_DIR"):
        env["JAX_COMPILATION_CACHE_DIR"] = os.path.abspath(cache_dir)
    flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "", env.get("XLA_FLAGS", "")).strip()
    env["XLA_FLAGS"] = flags
    ids = ",".join(map(str, group))
    if platform == "gpu":
        env["CUDA_VISIBLE_DEVICES"] = ids
    elif platform == "tpu":
        if len(group) != 1:
            raise SweepError("on TPU each parallel trial gets one chip: use --parallel equal to the chips given")
        env.update(
            TPU_VISIBLE_CHIPS=ids,
            TPU_CHIPS_PER_PROCESS_BOUNDS="1,1,1",
            TPU_PROCESS_BOUNDS="1,1,1",
            TPU_PROCESS_PORT=str(8476 + slot),
            TPU_MESH_CONTROLLER_PORT=str(8476 + slot),
        )
    return env


def trial_command(sweep: Sweep, trial: Trial, run_dir: str, platform: str, group: Sequence[int]) -> list[str]:
    cmd = [sys.executable, "-m", "az_jax.apps.cli"]
    if platform == "cpu":
        cmd += ["--devices", str(len(group))]
    cmd += ["train", "--game", sweep.game, "--preset", sweep.preset, "--run-dir", run_dir, "--no-progress"]
    for assignment in (*sweep.base, *trial.overrides):
        cmd += ["--set", assignment]
    return cmd


# --- running -------------------------------------------------------------------------------------------------------
def trial_dir(sweep_dir: str, trial: Trial) -> str:
    return os.path.join(sweep_dir, trial.name)


def is_finished(run_dir: str, config: config_lib.Config) -> bool:
    """Its process exited 0 (done.json), or its final checkpoint exists (killed after training ended)."""
    return os.path.exists(os.path.join(run_dir, DONE_FILE)) or os.path.isdir(
        os.path.join(run_dir, "checkpoints", str(config.num_iterations))
    )


def _trial_record(sweep: Sweep, trial: Trial) -> dict:
    return {
        "game": sweep.game,
        "preset": sweep.preset,
        "set": list(sweep.base),
        "overrides": list(trial.overrides),
        "params": trial.params,
    }


def check_sweep_dir(sweep: Sweep, sweep_dir: str) -> None:
    """A trial dir that another spec made (other overrides under the same name) is an error, before anything runs."""
    for trial in sweep.trials:
        path = os.path.join(trial_dir(sweep_dir, trial), TRIAL_FILE)
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
            if saved != _trial_record(sweep, trial):
                raise SweepError(
                    f"{os.path.dirname(path)} holds another sweep's trial ({saved.get('overrides')} vs "
                    f"{list(trial.overrides)}); use another --sweep-dir"
                )


def write_sweep_file(sweep: Sweep, sweep_dir: str, spec: dict) -> None:
    os.makedirs(sweep_dir, exist_ok=True)
    with open(os.path.join(sweep_dir, "sweep.json"), "w") as f:
        json.dump(
            {
                "spec": spec,
                "set": list(sweep.base),
                "trials": [
                    {"index": t.index, "name": t.name, "params": t.params, "overrides": list(t.overrides)}
                    for t in sweep.trials
                ],
            },
            f,
            indent=2,
        )


def run_trial(
    sweep: Sweep,
    trial: Trial,
    sweep_dir: str,
    platform: str,
    group: Sequence[int],
    slot: int,
    processes: dict,
    lock: threading.Lock,
) -> tuple[int, float]:
    """Runs one trial to the end in its own process (output in its train.log); returns (exit status, seconds)."""
    run_dir = trial_dir(sweep_dir, trial)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, TRIAL_FILE), "w") as f:
        json.dump(_trial_record(sweep, trial), f, indent=2)
    cmd = trial_command(sweep, trial, run_dir, platform, group)
    cores = set(group) if platform == "cpu" else None
    started = time.time()
    with open(os.path.join(run_dir, "train.log"), "a") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        with warnings.catch_warnings():  # JAX warns about fork() in a threaded process; the child only exec()s
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=trial_env(platform, group, slot, os.path.join(sweep_dir, CACHE_DIR)),
            )
        if cores:  # before the child starts JAX (seconds later): its XLA thread pools size themselves to these cores
            os.sched_setaffinity(proc.pid, cores)
        with lock:
            processes[trial.index] = proc
        code = proc.wait()
        with lock:
            processes.pop(trial.index, None)
    ended = time.time()
    if code == 0:
        with open(os.path.join(run_dir, DONE_FILE), "w") as f:
            json.dump(
                {
                    "started": started,
                    "ended": ended,
                    "seconds": ended - started,
                    "devices": list(group),
                    "platform": platform,
                },
                f,
            )
    return code, ended - started


def run_sweep(
    sweep: Sweep,
    sweep_dir: str,
    *,
    groups: Sequence[Sequence[int]],
    platform: str = "cpu",
    shard: tuple[int, int] = (0, 1),
    log: LogFn = print,
) -> dict[int, str]:
    """Runs this shard's unfinished trials, len(groups) at a time, trial k on the next free group. Returns
    {trial index: "done" | "skipped" | "failed (exit N)"}. Ctrl-C stops every running trial (they resume later)."""
    index, count = shard
    mine = [t for t in sweep.trials if t.index % count == index]
    status = {}
    todo = []
    for trial in mine:
        if is_finished(trial_dir(sweep_dir, trial), trial.config):
            status[trial.index] = "skipped"
        else:
            todo.append(trial)
    log(
        f"{len(mine)} trials in this shard: {len(mine) - len(todo)} finished already, {len(todo)} to run, "
        f"{len(groups)} at a time on {platform} devices {' | '.join(','.join(map(str, g)) for g in groups)}"
    )
    free: queue.Queue = queue.Queue()
    for slot in range(len(groups)):
        free.put(slot)
    processes: dict = {}
    lock = threading.Lock()

    def work(trial: Trial) -> None:
        slot = free.get()
        try:
            log(f"trial {trial.name}: started on {','.join(map(str, groups[slot]))}")
            code, seconds = run_trial(sweep, trial, sweep_dir, platform, groups[slot], slot, processes, lock)
            status[trial.index] = "done" if code == 0 else f"failed (exit {code})"
            log(
                f"trial {trial.name}: {status[trial.index]} after {seconds / 60:.1f} min"
                + ("" if code == 0 else f"; see {os.path.join(trial_dir(sweep_dir, trial), 'train.log')}")
            )
        finally:
            free.put(slot)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(groups))
    futures = []
    try:
        futures = [pool.submit(work, t) for t in todo]
        for future in futures:
            future.result()
    except KeyboardInterrupt:
        for future in futures:
            future.cancel()
        with lock:
            for proc in processes.values():
                proc.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return status
