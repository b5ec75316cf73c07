"""Metric sinks of the host loop: a JSONL file and TensorBoard event files in the run dir, and a progress bar.

A resumed run logs each iteration after its checkpoint again, so opening the sinks at iteration `initial` first forgets
every later iteration: `metrics.jsonl` is rewritten without them, and TensorBoard hides their events (a purge step)."""

import json
import math
import os
import time

from tensorboardX import SummaryWriter
from tqdm import tqdm

from az_jax.runtime.files import read_jsonl, replaced_whole


def _iteration(line: str, key: str = "iteration") -> int | None:
    """The iteration (`key`) of a `metrics.jsonl` line, or None if the line is not a record with an integer one."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    iteration = record.get(key) if isinstance(record, dict) else None
    return iteration if type(iteration) is int else None


def kept_lines(text: str, last: int, key: str = "iteration") -> list[str]:
    """The lines (newline included) of the `metrics.jsonl` text `text` a run resumed at iteration `last` keeps: the
    last record of each iteration up to `last`, in iteration order. Dropped: records of later iterations (the resumed
    run logs them again), a last line without its newline (a write cut short by a kill) and lines that are no record.
    `key`: the field that numbers the records ("step" for the AlphaGo stages)."""
    lines: dict[int, str] = {}
    for line in text.split("\n")[:-1]:  # the piece after the last newline is empty or a cut-short write
        iteration = _iteration(line, key)
        if iteration is not None and iteration <= last:
            lines[iteration] = line + "\n"
    return [lines[i] for i in sorted(lines)]


def truncate_metrics(path: str, last: int, key: str = "iteration") -> None:
    """Rewrites the `metrics.jsonl` file `path` to `kept_lines(…, last)`; the file is replaced whole (a temporary file
    beside it, renamed over it) and only if a line goes. A missing file stays missing."""
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        text = f.read()
    kept = "".join(kept_lines(text, last, key))
    if kept == text:
        return
    with replaced_whole(path) as f:
        f.write(kept)


class MetricsWriter:
    """Writes `metrics.jsonl` (one object per iteration) and TensorBoard events under `RUN_DIR/tensorboard`, for a run
    that starts after iteration `initial` (its restored checkpoint; 0 for a new run): records and events of later
    iterations left by an earlier, interrupted run are dropped first, so each iteration is logged once.

    `active=False` (every process of a multi-process run but process 0) writes no file and shows no progress bar."""

    def __init__(self, run_dir: str, total: int, initial: int = 0, progress: bool = True, active: bool = True):
        self.active = active
        if not active:
            return
        os.makedirs(run_dir, exist_ok=True)
        path = os.path.join(run_dir, "metrics.jsonl")
        truncate_metrics(path, initial)
        self._jsonl = open(path, "a")
        # TensorBoard hides every event of a step >= purge_step written before this writer's first event.
        self._tb = SummaryWriter(os.path.join(run_dir, "tensorboard"), purge_step=initial + 1)
        self._bar = tqdm(total=total, initial=initial, unit="it", dynamic_ncols=True, disable=not progress)
        self._start = time.time()

    def write(self, iteration: int, metrics: dict) -> None:
        if not self.active:
            return
        record = {"iteration": iteration, "time": time.time(), **metrics}
        self._jsonl.write(json.dumps(record) + "\n")
        self._jsonl.flush()
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and math.isfinite(value):
                self._tb.add_scalar(key, value, iteration)
        self._tb.flush()  # on disk with its line: a kill loses neither, and the resume trims both alike
        postfix = {
            "pos/s": f"{metrics.get('perf/positions_per_second', 0):.0f}",
            "loss": f"{metrics.get('train/loss', 0):.3f}",
            "v_loss": f"{metrics.get('train/value_loss', 0):.3f}",
        }
        if "eval/vs_random_score" in metrics:
            postfix["vs_random"] = f"{metrics['eval/vs_random_score']:.3f}"
        if "eval/solver_raw" in metrics:  # shares of optimal moves on connect four's solver set: raw / search
            postfix["solver"] = f"{metrics['eval/solver_raw']:.3f}/{metrics['eval/solver_search']:.3f}"
        self._bar.set_postfix(postfix, refresh=False)
        self._bar.update(1)

    def close(self) -> None:
        if not self.active:
            return
        self._bar.close()
        self._tb.close()
        self._jsonl.close()


def read_metrics(run_dir: str) -> list[dict]:
    """All records of `RUN_DIR/metrics.jsonl`, in order."""
    return read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
