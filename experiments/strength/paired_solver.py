"""Two connect-four runs on the same solved positions, position by position: which one plays the optimal move where
the other does not, at the same checkpoints (az_jax/evaluation/connect_four_solver.py).

    python -m experiments.strength.paired_solver RUN_A RUN_B --steps K1,K2,... [--steps-b L1,L2,...] [--simulations 64]
        [--positions experiments/data/connect_four_positions.jsonl] [--json FILE] [--ensemble-b] [--set-b KEY=VALUE ...]

Two shares of one position set differ by less noise than two independent shares: only the positions where exactly
one run is right carry the difference. For each checkpoint and for the raw policy and the N-simulation search, it
prints both shares, those discordant counts (A right and B wrong, B right and A wrong), the difference B − A with its
paired standard error sqrt(n_AB + n_BA − (n_AB − n_BA)²/P) / P, and the two-sided exact sign-test p-value of the
discordant counts (McNemar's exact test). Summed over the checkpoints, the counts are not independent draws (the same
positions come back at every checkpoint), so the pooled p-value is an indication, not a test; the per-checkpoint
differences are also given as a mean and their spread. With `--ensemble-b` run B acts with `eval_symmetry_ensemble`
on, and `--set-b KEY=VALUE` sets any greedy-play key for run B (`az_jax/core/play_keys.py`, e.g. `eval_search=puct`);
RUN_B may then be RUN_A, to measure the setting alone. `--steps-b` pairs each of A's checkpoints with another of B's
(two runs whose iterations cost differently, compared at equal compute).
"""

import argparse
import json
import os
import sys

import numpy as np
from scipy import stats

from az_jax.core.config import ConfigError
from az_jax.evaluation import connect_four_solver as solver_lib
from az_jax.evaluation.evaluate import with_play_settings
from az_jax.runtime.checkpoint import CheckpointError
from experiments.strength.solver_benchmark import (
    DEFAULT_POSITIONS,
    ENSEMBLE,
    agent_results,
    load_connect_four,
)


def _sign_test(a_only: int, b_only: int) -> float:
    """McNemar's exact two-sided p-value of the discordant counts (1 when there are none)."""
    return float(stats.binomtest(b_only, a_only + b_only).pvalue) if a_only + b_only else 1.0


def paired(a: np.ndarray, b: np.ndarray) -> dict:
    """Two [P] bool arrays (optimal move or not, same positions) -> shares, discordant counts, B − A with its paired
    standard error, and McNemar's exact two-sided p-value."""
    n = a.size
    a_only, b_only = int((a & ~b).sum()), int((b & ~a).sum())
    diff = (b_only - a_only) / n
    se = float(np.sqrt(max(a_only + b_only - (b_only - a_only) ** 2 / n, 0.0)) / n)
    return {
        "a": float(a.mean()),
        "b": float(b.mean()),
        "a_only": a_only,
        "b_only": b_only,
        "diff": diff,
        "se": se,
        "p": _sign_test(a_only, b_only),
    }


def pooled(rows: list[dict]) -> dict:
    """The per-checkpoint comparisons of one measure -> summed discordant counts (with their sign-test p-value, an
    indication only) and the mean and standard deviation of the per-checkpoint differences."""
    a_only, b_only = sum(r["a_only"] for r in rows), sum(r["b_only"] for r in rows)
    diffs = np.array([r["diff"] for r in rows])
    return {
        "a_only": a_only,
        "b_only": b_only,
        "p_summed": _sign_test(a_only, b_only),
        "mean_diff": float(diffs.mean()),
        "sd_diff": float(diffs.std(ddof=1)) if diffs.size > 1 else 0.0,
        "checkpoints": int(diffs.size),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a")
    parser.add_argument("run_b")
    parser.add_argument("--steps", required=True, help="comma-separated checkpoints, present in both runs")
    parser.add_argument("--steps-b", default=None, help="B's checkpoints, one for each of --steps (default: the same)")
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--positions", default=DEFAULT_POSITIONS)
    parser.add_argument("--json", default=None, help="write the comparison here (an existing file is kept)")
    parser.add_argument("--ensemble-b", action="store_true", help="run B acts with eval_symmetry_ensemble on")
    parser.add_argument(
        "--set-b",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a greedy-play setting for run B (repeatable; the keys of az_jax/core/play_keys.py)",
    )
    args = parser.parse_args(argv)
    if args.json and os.path.exists(args.json):
        print(f"paired_solver: {args.json} exists; not overwriting it", file=sys.stderr)
        return 2
    try:
        steps = [int(k) for k in args.steps.split(",")]
        steps_b = [int(k) for k in args.steps_b.split(",")] if args.steps_b else steps
        if len(steps_b) != len(steps):
            raise ValueError(f"--steps-b names {len(steps_b)} checkpoints, --steps {len(steps)}")
        positions = solver_lib.load(args.positions)
    except (OSError, ValueError) as e:
        print(f"paired_solver: {e}", file=sys.stderr)
        return 2
    play_b = tuple(args.set_b) + (ENSEMBLE if args.ensemble_b else ())
    measures = ("raw", f"search{args.simulations}")
    rows = []
    for step, step_b in zip(steps, steps_b):
        results = {}
        for arm, run_dir, arm_step in (("a", args.run_a, step), ("b", args.run_b, step_b)):
            try:
                agent = load_connect_four(run_dir, arm_step)
                if arm == "b":
                    agent = with_play_settings(agent, play_b)  # ConfigError on a key outside greedy play
            except (CheckpointError, ConfigError) as e:
                print(f"paired_solver: {e}", file=sys.stderr)
                return 2
            results[arm] = agent_results(agent, positions, args.simulations)
        row: dict = {"step": step, "step_b": step_b}
        label = f"{step}" if step_b == step else f"{step}/{step_b}"
        for i, name in enumerate(measures):
            row[name] = r = paired(results["a"][i].optimal, results["b"][i].optimal)
            print(
                f"{label} {name}: A {r['a']:.4f}, B {r['b']:.4f}; A only {r['a_only']}, B only {r['b_only']}; "
                f"B − A {r['diff']:+.4f} ± {r['se']:.4f}, p {r['p']:.3f}"
            )
        rows.append(row)
    summary = {name: pooled([row[name] for row in rows]) for name in measures}
    for name, s in summary.items():
        print(
            f"over {s['checkpoints']} checkpoints, {name}: A only {s['a_only']}, B only {s['b_only']} "
            f"(p {s['p_summed']:.3f}, the same positions each time); B − A per checkpoint "
            f"{s['mean_diff']:+.4f} (sd {s['sd_diff']:.4f})"
        )
    if args.json:
        out = {
            "run_a": args.run_a,
            "run_b": args.run_b,
            "positions": args.positions,
            "num_positions": int(positions.moves.shape[0]),
            "simulations": args.simulations,
            "ensemble_b": args.ensemble_b,
            "play_b": list(play_b),
            "checkpoints": rows,
            "over_checkpoints": summary,
        }
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
