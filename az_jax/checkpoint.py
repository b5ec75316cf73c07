"""Orbax save/restore of the whole TrainState plus its config, in `RUN_DIR/checkpoints/<iteration>/`.

A checkpoint has three items, so that an agent can load the network without the (large) replay buffer:
  model  — params and batch-norm averages
  train  — optimizer state, games in progress, replay buffer, RNG key, iteration (and, with AlphaGo Zero's switches,
           the best player's weights and the resignation state)
  config — the resolved Config as JSON
"""

import dataclasses
import os

import jax
import orbax.checkpoint as ocp

from az_jax import config as config_lib


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt, or belongs to another run (game, network, shapes)."""


def checkpoint_dir(run_dir: str) -> str:
    return os.path.join(os.path.abspath(run_dir), "checkpoints")


def make_manager(run_dir: str, keep: int = 3, read_only: bool = False) -> ocp.CheckpointManager:
    # Readers (agents) open the manager without creating anything and never save, so nothing can be deleted.
    options = ocp.CheckpointManagerOptions(max_to_keep=None if read_only or keep == 0 else keep, create=not read_only)
    return ocp.CheckpointManager(checkpoint_dir(run_dir), options=options, item_names=("model", "train", "config"))


def _split(state):
    model = {"params": state.params, "batch_stats": state.batch_stats}
    train = {
        "opt_state": state.opt_state,
        "games": state.games,
        "replay": state.replay,
        "key": state.key,
        "iteration": state.iteration,
    }
    # present only when their switch is on, so an alphazero checkpoint has exactly the items it always had
    train.update({k: getattr(state, k) for k in ("best", "resign") if getattr(state, k) is not None})
    return model, train


def save(manager: ocp.CheckpointManager, state, config: config_lib.Config) -> int:
    """Saves `state` at step = its iteration count (asynchronously; `manager.wait_until_finished()` to block)."""
    step = int(jax.device_get(state.iteration))
    model, train = _split(state)
    manager.save(
        step,
        args=ocp.args.Composite(
            model=ocp.args.StandardSave(model),
            train=ocp.args.StandardSave(train),
            config=ocp.args.JsonSave(dataclasses.asdict(config)),
        ),
    )
    return step


def read_config(manager: ocp.CheckpointManager, step: int) -> config_lib.Config:
    try:
        raw = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]
        return config_lib.override(config_lib.Config(), raw)
    except config_lib.ConfigError as e:
        raise CheckpointError(f"checkpoint {step} has an invalid config: {e}") from None
    except Exception as e:  # orbax raises many types for missing/corrupt files
        raise CheckpointError(
            f"checkpoint {step} in {manager.directory} cannot be read: "
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        ) from None


def check_compatible(saved: config_lib.Config, wanted: config_lib.Config, where: str) -> None:
    """Raises CheckpointError if `saved` differs from `wanted` in a key that a resumed run cannot change."""
    diff = [
        f.name
        for f in dataclasses.fields(saved)
        if f.name not in config_lib.RESUMABLE_KEYS and getattr(saved, f.name) != getattr(wanted, f.name)
    ]
    if diff:
        shown = ", ".join(f"{k}: saved {getattr(saved, k)!r} vs requested {getattr(wanted, k)!r}" for k in diff[:4])
        raise CheckpointError(f"{where} belongs to a different run ({shown}); use another --run-dir")


def restore(manager: ocp.CheckpointManager, step: int, abstract_state, config: config_lib.Config):
    """Restores the TrainState saved at `step` into the shapes/shardings of `abstract_state`."""
    check_compatible(read_config(manager, step), config, f"checkpoint {step}")
    model, train = _split(abstract_state)
    try:
        restored = manager.restore(
            step, args=ocp.args.Composite(model=ocp.args.StandardRestore(model), train=ocp.args.StandardRestore(train))
        )
    except Exception as e:
        raise CheckpointError(
            f"checkpoint {step} in {manager.directory} cannot be restored: "
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        ) from None
    m, t = restored["model"], restored["train"]
    return abstract_state.replace(params=m["params"], batch_stats=m["batch_stats"], **t)


def restore_model(manager: ocp.CheckpointManager, step: int, abstract_variables) -> dict:
    """Restores only {'params', 'batch_stats'} (for agents)."""
    try:
        return manager.restore(step, args=ocp.args.Composite(model=ocp.args.StandardRestore(abstract_variables)))[
            "model"
        ]
    except Exception as e:
        raise CheckpointError(
            f"checkpoint {step} in {manager.directory} cannot be restored: "
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        ) from None
