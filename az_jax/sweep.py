"""Hyperparameter sweeps: one JSON spec -> trials (grid × random samples × seeds), each an `az-jax train` process in
its own run dir under the sweep dir; finished trials are skipped on a re-run; the final metrics go into one CSV table
with plots.

A spec (every key but "game" optional):

    {"name": "c4_simulations",                       # default sweep dir: runs/sweeps/<name>
     "game": "connect_four", "preset": "small",
     "set": ["num_iterations=20", "eval_games=100"],  # base overrides, as `--set` takes them
     "grid": {"num_simulations": [8, 16, 32, 64],     # every combination of the grid's axes ...
              "schedule": [{"label": "0.02", "learning_rates": [0.02], "lr_boundaries": []},
                           {"label": "0.02>0.002@160", "learning_rates": [0.02, 0.002], "lr_boundaries": [160]}]},
     "random": {"c_init": {"uniform": [0.5, 2.5]},    # ... times num_samples random draws (uniform, log_uniform,
                "weight_decay": {"log_uniform": [1e-5, 1e-3]}},   # int [lo, hi] inclusive, choice [values]) ...
     "num_samples": 4, "sample_seed": 0,
     "seeds": [0, 1]}                                  # ... times these seeds (default: the preset's one seed)

A grid axis named after a config key takes that key's values; an axis with another name ("schedule") takes objects
that set several keys at once (with an optional "label" for tables). Every trial's config is built and validated
before any process starts: a bad key or value is a ConfigError naming the trial.

Parallelism: `parallel` trials run at once, each a separate process pinned to its own group of devices: on CPU a
group is a set of cores (CPU affinity, and one JAX host device per core); on GPU a set of GPUs
(CUDA_VISIBLE_DEVICES); on TPU one chip (TPU_VISIBLE_CHIPS and one-chip process bounds; not tried here). With
`shard=(i, n)` a host runs the trials whose index is i mod n, so n hosts sharing the sweep dir split one sweep. The
trials share a persistent XLA compilation cache under the sweep dir (trials that differ only in their seed compile
their training iteration once).
"""
from __future__ import annotations

import concurrent.futures
import csv
import dataclasses
import itertools
import json
import math
import os
import queue
import re
import subprocess
import sys
import threading
import time
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from az_jax import config as config_lib
from az_jax.config import ConfigError

SPEC_KEYS = ("name", "description", "game", "preset", "set", "grid", "random", "num_samples", "sample_seed", "seeds")
DISTRIBUTIONS = ("uniform", "log_uniform", "int", "choice")
PLATFORMS = ("cpu", "gpu", "tpu")
DONE_FILE = "done.json"      # written in a trial dir when its process exits 0
TRIAL_FILE = "trial.json"    # the trial's overrides: a re-run with a different spec is refused
CACHE_DIR = "xla_cache"      # the trials' shared persistent compilation cache, under the sweep dir
LogFn = Callable[[str], None]


class SweepError(ConfigError):
    """A bad sweep spec, flag or sweep dir (one-line message)."""


@dataclasses.dataclass(frozen=True)
class Trial:
    index: int                      # position in the sweep (grid-major, then samples, then seeds)
    name: str                       # its run dir's name under the sweep dir
    params: dict                    # {axis: value or label}: what varies across the sweep, seed included
    overrides: tuple[str, ...]      # `--set` strings after the spec's base `set` (what makes this trial this trial)
    config: config_lib.Config       # the resolved config the trial trains


@dataclasses.dataclass(frozen=True)
class Sweep:
    name: str
    game: str
    preset: str
    base: tuple[str, ...]           # the spec's `set` plus any extra `--set` of the command
    trials: tuple[Trial, ...]
    axes: tuple[str, ...]           # the params' keys, in column order (grid axes, random keys, "seed")


