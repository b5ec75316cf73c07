"""What the notebooks in colab/ call: device set-up, live training plots, a run dir on Google Drive, and (from
az_jax/apps/session.py) the search's view of a position and a game against an agent on pgx's SVG board (typed moves,
or buttons with ipywidgets).

Importing this module starts no JAX backend (pgx and the games are imported only when used), so a notebook can call
`setup_cpu_devices()` after importing it.

    from az_jax.apps import notebook
    notebook.setup_cpu_devices()
    live = notebook.LivePlot()
    az_jax.train_and_evaluate(config, run_dir, progress=False, progress_fn=live)
    session = notebook.GameSession(az_jax.load_agent(run_dir), human_first=True)
    session.play("4"); session                     # the board, the agent's reply and its search's visit counts
    session.widget()                               # the same with a button per legal move
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

import jax

from az_jax.runtime import host_devices
from az_jax.runtime.metrics import read_metrics  # noqa: F401  (notebooks call notebook.read_metrics)

LOSS_KEYS = ("train/loss", "train/value_loss", "train/policy_loss")
# Names of az_jax.apps.session, imported on first use: importing it starts JAX's backend (see above).
_SESSION_NAMES = ("GameSession", "Analysis", "analyse")


def __getattr__(name):
    if name in _SESSION_NAMES:
        return getattr(importlib.import_module("az_jax.apps.session"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- devices and run dirs --------------------------------------------------------------------------------------------
def setup_cpu_devices(count: int | None = None) -> int:
    """One JAX host device per core (at most 8; or `count`) for CPU runtimes, as `az-jax` does; no effect on the
    GPU/TPU backend. Call it before anything creates a JAX array. Returns the count asked for."""
    count = count or min(os.cpu_count() or 1, 8)
    host_devices.setup(count, cores=min(os.cpu_count() or 1, 8))
    return count


def describe_devices() -> dict:
    """{'backend': 'cpu' | 'gpu' | 'tpu', 'count': devices, 'kind': the first device's kind} (starts JAX)."""
    devices = jax.devices()
    return {"backend": jax.default_backend(), "count": len(devices), "kind": devices[0].device_kind}


def accelerator_overrides(backend: str) -> list[str]:
    """Settings that fill an accelerator better than the small preset's CPU-sized ones: more games in parallel
    (the search's batch), and bfloat16 activations on TPU. Empty on CPU."""
    if backend == "tpu":
        return ["selfplay_batch_size=1024", "compute_dtype=bfloat16"]
    if backend == "gpu":
        return ["selfplay_batch_size=512"]
    return []


def choose_run_dir(checkpoint_dir: str, run_name: str, *, mount_drive: bool = True, fallback_dir: str = "runs") -> str:
    """`checkpoint_dir/run_name`, mounting Google Drive first when the path is under /content/drive (on Colab). When
    Drive cannot be mounted (not on Colab, or refused) the run goes to `fallback_dir/run_name` instead, with a note."""
    if mount_drive and os.path.abspath(checkpoint_dir).startswith("/content/drive"):
        try:
            from google.colab import drive  # only on Colab

            drive.mount("/content/drive")
        except Exception as e:  # ImportError off Colab; Colab raises others when the user declines
            print(
                f"Google Drive not mounted ({type(e).__name__}: {e}); using {fallback_dir}/ instead, which does "
                f"not survive a runtime reset"
            )
            checkpoint_dir = fallback_dir
    run_dir = os.path.join(checkpoint_dir, run_name)
    os.makedirs(run_dir, exist_ok=True)
    return run_dir


def run_status(run_dir: str, num_iterations: int | None = None) -> str:
    """One line: a new run, or which checkpoint training will resume from (train_and_evaluate does that itself)."""
    from az_jax.runtime import checkpoint as ckpt  # here: importing it starts JAX's backend (see the module docstring)

    path = ckpt.checkpoint_dir(run_dir)
    steps = sorted(int(s) for s in os.listdir(path) if s.isdigit()) if os.path.isdir(path) else []
    if not steps:
        return f"new run in {run_dir}"
    total = f" of {num_iterations}" if num_iterations else ""
    return f"resuming from checkpoint {steps[-1]}{total} in {run_dir}"


# --- live plots ------------------------------------------------------------------------------------------------------
def plot_history(history: Sequence[dict], title: str = ""):
    """A matplotlib figure of metric records ({'iteration': i, key: value, ...}): the losses on the left, every
    evaluation score (eval/vs_<opponent>_score, 0.5 = even) on the right."""
    import matplotlib.pyplot as plt

    fig, (losses, scores) = plt.subplots(1, 2, figsize=(11, 3.6))
    for key in LOSS_KEYS:
        points = [(r["iteration"], r[key]) for r in history if key in r and r.get("train/steps", 1) > 0]
        if points:
            losses.plot(*zip(*points), label=key.split("/")[1])
    losses.set(xlabel="iteration", title="training loss")
    score_keys = sorted({k for r in history for k in r if k.startswith("eval/") and k.endswith("_score")})
    for key in score_keys:
        points = [(r["iteration"], r[key]) for r in history if key in r]
        scores.plot(*zip(*points), marker="o", label=key[len("eval/") : -len("_score")])
    scores.axhline(0.5, color="grey", lw=0.8, ls=":")
    scores.set(xlabel="iteration", ylim=(-0.02, 1.02), title="score against baselines (win 1, draw ½)")
    for ax in (losses, scores):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


class LivePlot:
    """A `progress_fn(iteration, metrics)` for train_and_evaluate that redraws the losses and evaluation scores in
    the notebook every `every` iterations (and whenever an evaluation arrives), with one status line."""

    def __init__(self, every: int = 1, title: str = "", history: Sequence[dict] = ()):
        self.every = every
        self.title = title
        self.history = list(history)  # earlier records (e.g. read_metrics of a resumed run) are drawn too

    def __call__(self, iteration: int, metrics: dict) -> None:
        self.history.append({"iteration": iteration, **metrics})
        if iteration % self.every and not any(k.startswith("eval/") for k in metrics):
            return
        import matplotlib.pyplot as plt
        from IPython.display import clear_output, display

        fig = plot_history(self.history, self.title)
        clear_output(wait=True)
        display(fig)
        plt.close(fig)
        print(self.status())

    def status(self) -> str:
        last = self.history[-1]
        parts = [
            f"iteration {last['iteration']}",
            f"loss {last.get('train/loss', float('nan')):.3f}",
            f"{last.get('perf/positions_per_second', 0):.4g} positions/s",
        ]
        scores = {k: v for r in self.history for k, v in r.items() if k.startswith("eval/") and k.endswith("_score")}
        parts += [f"{k[len('eval/') : -len('_score')]} {v:.3f}" for k, v in sorted(scores.items())]
        return " · ".join(parts)
