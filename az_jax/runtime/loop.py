"""The host loop (impure, thin): resume or start, run jitted iterations, log, evaluate, checkpoint.

`train(config, run_dir, evaluation=...)` is what `az-jax train` runs (through az_jax/evaluation/in_training.py, which
gives it the players to evaluate against). Everything that touches the host — timing,
progress bar, metric files, checkpoints, evaluation matches — lives here, outside the jitted iteration.
"""

import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh

from az_jax.core import arena
from az_jax.core import config as config_lib
from az_jax.core import flops as flops_lib
from az_jax.core import overrides as overrides_lib
from az_jax.core.devices import make_mesh
from az_jax.core.iteration import TrainState
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime import distributed, preemption
from az_jax.runtime.metrics import MetricsWriter
from az_jax.runtime.trainer import Trainer

ProgressFn = Callable[[int, dict], None]


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss, gradient norm or weight. The run stopped before anything of that
    iteration was saved (checkpoint, metrics), so its newest checkpoint is the last good state."""


def divergence_message(iteration: int, metrics: dict, last_checkpoint: int | None) -> str:
    """The one-line error for `iteration`, whose metrics say "train/finite" 0: what diverged and what to do."""
    named = (("train/loss", "loss"), ("train/grad_norm", "gradient norm"))
    what = [f"the {name} is {metrics[key]:g}" for key, name in named if not math.isfinite(metrics[key])]
    what = what or ["the updated weights are not finite"]
    kept = (
        f"the newest checkpoint (iteration {last_checkpoint}) is intact: lower learning_rates (--set "
        f"learning_rates=...) and run the same command again to resume from it"
        if last_checkpoint is not None
        else "no checkpoint was written yet: lower learning_rates (--set learning_rates=...) and start again"
    )
    return (
        f"training diverged at iteration {iteration}: {' and '.join(what)} (learning rate "
        f"{metrics['train/learning_rate']:g}); nothing of iteration {iteration} was saved and {kept}"
    )


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """What a run evaluates with at every eval_every-th iteration (and at its end), built for its trainer by an outer
    package: the opponents' specs and the solved positions are not the runtime's (az_jax/evaluation/in_training.py)."""

    matches: dict[str, Any]  # opponent name -> jitted (variables, key) -> results [eval_games] (+1: the run won)
    probe: Callable[[dict, jax.Array], dict] | None = None  # (variables, key) -> {"eval/...": value}


EvaluationFactory = Callable[[Trainer], Evaluation]


def prepare_run_dir(config: config_lib.Config, run_dir: str) -> config_lib.Config:
    """Checks `run_dir` against `config` before anything is written; returns the config the run will use.

    A run dir holding another run's config (a different game, network, …) is an error; keys in RESUMABLE_KEYS
    (e.g. num_iterations) may change on resume."""
    path = os.path.join(run_dir, "config.json")
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:  # a directory, unreadable, not UTF-8
            raise ckpt.CheckpointError(f"{path} cannot be read as an az_jax config ({type(e).__name__})") from None
        try:
            saved = overrides_lib.from_json(text)
        except config_lib.ConfigError as e:
            raise ckpt.CheckpointError(f"{path} is not a valid az_jax config: {e}") from None
        ckpt.check_compatible(saved, config, run_dir)
    return config


def write_config(config: config_lib.Config, run_dir: str) -> None:
    os.makedirs(run_dir, exist_ok=True)
    tmp = os.path.join(run_dir, "config.json.tmp")
    with open(tmp, "w") as f:
        f.write(config.to_json())
    os.replace(tmp, os.path.join(run_dir, "config.json"))


def restore_or_init(trainer: Trainer, manager) -> TrainState:
    """The state a run starts from: its newest checkpoint that restores whole, or a fresh state if it has none.

    Checkpoints newer than that one that are damaged (ckpt.DamagedCheckpointError) are moved aside to
    RUN_DIR/checkpoints_damaged/ (ckpt.move_aside, by the main process), with one warning line each on stderr. They
    are moved only once an older checkpoint has restored: when none restores, nothing is moved and the error names
    the newest one's fault (a fault shared by all, such as a changed network, is no damage to move away)."""
    steps = sorted(manager.all_steps(), reverse=True)
    if not steps:
        return trainer.init_state()
    damaged: list[tuple[int, ckpt.DamagedCheckpointError]] = []
    for step in steps:
        try:
            state = ckpt.restore(manager, step, trainer.abstract_state(), trainer.config)
        except ckpt.DamagedCheckpointError as e:
            damaged.append((step, e))
            continue
        for bad, error in damaged:
            if distributed.is_main_process():  # one process moves the files (a shared file system)
                where = ckpt.move_aside(manager, bad)
                warning = f"{error}; moved it to {where}; resuming from checkpoint {step}"
                print(f"az-jax: warning: {warning}", file=sys.stderr)
        if damaged and jax.process_count() > 1:  # every process sees the moves before it re-reads its step list
            multihost_utils.sync_global_devices("az_jax: damaged checkpoints moved aside")
            manager.reload()
        return state
    raise ckpt.CheckpointError(
        f"no checkpoint of {os.path.dirname(str(manager.directory))} restores ({len(steps)} tried); "
        f"the newest: {damaged[0][1]}"
    )


@dataclasses.dataclass(frozen=True)
class Run:
    """A run checked once, before anything is written or compiled: its config valid for its mesh and one its
    directory's config.json (if any) may resume (`prepare`)."""

    config: config_lib.Config
    run_dir: str
    mesh: Mesh


