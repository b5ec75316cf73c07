"""Prints a run's evaluation curve from RUN_DIR/metrics.jsonl: iteration, wall-clock minutes of training (the
pauses of a run stopped and resumed left out: `active_minutes`), gradient steps, the score against each fixed baseline
of the run's `eval_opponents` (W + D/2 over the games), the shares of optimal moves on connect four's solver set when
the run logged them (`eval_solver_simulations`: raw policy, search, search in drawn positions) and the losses.

    python -m experiments.strength.learning_curve runs/connect_four-small [--plot curve.png] [--json curve.json]

`--plot` also draws every score and share against training minutes.
"""

import argparse
import json
import re

from az_jax.runtime.metrics import read_metrics

_SCORE = re.compile(r"^eval/vs_(.+)_score$")


GAP_SLACK_S = 60.0  # a record this much later than its own work came after a stop (kill, SIGTERM) and a resume


def active_minutes(records: list[dict]) -> list[float]:
    """Minutes of training up to each record: the time between consecutive records, except where a record came more
    than GAP_SLACK_S after its own work (its iteration and its evaluations' seconds), i.e. the run was stopped and
    resumed in between: there only that work counts (the restart's compilation is left out with the pause)."""
    total, out, previous = 0.0, [], None
    for r in records:
        own = r["perf/iteration_seconds"] + sum(
            v for k, v in r.items() if k.startswith("eval/") and k.endswith("_seconds")
        )
        between = own if previous is None else r["time"] - previous["time"]
        total += own if between > own + GAP_SLACK_S else between
        out.append(total / 60)
        previous = r
    return out


def curve(run_dir: str) -> tuple[list[str], list[dict]]:
    """(baseline names, one row per evaluated iteration)."""
    records = read_metrics(run_dir)
    if not records:
        raise SystemExit(f"no metrics in {run_dir}")
    minutes = active_minutes(records)
    names: list[str] = []
    rows, steps = [], 0
    for r, minute in zip(records, minutes):
        steps += r.get("train/steps", 0)
        found = [m.group(1) for k in r if (m := _SCORE.match(k))]
        if not found and "eval/solver_raw" not in r:  # not an evaluated iteration (a run may score the solver set only)
            continue
        names += [n for n in found if n not in names]
        games = {n: int(r[f"eval/vs_{n}_wins"] + r[f"eval/vs_{n}_draws"] + r[f"eval/vs_{n}_losses"]) for n in found}
        rows.append(
            {
                "iteration": r["iteration"],
                "minutes": minute,
                "steps": int(steps),
                "games": games,
                "scores": {n: r[f"eval/vs_{n}_score"] for n in found},
                "solver": tuple(r.get(f"eval/solver_{k}") for k in ("raw", "search", "search_drawn")),
                "value_loss": r["train/value_loss"],
                "policy_loss": r["train/policy_loss"],
            }
        )
    return names, rows


def plot(path: str, title: str, names: list[str], rows: list[dict]) -> None:
    """Scores against each baseline and the solver shares (when logged) against training minutes, to `path`."""
    import matplotlib  # local: slow to import, and only the plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    minutes = [row["minutes"] for row in rows]
    for n in names:
        ax.plot(minutes, [row["scores"].get(n, float("nan")) for row in rows], "o-", label=f"score vs {n}")
    for i, label in enumerate(("solver set: raw policy", "solver set: search", "solver set: search, drawn")):
        values = [row["solver"][i] for row in rows]
        if any(v is not None for v in values):
            ax.plot(minutes, [float("nan") if v is None else v for v in values], "s--", label=label)
    ax.set_xlabel("training time (minutes, evaluations included)")
    ax.set_ylabel("score / share of optimal moves")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--plot", default=None, help="also draw the curve against minutes to this PNG")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    names, rows = curve(args.run_dir)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"run_dir": args.run_dir, "baselines": names, "rows": rows}, f, indent=1)
    if args.plot:
        plot(args.plot, args.run_dir.rstrip("/").split("/")[-1], names, rows)
    solver = any(row["solver"][0] is not None for row in rows)
    solver_heads = ["solver raw", "solver search", "solver search, drawn"] if solver else []
    heads = [f"score vs {n} (games)" for n in names] + solver_heads
    print("| iteration | minutes | gradient steps | " + " | ".join(heads) + " | value loss | policy loss |")
    print("|---" * (5 + len(heads)) + "|")
    for row in rows:
        cells = [f"{row['scores'][n]:.3f} ({row['games'][n]})" if n in row["scores"] else "" for n in names]
        cells += ["" if v is None else f"{v:.3f}" for v in row["solver"]] if solver else []
        print(
            f"| {row['iteration']} | {row['minutes']:.1f} | {row['steps']} | {' | '.join(cells)} | "
            f"{row['value_loss']:.3f} | {row['policy_loss']:.3f} |"
        )
