"""Any game's small preset against variants of it at equal wall-clock: each variant trains for the same minutes, then
its last checkpoint plays each opponent (`az-jax eval`), for games without a solver set (othello, hex, go). Against a
Go engine the table also gives the agent's mean area margin, which still moves when every game is lost.

    python -m experiments.presets.preset_race --game othello --out experiments/presets/results/othello \\
        --minutes 10 --seeds 0 \\
        --variant "preset=" --variant "gumbel16_sym=search=gumbel num_simulations=16 augment_symmetries=true" \\
        --opponent random --opponent mcts:sims=100 --games 100 --parallel 2 --devices 1

Training is experiments/strength/strength_ablation.py's protocol (`az-jax train --preset small --set eval_every=0 --set
checkpoint_every=2 --set seed=S <the variant's keys>` under `timeout -s TERM`). Each variant plays with its own
search at the run's eval_simulations (`--simulations` to change it for all). One JSON line per variant and seed is
appended to OUT/results.jsonl and OUT/results.md is rewritten; a variant and seed already there is not run again.
"""

import argparse
import os
import sys
import time

import numpy as np

from az_jax.runtime.files import append_jsonl  # noqa: E402
from experiments.strength.strength_ablation import ROOT, pending_jobs, start_training, trained


def _variant(text: str) -> tuple[str, list[str]]:
    name, sep, keys = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f'expected NAME=KEY=VALUE KEY=VALUE..., got {text!r} ("NAME=" is the preset)')
    return name, keys.split()


def play(run_dir: str, opponents: list[str], games: int, simulations: int | None) -> dict:
    """The last checkpoint's score against each opponent, as `az-jax eval` appends it to RUN/eval/results.jsonl."""
    from az_jax.evaluation.evaluate import evaluate  # JAX starts once the training subprocesses have finished

    scores = {}
    for opponent in opponents:
        own = opponent.startswith("run:") and os.path.abspath(opponent[4:].split("@")[0].split(":")[0])
        if own == os.path.abspath(run_dir):
            continue  # a variant against its own run (`--opponent run:RUNS/preset-s0` rates the others against it)
        summary = evaluate(run_dir, opponent, games=games, simulations=simulations, save_games=False, log=lambda _: 0)
        scores[opponent] = {k: getattr(summary, k) for k in ("wins", "draws", "losses", "elo", "elo_low", "elo_high")}
        scores[opponent]["score"] = summary.score
        margin = dict(summary.extra).get("margin_mean")  # Go against an engine: the mean area margin
        if margin is not None:
            scores[opponent]["margin_mean"] = margin
    return scores


def write_summary(out: str, rows: list[dict], opponents: list[str]) -> None:
    # every opponent any row was scored against (an earlier invocation's too), in order of first appearance
    opponents = list(dict.fromkeys([o for r in rows for o in r["scores"]] + list(opponents)))
    by_variant: dict[str, list[dict]] = {}
    for row in rows:
        by_variant.setdefault(row["variant"], []).append(row)
    lines = [
        "| variant | settings | seeds | iterations | " + " | ".join(f"vs {o}" for o in opponents) + " |",
        "|---|---|---|---|" + "---|" * len(opponents),
    ]
    for name, group in by_variant.items():
        cells = []
        for opponent in opponents:
            scored = [r["scores"][opponent] for r in group if opponent in r["scores"]]
            wdl = " ".join(f"+{s['wins']}={s['draws']}−{s['losses']}" for s in scored)
            margins = [s["margin_mean"] for s in scored if "margin_mean" in s]
            margin = f", mean margin {np.mean(margins):+.1f}" if margins else ""
            cells.append(f"{np.mean([s['score'] for s in scored]):.3f} ({wdl}{margin})" if scored else "")
        its = ", ".join(str(r["train"]["iterations"]) for r in group)
        settings = " ".join(group[0]["assignments"]) or "(preset)"
        lines.append(f"| {name} | {settings} | {len(group)} | {its} | " + " | ".join(cells) + " |")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", required=True)
    parser.add_argument("--out", required=True, help="where results.jsonl and results.md go")
    parser.add_argument("--runs", default=None, help="where the run dirs go (default runs/race-GAME)")
    parser.add_argument("--variant", type=_variant, action="append", required=True, help='NAME="KEY=VALUE ..."')
    parser.add_argument("--opponent", action="append", required=True, help="player spec, as az-jax eval takes it")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--simulations", type=int, default=None)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--devices", type=int, default=0)
    args = parser.parse_args(argv)
    from az_jax.core.config import ConfigError
    from az_jax.core.overrides import override
    from az_jax.core.presets import preset

    try:
        for _, keys in args.variant:
            override(preset(args.game), keys)
    except ConfigError as e:
        print(f"preset_race: {e}", file=sys.stderr)
        return 2
    if args.parallel < 1 or args.devices < 0 or args.games < 1 or args.minutes <= 0:
        print("preset_race: --parallel and --games must be >= 1, --devices >= 0, --minutes > 0", file=sys.stderr)
        return 2
    variants = dict(args.variant)
    runs = args.runs or os.path.join(ROOT, "runs", f"race-{args.game}")
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(runs, exist_ok=True)
    results = os.path.join(args.out, "results.jsonl")
    try:
        rows, jobs = pending_jobs(results, runs, list(variants), args.seeds)
    except ValueError as e:
        print(f"preset_race: {e}", file=sys.stderr)
        return 2
    for first in range(0, len(jobs), args.parallel):
        batch = jobs[first : first + args.parallel]
        start = time.time()
        procs = [
            start_training(
                os.path.join(runs, f"{n}-s{s}"), variants[n], args.minutes * 60, s, args.devices, game=args.game
            )
            for n, s in batch
        ]
        for proc in procs:
            proc.wait()
        for name, seed in batch:
            run_dir = os.path.join(runs, f"{name}-s{seed}")
            if not os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
                print(f"preset_race: {run_dir} finished no iteration in {args.minutes} minutes", file=sys.stderr)
                return 1
            row = {
                "game": args.game,
                "variant": name,
                "seed": seed,
                "assignments": variants[name],
                "minutes": args.minutes,
                "parallel": len(batch),
                "devices": args.devices,
                "train": trained(run_dir, start),
                "scores": play(run_dir, args.opponent, args.games, args.simulations),
            }
            rows.append(row)
            append_jsonl(results, row)
            scores = ", ".join(f"{o} {s['score']:.3f}" for o, s in row["scores"].items())
            print(f"{name} seed {seed}: {row['train']['iterations']} iterations; {scores}", flush=True)
            write_summary(args.out, rows, args.opponent)
    if rows:
        write_summary(args.out, rows, args.opponent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
