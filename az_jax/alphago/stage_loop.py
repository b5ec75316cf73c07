"""The one host loop of AlphaGo's network-training stages (p_σ: supervised.py, v_θ: value_training.py): sample a
minibatch, take a jitted step, log a line of metrics every `eval_every` steps, save a checkpoint every
`checkpoint_every`, and resume where the run directory stands, with the AlphaZero runtime's safeguards:

* resume: from the newest checkpoint that reads back whole and finite; a damaged one is moved to
  RUN_DIR/checkpoints_damaged/<step> (nothing is deleted) and the one before it is tried. metrics.jsonl then loses
  the lines after the step resumed from (the resumed run writes them again), so each step has one line.
* divergence: a NaN or infinite loss, or weights, stop the run with the stage's one-line error before anything of
  that stretch is written (no line, no checkpoint), so the newest checkpoint is the last good state.
* reproducible: step t's minibatch is drawn by np.random.default_rng([seed, t]) and its key folds t into
  key(seed), so a resumed run takes the same steps as one never stopped (on the same devices).

    last = stage_loop.train(stage, run_dir, log=print)   # stage: a Stage, built by supervised / value_training

Minibatches (`minibatches`): a data set of at most RESIDENT_BYTES is put on the devices once and each step's rows are
gathered there (only the row indices cross from the host); a larger one stays where it is, in memory maps (a data set
directory, dataset.load_split), and each minibatch is gathered on the host, so memory holds a minibatch, never the
set. Both give the same minibatches. `devices.pace` keeps the host at most a few steps ahead of the devices.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from az_jax.alphago import checkpoints
from az_jax.core import devices
from az_jax.runtime import checkpoint as runtime_checkpoint
from az_jax.runtime import files
from az_jax.runtime.metrics import truncate_metrics

# a data set up to 1 GiB is held on the devices (p_σ's: 171 bytes a 9×9 position, 731 a 19×19 one)
RESIDENT_BYTES = 1 << 30


@dataclasses.dataclass(frozen=True)
class Stage:
    """What a stage gives the loop. The train state is a struct with `params` and `step` (SLState, ValueState)."""

    what: str  # names the run in errors: "an SL policy run"
    error: type[Exception]  # the stage's one-line error
    steps: int
    eval_every: int
    checkpoint_every: int
    seed: int
    rows: int  # training rows to draw minibatches from
    batch_size: int
    init_state: Callable[[], Any]  # a new train state (host or device arrays)
    place: Callable[[Any], Any]  # a train state -> on the mesh (replicated)
    train_step: Callable[..., tuple[Any, dict]]  # (state, key, *batch) -> (state, {"loss": scalar, ...})
    batch: Callable[[np.ndarray], tuple]  # minibatch rows [B] -> the step's batch arguments (on the mesh)
    line: Callable[[Any, int, list[dict], float], dict]  # (params, step, the steps' metrics, seconds) -> the line


def minibatches(arrays: Any, sharding: jax.sharding.NamedSharding, limit: int | None = None) -> Callable:
    """rows [B] (numpy) -> the leaves of `arrays` (a pytree of [M, ...] numpy arrays or memory maps) at `rows`, placed
    by `sharding` (the batch split over its mesh). When the leaves hold at most `limit` bytes (default RESIDENT_BYTES)
    they are put on every device of the mesh once and each minibatch is gathered there by a jitted take; otherwise
    each is gathered on the host, reading only its rows."""
    size = sum(int(x.nbytes) for x in jax.tree.leaves(arrays))
    if size > (RESIDENT_BYTES if limit is None else limit):
        return lambda rows: jax.device_put(jax.tree.map(lambda x: x[rows], arrays), sharding)
    resident = jax.device_put(arrays, jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec()))
    take = jax.jit(lambda data, rows: jax.tree.map(lambda x: x[rows], data), out_shardings=sharding)
    return lambda rows: take(resident, rows.astype(np.int32))


def restore_intact(
    manager: ocp.CheckpointManager,
    restore: Callable[[int], Any],
    params_of: Callable[[Any], Any],
    error: type[Exception],
    log: Callable[[dict], None],
) -> Any | None:
    """The newest checkpoint that `restore(step)` reads back without `error` and whose weights (`params_of`) are all
    finite; a damaged one is moved to RUN_DIR/checkpoints_damaged/<step> (said on stderr and to `log`) and the one
    before it tried. None when no checkpoint is left."""
    for step in sorted(manager.all_steps(), reverse=True):
        try:
            restored = restore(step)
            bad = runtime_checkpoint.nonfinite_leaves(jax.device_get(params_of(restored)))
            if bad:
                raise error(f"checkpoint {step} holds NaN or infinite weights ({bad[0]})")
            return restored
        except error as e:
            moved = runtime_checkpoint.move_aside(manager, step)
            print(f"az-jax: {e}; moved to {moved}, trying the one before", file=sys.stderr)
            log({"damaged_checkpoint": step, "moved_to": moved})
    return None


def check_finite(
    error: type[Exception], unit: str, count: int, losses: list[float], params: Any, last_saved: int | None
) -> None:
    """Raises `error` (one line) when one of `losses` (the `unit`s up to `count`, the last one `count`) or a leaf of
    `params` (host or device arrays) is not finite: training diverged, and the caller saves nothing more."""
    bad_loss = next((i for i, v in enumerate(losses) if not math.isfinite(v)), None)
    bad_weights = [] if bad_loss is not None else runtime_checkpoint.nonfinite_leaves(jax.device_get(params))
    if bad_loss is None and not bad_weights:
        return
    where = (
        f"the loss is {losses[bad_loss]:g} at {unit} {count - len(losses) + bad_loss + 1}"
        if bad_loss is not None
        else f"the weights ({bad_weights[0]}) are not finite at {unit} {count}"
    )
    kept = (
        f"the newest checkpoint ({unit} {last_saved}) is intact: lower the learning rate and run again to resume "
        "from it"
        if last_saved
        else "no checkpoint was written: lower the learning rate and start again"
    )
    raise error(f"training diverged: {where}; nothing after {unit} {last_saved or 0} was saved and {kept}")


def train(stage: Stage, run_dir: str, log: Callable[[dict], None] = print) -> dict:
    """Trains (or resumes) the stage in `run_dir` to stage.steps steps; returns the last metrics line."""
    manager = checkpoints.manager(run_dir)
    like = stage.init_state()
    restore = lambda step: checkpoints.restore_state(manager, run_dir, step, like, stage.error)  # noqa: E731
    state = restore_intact(manager, restore, lambda s: s.params, stage.error, log) or like
    step = int(state.step)  # kept on the host: reading state.step each step would wait for the device
    metrics_path = os.path.join(run_dir, "metrics.jsonl")
    truncate_metrics(metrics_path, step, key="step")
    state = stage.place(state)
    key = jax.random.key(stage.seed)
    last: dict = {}
    last_saved = manager.latest_step()
    pending: list[dict] = []  # the device's metrics since the last line, read back together
    tick = time.perf_counter()
    try:
        while step < stage.steps:
            rows = np.random.default_rng([stage.seed, step]).integers(0, stage.rows, stage.batch_size)
            state, metrics = stage.train_step(state, key, *stage.batch(rows))
            pending.append(metrics)
            devices.pace(pending)
            step += 1
            line_due = step % stage.eval_every == 0 or step == stage.steps
            save_due = step % stage.checkpoint_every == 0 or step == stage.steps
            if line_due or save_due:
                losses = [float(m["loss"]) for m in jax.device_get(pending)]
                check_finite(stage.error, "step", step, losses, state.params, last_saved)
            if line_due:
                last = stage.line(state.params, step, jax.device_get(pending), time.perf_counter() - tick)
                files.append_jsonl(metrics_path, last)
                log(last)
                pending, tick = [], time.perf_counter()
            if save_due:
                manager.save(step, args=ocp.args.StandardSave(state))
                last_saved = step
    finally:  # an interrupted run keeps the checkpoints it started writing
        manager.wait_until_finished()
    return last