# --- the spec ------------------------------------------------------------------------------------------------------
def load_spec(path: str) -> dict:
    try:
        with open(path) as f:
            spec = json.load(f)
    except OSError as e:
        raise SweepError(f"cannot read sweep spec {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise SweepError(f"sweep spec {path} is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise SweepError(f"sweep spec {path} must be a JSON object")
    return spec


def cli_value(value: Any) -> str:
    """A config value as `--set key=VALUE` takes it: tuples joined with ',' (';' for strings), bools true/false."""
    if isinstance(value, (list, tuple)):
        return (";" if any(isinstance(v, str) for v in value) else ",").join(cli_value(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _label(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("label") or ";".join(f"{k}={cli_value(v)}" for k, v in value.items() if k != "label"))
    return cli_value(value)


def _axis_assignments(axis: str, value: Any) -> dict:
    """{config key: value} of one grid value: the axis itself, or the keys of an object value."""
    if isinstance(value, dict):
        assignments = {k: v for k, v in value.items() if k != "label"}
        if not assignments:
            raise SweepError(f"grid axis {axis!r}: an object value must set at least one config key")
        return assignments
    if axis not in config_lib.FIELDS:
        raise SweepError(f"grid axis {axis!r} is not a config key (its values must then be objects of config keys); "
                         f"known keys: {', '.join(config_lib.FIELDS)}")
    return {axis: value}


def _sample(key: str, dist: Any, rng: np.random.Generator) -> Any:
    if not (isinstance(dist, dict) and len(dist) == 1 and next(iter(dist)) in DISTRIBUTIONS):
        raise SweepError(f"random: {key!r} needs one of {', '.join(DISTRIBUTIONS)}, e.g. {{\"uniform\": [0.1, 1]}}; "
                         f"got {dist!r}")
    kind, args = next(iter(dist.items()))
    if kind == "choice":
        if not isinstance(args, list) or not args:
            raise SweepError(f"random: {key!r} choice needs a non-empty list")
        return args[int(rng.integers(len(args)))]
    if not (isinstance(args, list) and len(args) == 2 and all(isinstance(a, (int, float)) for a in args)
            and args[0] <= args[1]):
        raise SweepError(f"random: {key!r} {kind} needs [low, high] with low <= high, got {args!r}")
    low, high = args
    if kind == "int":
        return int(rng.integers(int(low), int(high) + 1))
    if kind == "log_uniform":
        if low <= 0:
            raise SweepError(f"random: {key!r} log_uniform needs low > 0, got {low}")
        return float(f"{math.exp(rng.uniform(math.log(low), math.log(high))):.4g}")
    return float(f"{rng.uniform(low, high):.4g}")


def _trial_name(index: int, params: dict) -> str:
    text = "_".join(f"{k}={v}" for k, v in params.items())
    return f"{index:03d}_" + re.sub(r"[^A-Za-z0-9._,=+-]+", "-", text)[:100]


def build_sweep(spec: dict, extra_set: Sequence[str] = (), num_devices: int = 1) -> Sweep:
    """Expands a spec into trials and checks every trial's config (validated for `num_devices` devices per trial).
    Raises SweepError / ConfigError (one line, naming the trial) before anything runs."""
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise SweepError(f"unknown sweep spec key {unknown[0]!r}; known: {', '.join(SPEC_KEYS)}")
    if "game" not in spec:
        raise SweepError("the sweep spec needs a \"game\"")
    game, preset = spec["game"], spec.get("preset", "small")
    base = list(spec.get("set", [])) + list(extra_set)
    if not all(isinstance(s, str) for s in base):
        raise SweepError("\"set\" must be a list of \"key=value\" strings")
    base_config = config_lib.override(config_lib.preset(game, preset), base)
    grid = spec.get("grid", {})
    random_keys = spec.get("random", {})
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise SweepError("\"grid\" must map each axis to a non-empty list of values")
    if not isinstance(random_keys, dict):
        raise SweepError("\"random\" must map config keys to distributions")
    for key in random_keys:
        if key not in config_lib.FIELDS:
            raise SweepError(f"random: {key!r} is not a config key; known keys: {', '.join(config_lib.FIELDS)}")
    num_samples = int(spec.get("num_samples", 1 if random_keys else 0) or 0)
    if random_keys and num_samples <= 0:
        raise SweepError("\"num_samples\" must be positive when \"random\" is given")
    seeds = spec.get("seeds", [base_config.seed])
    if not (isinstance(seeds, list) and seeds and all(isinstance(s, int) and not isinstance(s, bool)
                                                       for s in seeds)):
        raise SweepError(f"\"seeds\" must be a non-empty list of integers, got {seeds!r}")
    if "seed" in grid or "seed" in random_keys:
        raise SweepError("sweep seeds with \"seeds\", not as a grid or random axis")

    rng = np.random.default_rng(int(spec.get("sample_seed", 0)))
    samples = [{k: _sample(k, d, rng) for k, d in random_keys.items()} for _ in range(num_samples)] or [{}]
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())] if grid else [{}]
    trials = []
    for point in points:
        for sample in samples:
            for seed in seeds:
                index = len(trials)
                params = {**{a: _label(v) for a, v in point.items()}, **{k: cli_value(v) for k, v in sample.items()},
                          "seed": str(seed)}
                assignments = {}
                for axis, value in point.items():
                    assignments.update(_axis_assignments(axis, value))
                assignments.update(sample)
                assignments["seed"] = seed
                try:
                    config = config_lib.override(base_config, assignments).validate(num_devices)
                except ConfigError as e:
                    raise SweepError(f"trial {index} ({', '.join(f'{k}={v}' for k, v in params.items())}): {e}") \
                        from None
                overrides = tuple(f"{k}={cli_value(getattr(config, k))}" for k in assignments)
                # What the process will rebuild from the command line is exactly this config.
                assert config_lib.override(config_lib.preset(game, preset), base + list(overrides)) == config
                trials.append(Trial(index, _trial_name(index, params), params, overrides, config))
    axes = tuple(trials[0].params)
    return Sweep(name=str(spec.get("name", game)), game=game, preset=preset, base=tuple(base), trials=tuple(trials),
                 axes=axes)


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
        raise SweepError(f"--parallel {parallel} needs at least {parallel} devices/cores, have {len(ids)}: "
                         f"{','.join(map(str, ids))}")
    size = len(ids) // parallel
    return [tuple(ids[i * size:(i + 1) * size]) for i in range(parallel)]


def parse_ids(text: str | None, available: Sequence[int]) -> list[int]:
    """'0,1,4-7' -> [0, 1, 4, 5, 6, 7]; None -> `available`."""
    if text is None:
        return list(available)
    ids = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise SweepError(f"--devices must be ids like 0,1,4-7, got {text!r}")
        low, high = int(match[1]), int(match[2] or match[1])
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
    out = subprocess.run([sys.executable, "-c", "import jax; print(jax.local_device_count())"], capture_output=True,
                         text=True, env={**os.environ, "JAX_PLATFORMS": platform})
    if out.returncode != 0:
        raise SweepError(f"no {platform} devices: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return list(range(int(out.stdout.strip().splitlines()[-1])))


def detect_platform() -> str:
    out = subprocess.run([sys.executable, "-c", "import jax; print(jax.default_backend())"], capture_output=True,
                         text=True)
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
        env.update(TPU_VISIBLE_CHIPS=ids, TPU_CHIPS_PER_PROCESS_BOUNDS="1,1,1", TPU_PROCESS_BOUNDS="1,1,1",
                   TPU_PROCESS_PORT=str(8476 + slot), TPU_MESH_CONTROLLER_PORT=str(8476 + slot))
    return env


def trial_command(sweep: Sweep, trial: Trial, run_dir: str, platform: str, group: Sequence[int]) -> list[str]:
    cmd = [sys.executable, "-m", "az_jax.cli"]
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
    return (os.path.exists(os.path.join(run_dir, DONE_FILE))
            or os.path.isdir(os.path.join(run_dir, "checkpoints", str(config.num_iterations))))


def _trial_record(sweep: Sweep, trial: Trial) -> dict:
    return {"game": sweep.game, "preset": sweep.preset, "set": list(sweep.base), "overrides": list(trial.overrides),
            "params": trial.params}


def check_sweep_dir(sweep: Sweep, sweep_dir: str) -> None:
    """A trial dir that another spec made (other overrides under the same name) is an error, before anything runs."""
    for trial in sweep.trials:
        path = os.path.join(trial_dir(sweep_dir, trial), TRIAL_FILE)
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
            if saved != _trial_record(sweep, trial):
                raise SweepError(f"{os.path.dirname(path)} holds another sweep's trial ({saved.get('overrides')} vs "
                                 f"{list(trial.overrides)}); use another --sweep-dir")


def write_sweep_file(sweep: Sweep, sweep_dir: str, spec: dict) -> None:
    os.makedirs(sweep_dir, exist_ok=True)
    with open(os.path.join(sweep_dir, "sweep.json"), "w") as f:
        json.dump({"spec": spec, "set": list(sweep.base),
                   "trials": [{"index": t.index, "name": t.name, "params": t.params, "overrides": list(t.overrides)}
                              for t in sweep.trials]}, f, indent=2)


def run_trial(sweep: Sweep, trial: Trial, sweep_dir: str, platform: str, group: Sequence[int], slot: int,
              processes: dict, lock: threading.Lock) -> tuple[int, float]:
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
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    env=trial_env(platform, group, slot, os.path.join(sweep_dir, CACHE_DIR)))
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
            json.dump({"started": started, "ended": ended, "seconds": ended - started, "devices": list(group),
                       "platform": platform}, f)
    return code, ended - started


def run_sweep(sweep: Sweep, sweep_dir: str, *, groups: Sequence[Sequence[int]], platform: str = "cpu",
              shard: tuple[int, int] = (0, 1), log: LogFn = print) -> dict[int, str]:
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
    log(f"{len(mine)} trials in this shard: {len(mine) - len(todo)} finished already, {len(todo)} to run, "
        f"{len(groups)} at a time on {platform} devices {' | '.join(','.join(map(str, g)) for g in groups)}")
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
            log(f"trial {trial.name}: {status[trial.index]} after {seconds / 60:.1f} min"
                + ("" if code == 0 else f"; see {os.path.join(trial_dir(sweep_dir, trial), 'train.log')}"))
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


# --- results -------------------------------------------------------------------------------------------------------
def read_records(run_dir: str) -> list[dict]:
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def final_metrics(records: list[dict]) -> dict:
    """The last iteration's metrics, each eval/ metric from the last iteration that has it, and the mean
    positions/s over all iterations but the first (which includes compilation). No "time": it is a timestamp."""
    if not records:
        return {}
    out = {k: v for k, v in records[-1].items() if not k.startswith(("eval/", "time"))}
    for record in records:
        out.update({k: v for k, v in record.items() if k.startswith("eval/")})
    steady = [r["perf/positions_per_second"] for r in records[1:] if "perf/positions_per_second" in r]
    if steady:
        out["perf/positions_per_second"] = float(np.mean(steady))
    return out


def collect(sweep: Sweep, sweep_dir: str) -> list[dict]:
    """One row per trial: name, status, its params, then its final metrics. Writes SWEEP_DIR/results.csv."""
    rows = []
    for trial in sweep.trials:
        run_dir = trial_dir(sweep_dir, trial)
        records = read_records(run_dir)
        status = ("done" if is_finished(run_dir, trial.config) else
                  "partial" if records else "pending")
        row = {"trial": trial.name, "status": status, **trial.params, **final_metrics(records)}
        if os.path.exists(os.path.join(run_dir, DONE_FILE)):
            with open(os.path.join(run_dir, DONE_FILE)) as f:
                row["wall_minutes"] = json.load(f)["seconds"] / 60     # the whole process: start-up, compiles, evals
        rows.append(row)
    metric_keys = sorted({k for r in rows for k in r} - {"trial", "status", *sweep.axes})
    columns = ["trial", "status", *sweep.axes, *metric_keys]
    with open(os.path.join(sweep_dir, "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return rows


def summarise(sweep: Sweep, rows: list[dict], metrics: Sequence[str]) -> list[dict]:
    """Rows grouped by their params without the seed: n seeds done, mean and sample standard deviation (ddof 1) of
    each metric over those seeds."""
    groups: dict[tuple, list[dict]] = {}
    axes = [a for a in sweep.axes if a != "seed"]
    for row in rows:
        groups.setdefault(tuple(row[a] for a in axes), []).append(row)
    out = []
    for key, members in groups.items():
        done = [r for r in members if r["status"] == "done"]
        entry = {**dict(zip(axes, key)), "seeds": len(done)}
        for metric in metrics:
            values = [float(r[metric]) for r in done if r.get(metric, "") != ""]
            entry[f"{metric} mean"] = float(np.mean(values)) if values else float("nan")
            entry[f"{metric} std"] = float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")
        out.append(entry)
    return out


def markdown_table(summary: list[dict], digits: int = 3) -> str:
    """The summary as a Markdown table, each metric's mean and standard deviation in one cell ("0.850 ± 0.020")."""
    if not summary:
        return ""
    number = lambda v: f"{v:.{digits}f}" if math.isfinite(v) else "–"
    columns, cells = [], []
    for key in summary[0]:
        if key.endswith(" std"):
            continue
        if key.endswith(" mean"):
            metric = key[:-len(" mean")]
            columns.append(metric)
            cells.append(lambda row, m=metric: number(row[f"{m} mean"]) + (
                f" ± {number(row[f'{m} std'])}" if math.isfinite(row[f"{m} std"]) else ""))
        else:
            columns.append(key)
            cells.append(lambda row, k=key: str(row[k]))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row) for cell in cells) + " |" for row in summary]
    return "\n".join(lines)


