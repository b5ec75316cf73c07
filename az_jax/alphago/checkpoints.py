"""The orbax checkpoints of the AlphaGo stages' run directories (p_σ, p_ρ, v_θ): RUN_DIR/checkpoints, the last 3
kept; restores raise the stage's own one-line error."""

import os
from typing import Any

import orbax.checkpoint as ocp


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
