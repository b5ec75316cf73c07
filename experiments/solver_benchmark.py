"""Connect four against the exact solver: the share of optimal moves of a run's raw policy and of its N-simulation
search on the labelled position set (az_jax/evaluation/connect_four_solver.py), overall and in won / drawn positions,
and optionally its score against rollout MCTS (`az-jax eval`).

    python experiments/solver_benchmark.py RUN_DIR [RUN_DIR ...] [--step K] [--simulations 64]
        [--positions experiments/data/connect_four_positions.jsonl] [--mcts 200,1000 --games 100] [--json FILE]

Any other connect-four player is scored the same way: wrap it as a `(states, key) -> actions` function and call
`connect_four_solver.evaluate`.
"""

import argparse
import json
import sys

import jax
import jax.numpy as jnp

from az_jax.agent import load_agent
from az_jax.checkpoint import CheckpointError
from az_jax.evaluation import connect_four_solver as solver_lib
from az_jax.evaluation.evaluate import evaluate

DEFAULT_POSITIONS = solver_lib.DEFAULT_POSITIONS


def benchmark_agent(agent, positions: solver_lib.PositionSet, simulations: int) -> dict:
    raw = lambda states, key: jnp.argmax(agent.policy_value(states)[0], axis=-1)
    return {
        "raw": solver_lib.evaluate(raw, positions, jax.random.key(0)).summary(),
        f"search{simulations}": solver_lib.evaluate(agent.player(simulations), positions, jax.random.key(1)).summary(),
    }


def line(name: str, summary: dict) -> str:
    return (
        f"{name}: {summary['optimal']:.3f} optimal ({summary['positions']} positions; won "
        f"{summary['optimal_won']:.3f} of {summary['won']}, drawn {summary['optimal_drawn']:.3f} of "
        f"{summary['drawn']})"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+")
    parser.add_argument("--step", type=int, default=None)
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--positions", default=DEFAULT_POSITIONS)
    parser.add_argument(
        "--mcts", default="", help="comma-separated rollout-MCTS simulation counts to play, e.g. 200,1000"
    )
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--json", default=None, help="append one JSON line per run to this file")
    args = parser.parse_args(argv)
    try:
        positions = solver_lib.load(args.positions)
    except (OSError, ValueError) as e:
        print(f"solver_benchmark: {e}", file=sys.stderr)
        return 2
    for run_dir in args.run_dirs:
        try:
            agent = load_agent(run_dir, args.step)
        except CheckpointError as e:
            print(f"solver_benchmark: {e}", file=sys.stderr)
            return 2
        if agent.config.game != "connect_four":
            print(f"solver_benchmark: {run_dir} trains {agent.config.game}, not connect_four", file=sys.stderr)
            return 2
        row = {"run_dir": run_dir, "step": agent.step, **benchmark_agent(agent, positions, args.simulations)}
        print(f"{run_dir} @ {agent.step}")
        for name in ("raw", f"search{args.simulations}"):
            print("  " + line(name, row[name]))
        for sims in [int(s) for s in args.mcts.split(",") if s.strip()]:
            summary = evaluate(
                run_dir,
                f"mcts:sims={sims}",
                games=args.games,
                step=agent.step,
                simulations=args.simulations,
                save_games=False,
                log=lambda *a: None,
            )
            row[f"vs_mcts{sims}"] = summary.to_json()
            print("  " + summary.line())
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
