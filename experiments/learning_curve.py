"""Prints a run's evaluation curve from RUN_DIR/metrics.jsonl: iteration, wall-clock since the start, gradient
steps, the score against uniform random (W + D/2 over the games) and the losses.

    python experiments/learning_curve.py runs/connect_four-small
"""
import argparse

from az_jax.metrics import read_metrics


def curve(run_dir: str) -> list[dict]:
    records = read_metrics(run_dir)
    if not records:
        raise SystemExit(f"no metrics in {run_dir}")
    start = records[0]["time"] - records[0]["perf/iteration_seconds"]
    rows, steps = [], 0
    for r in records:
        steps += r.get("train/steps", 0)
        if "eval/vs_random_score" in r:
            games = r["eval/vs_random_wins"] + r["eval/vs_random_draws"] + r["eval/vs_random_losses"]
            rows.append({"iteration": r["iteration"], "minutes": (r["time"] - start) / 60, "steps": int(steps),
                         "games": int(games), "score": r["eval/vs_random_score"],
                         "value_loss": r["train/value_loss"], "policy_loss": r["train/policy_loss"]})
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    args = parser.parse_args()
    print(f"| iteration | minutes | gradient steps | games | score vs random | value loss | policy loss |")
    print(f"|---|---|---|---|---|---|---|")
    for row in curve(args.run_dir):
        print(f"| {row['iteration']} | {row['minutes']:.1f} | {row['steps']} | {row['games']} | {row['score']:.3f} | "
              f"{row['value_loss']:.3f} | {row['policy_loss']:.3f} |")
