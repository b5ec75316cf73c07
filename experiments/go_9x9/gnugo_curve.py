"""A go_9x9 run's strength against GNU Go as it trains: each chosen checkpoint plays GNU Go at each level (`az-jax
eval`: colours alternating, 4 random opening plies, Tromp-Taylor area scoring by pgx), against the run's own
training time up to that checkpoint (the sum of metrics.jsonl's `perf/iteration_seconds`, which leaves out the
minutes between a stop and a resume).

    python -m experiments.go_9x9.gnugo_curve RUN_DIR [--steps 50,100,...] [--levels 1,5,10] [--games 40]
        [--json FILE] [--simulations N] [--seed S]

Prints one row per checkpoint (score and mean area margin per level) and appends every match's summary, with the
training minutes, to --json (one line each). A match already in the file (same run, step, level, games,
simulations, seed) is not played again, so the curve grows as the run does. Another --seed plays other random openings,
so a checkpoint's score can rest on more than one set of 40 games.
"""

import argparse
import os
import sys

from az_jax.evaluation.evaluate import evaluate
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.files import append_jsonl, read_jsonl
from az_jax.runtime.metrics import read_metrics


def training_minutes(run_dir: str) -> dict[int, float]:
    """{iteration: minutes of training up to and including it} from RUN_DIR/metrics.jsonl."""
    total, minutes = 0.0, {}
    for record in read_metrics(run_dir):
        total += record.get("perf/iteration_seconds", 0.0)
        minutes[int(record["iteration"])] = total / 60
    return minutes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--steps", default=None, help="comma-separated checkpoints (default: every saved one)")
    parser.add_argument("--levels", default="1,5,10")
    parser.add_argument("--games", type=int, default=40)
    parser.add_argument("--simulations", type=int, default=None, help="default: the run's eval_simulations")
    parser.add_argument("--json", default=None, help="append each match's summary here (and skip those in it)")
    parser.add_argument("--seed", type=int, default=0, help="the matches' seed: their random openings")
    args = parser.parse_args(argv)
    manager = ckpt.make_manager(args.run_dir, read_only=True)
    saved = sorted(manager.all_steps())
    steps = [int(s) for s in args.steps.split(",")] if args.steps else saved
    missing = [s for s in steps if s not in saved]
    if missing:
        print(f"gnugo_curve: {args.run_dir} has no checkpoint {missing} (has {saved})", file=sys.stderr)
        return 2
    minutes = training_minutes(args.run_dir)
    levels = [int(level) for level in args.levels.split(",")]
    done = read_jsonl(args.json) if args.json and os.path.exists(args.json) else []
    run = os.path.abspath(args.run_dir)
    key = lambda r: (r["run"], r["step"], r["level"], r["games"], r["simulations_asked"], r.get("seed", 0))
    seen = {key(r): r for r in done}
    print("| step | training minutes | " + " | ".join(f"GNU Go {level}: score, margin" for level in levels) + " |")
    for step in steps:
        cells = []
        for level in levels:
            row_key = (run, step, level, args.games, args.simulations, args.seed)
            row = seen.get(row_key)
            if row is None:
                summary = evaluate(
                    args.run_dir,
                    f"gnugo:level={level}",
                    games=args.games,
                    step=step,
                    simulations=args.simulations,
                    seed=args.seed,
                    save_games=False,
                    log=lambda *a: None,
                )
                row = {
                    "run": run,
                    "step": step,
                    "level": level,
                    "games": args.games,
                    "simulations_asked": args.simulations,
                    "training_minutes": round(minutes.get(step, float("nan")), 2),
                    **summary.to_json(),
                }
                if args.json:
                    append_jsonl(args.json, row)
            margin = row.get("margin_mean")  # None when no game was scored; 0.0 is a margin
            cells.append(f"{row['score']:.3f}, {float('nan') if margin is None else margin:+.1f}")
        print(f"| {step} | {minutes.get(step, float('nan')):.1f} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