def prepare(config: config_lib.Config, run_dir: str, devices=None) -> Run:
    """The run of `config` in `run_dir` on `devices` (default: every device), checked: a ConfigError or
    CheckpointError (one line) otherwise. Writes nothing."""
    mesh = make_mesh(devices)
    config.validate(mesh.size)
    return Run(prepare_run_dir(config, run_dir), run_dir, mesh)


def train(
    run: Run,
    *,
    evaluation: EvaluationFactory | None = None,
    progress: bool = True,
    progress_fn: ProgressFn | None = None,
) -> TrainState:
    """Trains `config` in `run_dir`, resuming from its latest checkpoint; returns the final TrainState. Every
    eval_every-th iteration (and the last) it evaluates with what `evaluation(trainer)` gives (None: nothing; what
    `az-jax train` passes: az_jax/evaluation/in_training.py).

    Raises DivergenceError on the first iteration whose loss, gradient norm or new weights are not finite; nothing
    of that iteration is checkpointed or written to the metric files."""
    config, run_dir = run.config, run.run_dir
    trainer = Trainer(config, run.mesh)
    manager = ckpt.make_manager(run_dir, keep=config.keep_checkpoints)
    state = restore_or_init(trainer, manager)
    if distributed.is_main_process():  # several processes: one writes the files, all write checkpoints (orbax)
        write_config(config, run_dir)
    start = int(jax.device_get(state.iteration))
    chosen = evaluation(trainer) if evaluation is not None and config.eval_every else Evaluation({})
    matches, probe = chosen.matches, chosen.probe
    # Keys independent of the run's key stream, pure functions of the seed: a resumed run evaluates and gates
    # identically.
    eval_key = jax.random.fold_in(jax.random.key(config.seed), 1_000_003)
    gating_key = jax.random.fold_in(jax.random.key(config.seed), 1_000_033)
    solver_key = jax.random.fold_in(jax.random.key(config.seed), 1_000_037)
    # initial=start: what an interrupted run logged after its last checkpoint is dropped; those iterations run again.
    writer = MetricsWriter(
        run_dir, total=config.num_iterations, initial=start, progress=progress, active=distributed.is_main_process()
    )
    saver = ckpt.Saver(manager)  # a failed write: one SaveError line, the whole checkpoints named
    with preemption.StopOnSigterm() as stop:  # SIGTERM ends the run after the iteration in flight, saved
        failed = False
        try:
            for it in range(start, config.num_iterations):
                t0 = time.perf_counter()
                state, metrics = trainer.iterate(state)
                metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
                seconds = time.perf_counter() - t0
                done = it + 1
                if metrics["train/finite"] != 1.0:  # stop before this iteration is gated, evaluated, saved or logged
                    saver.wait()
                    raise DivergenceError(divergence_message(done, metrics, manager.latest_step()))
                if config.gating and done % config.gating_interval == 0:
                    # A separate jitted match on the same devices, decided on device (az_jax/core/gating.py). The next
                    # self-play plays the best player, so it waits for the match in any case; only its W/D/L come back.
                    t1 = time.perf_counter()
                    best, gate_metrics = trainer.gate(
                        state.params,
                        state.batch_stats,
                        state.best,
                        state.iteration,
                        jax.random.fold_in(gating_key, done),
                    )
                    state = state.replace(best=best)
                    metrics.update({k: float(v) for k, v in jax.device_get(gate_metrics).items()})
                    metrics["gating/seconds"] = time.perf_counter() - t1
                metrics.update(
                    {
                        "perf/iteration_seconds": seconds,
                        "perf/positions_per_second": config.positions_per_iteration / seconds,
                        "perf/simulations_per_second": config.positions_per_iteration
                        * flops_lib.mean_simulations_per_ply(config)
                        / seconds,
                        "perf/train_samples_per_second": metrics["train/steps"] * config.batch_size / seconds,
                    }
                )
                evaluating = config.eval_every and (done % config.eval_every == 0 or done == config.num_iterations)
                variables = {"params": state.params, "batch_stats": state.batch_stats}
                if evaluating and probe is not None:
                    t1 = time.perf_counter()
                    metrics.update(probe(variables, jax.random.fold_in(solver_key, done)))
                    metrics["eval/solver_seconds"] = time.perf_counter() - t1
                if evaluating:
                    for name, match in matches.items():
                        t1 = time.perf_counter()
                        results = distributed.fetch(match(variables, jax.random.fold_in(eval_key, done)))
                        metrics.update(
                            {
                                f"eval/vs_{name}_score": arena.score(results),
                                f"eval/vs_{name}_wins": float((results > 0).sum()),
                                f"eval/vs_{name}_draws": float((results == 0).sum()),
                                f"eval/vs_{name}_losses": float((results < 0).sum()),
                                f"eval/vs_{name}_seconds": time.perf_counter() - t1,
                            }
                        )
                # The line first, then the checkpoint: a kill between the two leaves a line that the resume trims
                # (MetricsWriter), never a checkpoint whose iteration has no line.
                writer.write(done, metrics)
                saving = done % config.checkpoint_every == 0 or done == config.num_iterations
                if saving:
                    saver.save(state, config)
                if progress_fn is not None:
                    progress_fn(done, metrics)
                if stop.should_stop():  # SIGTERM: this iteration is the last; its checkpoint is written before exiting
                    if not saving:
                        saver.save(state, config)
                    saver.wait()
                    raise preemption.Preempted(done)
        except ckpt.SaveError:
            failed = True
            raise
        finally:
            if not failed:  # a failed write's error is already on its way; orbax would raise it again here
                saver.wait()
            writer.close()
    return state
