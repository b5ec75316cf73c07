"""Checks tic-tac-toe runs exhaustively: the share of the 4,520 reachable non-terminal positions in which the raw
policy and the N-simulation search play a minimax-optimal move (az_jax/evaluation/tic_tac_toe_oracle.py).

    python -m experiments.tic_tac_toe.tic_tac_toe_check RUN_DIR [RUN_DIR ...] [--simulations 32] [--json FILE]
"""

import argparse
import json
import sys

import jax
import jax.numpy as jnp

from az_jax.evaluation import tic_tac_toe_oracle as oracle
from az_jax.runtime.agent import load_agent


def check_run(run_dir: str, simulations: int, step: int | None = None) -> dict:
    agent = load_agent(run_dir, step)
    policy = lambda states, key: jnp.argmax(agent.policy_value(states)[0], axis=-1)
    raw = oracle.check(policy, jax.random.key(0)).summary()
    searched = oracle.check(agent.player(simulations), jax.random.key(0)).summary()
    return {
        "run_dir": run_dir,
        "step": agent.step,
        "seed": agent.config.seed,
        "raw": raw,
        f"search{simulations}": searched,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+")
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--step", type=int, default=None)
    parser.add_argument("--json", default=None, help="append one JSON line per run to this file")
    args = parser.parse_args(argv)
    for run_dir in args.run_dirs:
        row = check_run(run_dir, args.simulations, args.step)
        s = row[f"search{args.simulations}"]
        print(
            f"{run_dir} step {row['step']} seed {row['seed']}: raw policy {row['raw']['optimal']:.4f} "
            f"({row['raw']['mistakes']} wrong), {args.simulations}-simulation search {s['optimal']:.4f} "
            f"({s['mistakes']} wrong; won {s['optimal_won']:.4f}, drawn {s['optimal_drawn']:.4f})"
        )
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
