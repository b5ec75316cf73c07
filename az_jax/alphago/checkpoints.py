"""The AlphaGo stages' run directories (p_σ, p_ρ, v_θ): RUN_DIR/config.json and the orbax checkpoints in
RUN_DIR/checkpoints, the last 3 kept. Every failure is the stage's own one-line error."""

import dataclasses
import json
import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from az_jax.runtime import files

CONFIG_FILE = "config.json"


def manager(run_dir: str) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(max_to_keep=3, create=True)
    return ocp.CheckpointManager(os.path.join(os.path.abspath(run_dir), "checkpoints"), options=options)


def step_or_latest(checkpoints: ocp.CheckpointManager, run_dir: str, step: int | None, error: type[Exception]) -> int:
    """`step`, or the latest saved one when None; `error` if there is none."""
    step = checkpoints.latest_step() if step is None else step
    if step is None:
        raise error(f"{run_dir} has no checkpoint yet")
    return step


def restore(checkpoints: ocp.CheckpointManager, run_dir: str, step: int, abstract: Any, error: type[Exception]) -> Any:
    """Checkpoint `step` shaped like `abstract`; a damaged or missing step is `error`, one line."""
    try:
        return checkpoints.restore(step, args=ocp.args.StandardRestore(abstract))
    except Exception as e:  # orbax raises many types for a damaged or missing step
        raise error(f"{run_dir}: checkpoint {step} cannot be read ({type(e).__name__}: {e})") from None


def write_config(run_dir: str, config: Any, data: str, error: type[Exception], what: str) -> None:
    """Writes RUN_DIR/config.json: the dataclass `config`'s fields and the data file's absolute path; or, when the
    directory already has one, checks that every field but the data path is the same (a resumed run may read its data
    from elsewhere). `what` names the run in the error ("an SL policy run")."""
    path = os.path.join(run_dir, CONFIG_FILE)
    wanted = {**dataclasses.asdict(config), "data": os.path.abspath(data) if data else ""}
    if os.path.exists(path):
        try:
            with open(path) as f:
                saved = json.load(f)
        except (OSError, ValueError) as e:
            raise error(f"{run_dir}: {CONFIG_FILE} cannot be read ({e})") from None
        changed = sorted(k for k in set(saved) | set(wanted) if k != "data" and saved.get(k) != wanted.get(k))
        if changed:
            raise error(
                f"{run_dir} holds {what} with another config ({', '.join(changed)} differ): "
                "use another --run-dir to start a new run"
            )
        return
    os.makedirs(run_dir, exist_ok=True)
    with files.replaced_whole(path) as f:
        json.dump(wanted, f, indent=1)


def read_config(run_dir: str, config_type: type, error: type[Exception], what: str) -> Any:
    """The `config_type` dataclass that `write_config` wrote into `run_dir`."""
    try:
        with open(os.path.join(run_dir, CONFIG_FILE)) as f:
            saved = json.load(f)
        saved.pop("data", None)
        return config_type(**saved)
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise error(f"{run_dir} is not {what} ({CONFIG_FILE}: {e})") from None


def restore_state(
    checkpoints: ocp.CheckpointManager, run_dir: str, step: int, like: Any, error: type[Exception]
) -> Any:
    """Checkpoint `step`, shaped like the (initial) train state `like`."""
    return restore(checkpoints, run_dir, step, jax.tree.map(ocp.utils.to_shape_dtype_struct, like), error)
