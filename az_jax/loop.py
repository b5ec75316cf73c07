"""The host loop (impure, thin): resume or start, run jitted iterations, log, evaluate, checkpoint.

`train_and_evaluate(config, run_dir)` is what `az-jax train` calls. Everything that touches the host — timing,
progress bar, metric files, checkpoints, evaluation matches — lives here, outside the jitted iteration.
"""

import os
import time
from collections.abc import Callable

import jax

from az_jax import arena, distributed
from az_jax import checkpoint as ckpt
from az_jax import config as config_lib
from az_jax.devices import make_mesh
from az_jax.evaluation.players import JaxPlayer, make_player
from az_jax.iteration import TrainState
from az_jax.metrics import MetricsWriter
from az_jax.trainer import Trainer

ProgressFn = Callable[[int, dict], None]


def baseline_matches(trainer: Trainer, num_games: int, num_simulations: int) -> dict:
    """{opponent name: program (variables, key) -> results [num_games]} for the config's eval_opponents (players
    that run on device: az_jax/evaluation/players.py)."""
    matches = {}
    for spec in trainer.config.eval_opponents:
        player = make_player(spec, trainer.config.game)
        if not isinstance(player, JaxPlayer):
            raise config_lib.ConfigError(f"eval_opponents: {spec!r} is an external engine; use `az-jax eval`")
        matches[player.name] = trainer.match(player.fn, num_games, num_simulations)
    return matches


def prepare_run_dir(config: config_lib.Config, run_dir: str) -> config_lib.Config:
    """Checks `run_dir` against `config` before anything is written; returns the config the run will use.

    A run dir holding another run's config (a different game, network, …) is an error; keys in RESUMABLE_KEYS
    (e.g. num_iterations) may change on resume."""
    path = os.path.join(run_dir, "config.json")
    if os.path.exists(path):
        with open(path) as f:
            try:
                saved = config_lib.from_json(f.read())
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
    steps = manager.all_steps()
    if not steps:
        return trainer.init_state()
    return ckpt.restore(manager, max(steps), trainer.abstract_state(), trainer.config)


def train_and_evaluate(
    config: config_lib.Config,
    run_dir: str,
    *,
    progress: bool = True,
    progress_fn: ProgressFn | None = None,
    devices=None,
) -> TrainState:
    """Trains `config` in `run_dir`, resuming from its latest checkpoint; returns the final TrainState."""
    mesh = make_mesh(devices)
    config.validate(mesh.size)
    config = prepare_run_dir(config, run_dir)
    trainer = Trainer(config, mesh)
    manager = ckpt.make_manager(run_dir, keep=config.keep_checkpoints)
    state = restore_or_init(trainer, manager)
    if distributed.is_main_process():  # several processes: one writes the files, all write checkpoints (orbax)
        write_config(config, run_dir)
    start = int(jax.device_get(state.iteration))
    eval_sims = config.eval_simulations or config.num_simulations
    matches = baseline_matches(trainer, config.eval_games, eval_sims) if config.eval_every else {}
    # Keys independent of the run's key stream, pure functions of the seed: a resumed run evaluates and gates
    # identically.
    eval_key = jax.random.fold_in(jax.random.key(config.seed), 1_000_003)
    gating_key = jax.random.fold_in(jax.random.key(config.seed), 1_000_033)
    writer = MetricsWriter(
        run_dir, total=config.num_iterations, initial=start, progress=progress, active=distributed.is_main_process()
    )
    try:
        for it in range(start, config.num_iterations):
            t0 = time.perf_counter()
            state, metrics = trainer.iterate(state)
            metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
            seconds = time.perf_counter() - t0
            done = it + 1
            if config.gating and done % config.gating_interval == 0:
                # A separate jitted match on the same devices, decided on device (az_jax/gating.py). The next
                # self-play plays the best player, so it waits for the match in any case; only its W/D/L come back.
                t1 = time.perf_counter()
                best, gate_metrics = trainer.gate(
                    state.params, state.batch_stats, state.best, state.iteration, jax.random.fold_in(gating_key, done)
                )
                state = state.replace(best=best)
                metrics.update({k: float(v) for k, v in jax.device_get(gate_metrics).items()})
                metrics["gating/seconds"] = time.perf_counter() - t1
            metrics.update(
                {
                    "perf/iteration_seconds": seconds,
                    "perf/positions_per_second": config.positions_per_iteration / seconds,
                    "perf/simulations_per_second": config.positions_per_iteration * config.num_simulations / seconds,
                    "perf/train_samples_per_second": metrics["train/steps"] * config.batch_size / seconds,
                }
            )
            if matches and (done % config.eval_every == 0 or done == config.num_iterations):
                variables = {"params": state.params, "batch_stats": state.batch_stats}
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
            if done % config.checkpoint_every == 0 or done == config.num_iterations:
                ckpt.save(manager, state, config)
            writer.write(done, metrics)
            if progress_fn is not None:
                progress_fn(done, metrics)
    finally:
        manager.wait_until_finished()
        writer.close()
    return state
