"""Collecting a sweep's results: the trials' final metrics into results.csv, a per-configuration summary over seeds
(summary.csv, summary.md) and plots."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence

import numpy as np

from az_jax.apps.sweep.run import DONE_FILE, is_finished, trial_dir
from az_jax.apps.sweep.spec import Sweep
from az_jax.runtime.files import write_csv
from az_jax.runtime.metrics import read_metrics as read_records


def final_metrics(records: list[dict]) -> dict:
    """The last iteration's metrics, each eval/ metric from the last iteration that has it, and the mean
    positions/s over all iterations but the first (which includes compilation). No "time": it is a timestamp."""
    if not records:
        return {}
    out = {k: v for k, v in records[-1].items() if not k.startswith(("eval/", "time"))}
    for record in records:
        out.update({k: v for k, v in record.items() if k.startswith("eval/")})
    steady = [r["perf/positions_per_second"] for r in records[1:] if "perf/positions_per_second" in r]
    if steady:
        out["perf/positions_per_second"] = float(np.mean(steady))
    return out


def collect(sweep: Sweep, sweep_dir: str) -> list[dict]:
    """One row per trial: name, status, its params, then its final metrics. Writes SWEEP_DIR/results.csv."""
    rows = []
    for trial in sweep.trials:
        run_dir = trial_dir(sweep_dir, trial)
        records = read_records(run_dir)
        status = "done" if is_finished(run_dir, trial.config) else "partial" if records else "pending"
        row = {"trial": trial.name, "status": status, **trial.params, **final_metrics(records)}
        if os.path.exists(os.path.join(run_dir, DONE_FILE)):
            with open(os.path.join(run_dir, DONE_FILE)) as f:
                row["wall_minutes"] = json.load(f)["seconds"] / 60  # the whole process: start-up, compiles, evals
        rows.append(row)
    metric_keys = sorted({k for r in rows for k in r} - {"trial", "status", *sweep.axes})
    columns = ["trial", "status", *sweep.axes, *metric_keys]
    write_csv(os.path.join(sweep_dir, "results.csv"), rows, columns)
    return rows


def summarise(sweep: Sweep, rows: list[dict], metrics: Sequence[str]) -> list[dict]:
    """Rows grouped by their params without the seed: n seeds done, mean and sample standard deviation (ddof 1) of
    each metric over those seeds."""
    groups: dict[tuple, list[dict]] = {}
    axes = [a for a in sweep.axes if a != "seed"]
    for row in rows:
        groups.setdefault(tuple(row[a] for a in axes), []).append(row)
    out = []
    for key, members in groups.items():
        done = [r for r in members if r["status"] == "done"]
        entry = {**dict(zip(axes, key)), "seeds": len(done)}
        for metric in metrics:
            values = [float(r[metric]) for r in done if r.get(metric, "") != ""]
            entry[f"{metric} mean"] = float(np.mean(values)) if values else float("nan")
            entry[f"{metric} std"] = float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")
        out.append(entry)
    return out


def markdown_table(summary: list[dict], digits: int = 3) -> str:
    """The summary as a Markdown table, each metric's mean and standard deviation in one cell ("0.850 ± 0.020")."""
    if not summary:
        return ""
    number = lambda v: f"{v:.{digits}f}" if math.isfinite(v) else "–"
    columns, cells = [], []
    for key in summary[0]:
        if key.endswith(" std"):
            continue
        if key.endswith(" mean"):
            metric = key[: -len(" mean")]
            columns.append(metric)
            cells.append(
                lambda row, m=metric: (
                    number(row[f"{m} mean"])
                    + (f" ± {number(row[f'{m} std'])}" if math.isfinite(row[f"{m} std"]) else "")
                )
            )
        else:
            columns.append(key)
            cells.append(lambda row, k=key: str(row[k]))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row) for cell in cells) + " |" for row in summary]
    return "\n".join(lines)


def default_metrics(rows: list[dict]) -> list[str]:
    keys = {k for r in rows for k in r}
    return sorted(k for k in keys if k.startswith("eval/") and k.endswith("_score")) + [
        k for k in ("train/value_loss", "train/policy_loss") if k in keys
    ]


def plot(sweep: Sweep, sweep_dir: str, rows: list[dict], metrics: Sequence[str]) -> list[str]:
    """One PNG per metric under SWEEP_DIR/plots: its curve over iterations for every trial (one colour per
    configuration, seeds share it) and, on the right, its final value against the configuration (each seed a dot,
    the mean a bar). Returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(os.path.join(sweep_dir, "plots"), exist_ok=True)
    axes = [a for a in sweep.axes if a != "seed"]
    configs = list(dict.fromkeys(tuple(t.params[a] for a in axes) for t in sweep.trials))
    colours = plt.get_cmap("viridis")(np.linspace(0, 0.9, max(len(configs), 1)))
    label = lambda key: ", ".join(f"{a}={v}" for a, v in zip(axes, key)) or "base"
    paths = []
    for metric in metrics:
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
        for trial in sweep.trials:
            key = tuple(trial.params[a] for a in axes)
            points = [
                (r["iteration"], r[metric])
                for r in read_records(trial_dir(sweep_dir, trial))
                if metric in r and not (metric.startswith("train/") and r.get("train/steps", 1) == 0)
            ]  # before learning
            if points:
                xs, ys = zip(*points)
                first_seed = trial.params["seed"] == sweep.trials[0].params["seed"]
                left.plot(
                    xs,
                    ys,
                    marker="o" if metric.startswith("eval/") else None,
                    ms=3,
                    color=colours[configs.index(key)],
                    alpha=0.85,
                    label=label(key) if first_seed else None,
                )
        left.set(xlabel="iteration", ylabel=metric, title=f"{sweep.name}: {metric}")
        left.grid(alpha=0.3)
        if left.get_legend_handles_labels()[0]:
            left.legend(fontsize=7)
        for x, key in enumerate(configs):
            values = [
                float(r[metric])
                for r in rows
                if tuple(r[a] for a in axes) == key and r["status"] == "done" and r.get(metric, "") != ""
            ]
            if values:
                right.bar(x, np.mean(values), color=colours[x], alpha=0.5)
                right.scatter([x] * len(values), values, color="k", s=12, zorder=3)
        right.set_xticks(range(len(configs)), [label(k) for k in configs], rotation=30, ha="right", fontsize=7)
        right.set(ylabel=f"final {metric}", title="final value (dots: seeds, bar: mean)")
        right.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        path = os.path.join(sweep_dir, "plots", re.sub(r"[^A-Za-z0-9_]+", "_", metric) + ".png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def report(sweep: Sweep, sweep_dir: str, metrics: Sequence[str] | None = None) -> tuple[list[dict], str, list[str]]:
    """collect + summary.csv + plots; returns (rows, the summary as a Markdown table, plot paths)."""
    rows = collect(sweep, sweep_dir)
    metrics = list(metrics) if metrics else default_metrics(rows)
    summary = summarise(sweep, rows, metrics)
    if summary:
        write_csv(os.path.join(sweep_dir, "summary.csv"), summary)
    paths = plot(sweep, sweep_dir, rows, metrics) if any(r["status"] != "pending" for r in rows) else []
    table = markdown_table(summary)
    with open(os.path.join(sweep_dir, "summary.md"), "w") as f:
        f.write(table + "\n")
    return rows, table, paths
