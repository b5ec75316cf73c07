"""The AlphaGo stages' run directories (p_σ, p_ρ, v_θ): RUN_DIR/config.json and the orbax checkpoints in
RUN_DIR/checkpoints, the last 3 kept. Every failure is the stage's own one-line error.

    RUN = checkpoints.RunFiles(SLConfig, SLError, "an SL policy run", init_state)   # p_σ's and v_θ's run directories
    RUN.write_config(run_dir, config, data_path); RUN.read_config(run_dir); RUN.restore_params(run_dir, step)
"""

import dataclasses
import json
import os
from collections.abc import Callable
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


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """One stage's run directories: config.json holds a `config_type` dataclass (write_config), the checkpoints hold the
    train state that `init_state(config)` makes (a struct with `params`: SLState, ValueState). Used by p_σ
    (supervised.py) and v_θ (value_training.py); p_ρ's config.json also names the SL run it started from
    (reinforce.py)."""

    config_type: type
    error: type[Exception]
    what: str  # names the run in errors: "an SL policy run"
    init_state: Callable[[Any], Any]  # config -> a new train state

    def write_config(self, run_dir: str, config: Any, data: str) -> None:
        write_config(run_dir, config, data, self.error, self.what)

    def read_config(self, run_dir: str) -> Any:
        """The config a run directory was trained with."""
        return read_config(run_dir, self.config_type, self.error, self.what)

    def restore_params(self, run_dir: str, step: int | None = None) -> tuple[Any, dict, int]:
        """(config, params, step) of the run's latest (or given) checkpoint."""
        config = self.read_config(run_dir)
        checkpoints = manager(run_dir)
        step = step_or_latest(checkpoints, run_dir, step, self.error)
        return config, restore_state(checkpoints, run_dir, step, self.init_state(config), self.error).params, step