def default_metrics(rows: list[dict]) -> list[str]:
    keys = {k for r in rows for k in r}
    return sorted(k for k in keys if k.startswith("eval/") and k.endswith("_score")) + \
        [k for k in ("train/value_loss", "train/policy_loss") if k in keys]


def plot(sweep: Sweep, sweep_dir: str, rows: list[dict], metrics: Sequence[str]) -> list[str]:
    """One PNG per metric under SWEEP_DIR/plots: its curve over iterations for every trial (one colour per
    configuration, seeds share it) and, on the right, its final value against the configuration (each seed a dot,
    the mean a bar). Returns the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(os.path.join(sweep_dir, "plots"), exist_ok=True)
    axes = [a for a in sweep.axes if a != "seed"]
    configs = list(dict.fromkeys(tuple(t.params[a] for a in axes) for t in sweep.trials))
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, max(len(configs), 1)))
    label = lambda key: ", ".join(f"{a}={v}" for a, v in zip(axes, key)) or "base"
    paths = []
    for metric in metrics:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
        for trial in sweep.trials:
            key = tuple(trial.params[a] for a in axes)
            points = [(r["iteration"], r[metric]) for r in read_records(trial_dir(sweep_dir, trial)) if metric in r
                      and not (metric.startswith("train/") and r.get("train/steps", 1) == 0)]   # before learning
            if points:
                xs, ys = zip(*points)
                first_seed = trial.params["seed"] == sweep.trials[0].params["seed"]
                left.plot(xs, ys, marker="o" if metric.startswith("eval/") else None, ms=3,
                          color=colours[configs.index(key)], alpha=0.85, label=label(key) if first_seed else None)
        left.set(xlabel="iteration", ylabel=metric, title=f"{sweep.name}: {metric}")
        left.grid(alpha=0.3)
        if left.get_legend_handles_labels()[0]:
            left.legend(fontsize=7)
        for x, key in enumerate(configs):
            values = [float(r[metric]) for r in rows
                      if tuple(r[a] for a in axes) == key and r["status"] == "done" and r.get(metric, "") != ""]
            if values:
                right.bar(x, np.mean(values), color=colours[x], alpha=0.5)
                right.scatter([x] * len(values), values, color="k", s=12, zorder=3)
        right.set_xticks(range(len(configs)), [label(k) for k in configs], rotation=30, ha="right", fontsize=7)
        right.set(ylabel=f"final {metric}", title="final value (dots: seeds, bar: mean)")
        right.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        path = os.path.join(sweep_dir, "plots", re.sub(r"[^A-Za-z0-9_]+", "_", metric) + ".png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def report(sweep: Sweep, sweep_dir: str, metrics: Sequence[str] | None = None) -> tuple[list[dict], str, list[str]]:
    """collect + summary.csv + plots; returns (rows, the summary as a Markdown table, plot paths)."""
    rows = collect(sweep, sweep_dir)
    metrics = list(metrics) if metrics else default_metrics(rows)
    summary = summarise(sweep, rows, metrics)
    if summary:
        with open(os.path.join(sweep_dir, "summary.csv"), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(summary[0]))
            writer.writeheader()
            writer.writerows(summary)
    paths = plot(sweep, sweep_dir, rows, metrics) if any(r["status"] != "pending" for r in rows) else []
    table = markdown_table(summary)
    with open(os.path.join(sweep_dir, "summary.md"), "w") as f:
        f.write(table + "\n")
    return rows, table, paths


# --- the command ---------------------------------------------------------------------------------------------------
def sweep_command(spec_path: str, *, sweep_dir: str | None = None, parallel: int = 1, devices: str | None = None,
                  platform: str = "auto", shard: str | None = None, extra_set: Sequence[str] = (),
                  metrics: Sequence[str] | None = None, dry_run: bool = False, collect_only: bool = False,
                  log: LogFn = print, out: LogFn = print) -> int:
    """What `az-jax sweep` does: plan and check everything, run this shard's unfinished trials, then write
    results.csv, summary.csv/.md and plots. Returns the exit status (1 if a trial failed)."""
    spec = load_spec(spec_path)
    if platform == "auto":
        platform = detect_platform()
    if platform not in PLATFORMS:
        raise SweepError(f"--platform must be auto or one of {', '.join(PLATFORMS)}, got {platform!r}")
    groups = device_groups(parse_ids(devices, available_ids(platform)), parallel)
    shard_index = parse_shard(shard)
    sweep = build_sweep(spec, extra_set, num_devices=len(groups[0]))
    sweep_dir = sweep_dir or os.path.join("runs", "sweeps", sweep.name)
    check_sweep_dir(sweep, sweep_dir)
    if dry_run:
        for trial in sweep.trials:
            if trial.index % shard_index[1] == shard_index[0]:
                run_dir = trial_dir(sweep_dir, trial)
                done = " (finished)" if is_finished(run_dir, trial.config) else ""
                out(" ".join(trial_command(sweep, trial, run_dir, platform, groups[0])) + done)
        return 0
    status = {}
    if not collect_only:
        write_sweep_file(sweep, sweep_dir, spec)
        status = run_sweep(sweep, sweep_dir, groups=groups, platform=platform, shard=shard_index, log=log)
    rows, table, paths = report(sweep, sweep_dir, metrics)
    out(table)
    log(f"{sum(r['status'] == 'done' for r in rows)} of {len(rows)} trials done; table "
        f"{os.path.join(sweep_dir, 'results.csv')}" + (f", plots in {os.path.join(sweep_dir, 'plots')}" if paths else ""))
    return 1 if any(s.startswith("failed") for s in status.values()) else 0
