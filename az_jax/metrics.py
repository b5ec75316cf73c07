"""Metric sinks of the host loop: a JSONL file and TensorBoard event files in the run dir, and a progress bar."""

import json
import math
import os
import time

from tensorboardX import SummaryWriter
from tqdm import tqdm

from az_jax.files import read_jsonl


class MetricsWriter:
    """Writes `metrics.jsonl` (one object per iteration) and TensorBoard events under `RUN_DIR/tensorboard`.

    `active=False` (every process of a multi-process run but process 0) writes no file and shows no progress bar."""

    def __init__(self, run_dir: str, total: int, initial: int = 0, progress: bool = True, active: bool = True):
        self.active = active
        if not active:
            return
        os.makedirs(run_dir, exist_ok=True)
        self._jsonl = open(os.path.join(run_dir, "metrics.jsonl"), "a")
        self._tb = SummaryWriter(os.path.join(run_dir, "tensorboard"))
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
        postfix = {
            "pos/s": f"{metrics.get('perf/positions_per_second', 0):.0f}",
            "loss": f"{metrics.get('train/loss', 0):.3f}",
            "v_loss": f"{metrics.get('train/value_loss', 0):.3f}",
        }
        if "eval/vs_random_score" in metrics:
            postfix["vs_random"] = f"{metrics['eval/vs_random_score']:.3f}"
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
