"""Elo against minutes for the runs of an equal-wall-clock ablation (experiments/strength/strength_ablation.py).

    python -m experiments.strength.strength_elo --runs runs/strength_katago \
        --out experiments/strength/results/strength_katago \
        --variants t4,t4_mix,t4_pool,t4_cap --seeds 0,1,2 --minutes 3.3,6.7,10 --games 40

For every run RUNS/VARIANT-sSEED: the checkpoints nearest to the given minutes of its own training wall-clock
(`az_jax.evaluation.ladder.training_seconds`: the sum of its iteration seconds; the last point takes the last
checkpoint), rated by `az-jax ladder`'s pairings and fit (each checkpoint against the next, each against the fixed
opponent; one Bradley-Terry fit per run, anchored on that opponent = 0). Each run's ladder keeps its matches in
RUN/ladder/matches.jsonl, so an interrupted script resumes. Writes OUT/elo.jsonl (a line per run and point),
OUT/elo.md (mean ± standard error over seeds per variant and point) and OUT/elo_vs_minutes.png.
"""

import argparse
import csv
import json
import os
import sys

import numpy as np

from az_jax.evaluation import ladder
from az_jax.runtime.files import replaced_whole


def steps_at(run_dir: str, minutes: list[float]) -> list[int]:
    """The checkpoint steps nearest to each of `minutes` of the run's training time (the last point: the last)."""
    seconds = ladder.training_seconds(run_dir)
    steps = [s for s in ladder.checkpoint_steps(run_dir) if s in seconds]
    if not steps:
        raise SystemExit(f"strength_elo: {run_dir} has no checkpoint with a metrics line")
    chosen = [min(steps, key=lambda s: abs(seconds[s] - 60 * m)) for m in minutes[:-1]] + [steps[-1]]
    return sorted(set(chosen))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", required=True, help="the ablation's run dirs (VARIANT-sSEED)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--variants", required=True)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--minutes", default="3.3,6.7,10", help="points of training time, minutes")
    parser.add_argument("--games", type=int, default=40, help="games per pairing")
    parser.add_argument("--opponent", default="mcts:sims=200", help="the fixed opponent, rated 0")
    parser.add_argument("--simulations", type=int, default=None, help="checkpoints' search (default: the run's)")
    args = parser.parse_args(argv)
    try:
        minutes = sorted(float(m) for m in args.minutes.split(","))
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error("--minutes and --seeds take comma-separated numbers")
    variants = args.variants.split(",")
    runs = {(v, s): os.path.join(args.runs, f"{v}-s{s}") for v in variants for s in seeds}
    missing = [d for d in runs.values() if not os.path.isdir(d)]
    if missing:
        parser.error(f"no run dir {missing[0]}")

    rows = []
    for (variant, seed), run_dir in runs.items():
        steps = steps_at(run_dir, minutes)
        print(f"{variant} seed {seed}: steps {steps}", file=sys.stderr, flush=True)
        ladder.run_ladder(
            run_dir,
            games=args.games,
            simulations=args.simulations,
            baselines=(args.opponent,),
            anchor=args.opponent,
            steps=",".join(map(str, steps)),
            log=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
        )
        with open(os.path.join(run_dir, "ladder", "ratings.csv"), newline="") as f:
            for r in csv.DictReader(f):
                if r["step"]:
                    rows.append(
                        {
                            "variant": variant,
                            "seed": seed,
                            "step": int(r["step"]),
                            "minutes": float(r["train_seconds"]) / 60,
                            "elo": float(r["elo"]),
                            "elo_low": float(r["elo_low"]),
                            "elo_high": float(r["elo_high"]),
                        }
                    )
    os.makedirs(args.out, exist_ok=True)
    with replaced_whole(os.path.join(args.out, "elo.jsonl")) as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    write_summary(args.out, rows, variants, len(minutes), args)
    return 0


def write_summary(out: str, rows: list[dict], variants: list[str], points: int, args) -> None:
    """Per variant, the k-th checkpoint of every seed pooled: mean minutes, mean Elo ± standard error over seeds."""
    table = [
        f"Elo against {args.opponent} (= 0), each run's own ladder fit ({args.games} games per pairing), "
        "mean ± standard error over seeds",
        "",
        "| variant | " + " | ".join(f"point {k + 1}: minutes, Elo" for k in range(points)) + " |",
        "|---|" + "---|" * points,
    ]
    curves = {}
    for v in variants:
        by_seed: dict[int, list[dict]] = {}
        for r in rows:
            if r["variant"] == v:
                by_seed.setdefault(r["seed"], []).append(r)
        k_max = min(len(rs) for rs in by_seed.values())
        xs, ys, es, cells = [], [], [], []
        for k in range(k_max):
            pts = [sorted(rs, key=lambda r: r["step"])[k] for rs in by_seed.values()]
            elo = np.array([p["elo"] for p in pts])
            se = elo.std(ddof=1) / np.sqrt(len(elo)) if len(elo) > 1 else float("nan")
            x = float(np.mean([p["minutes"] for p in pts]))
            xs.append(x)
            ys.append(float(elo.mean()))
            es.append(se)
            cells.append(f"{x:.1f}, {elo.mean():+.0f} ± {se:.0f}")
        curves[v] = (xs, ys, es)
        table.append(f"| {v} | " + " | ".join(cells) + " |")
    with open(os.path.join(out, "elo.md"), "w") as f:
        f.write("\n".join(table) + "\n")
    print("\n".join(table))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for v, (xs, ys, es) in curves.items():
        ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=v)
    ax.axhline(0, linestyle="--", color="grey", label=args.opponent)
    ax.set_xlabel("training time (minutes)")
    ax.set_ylabel("Elo")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "elo_vs_minutes.png"), dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
