"""The cost of one simulation of az_jax.frontends.tree_search.TreeSearch against the tree's capacity, on a trained
run's network (the measurement behind `tree_search.default_capacity`).

    python -m experiments.engine.tree_capacity RUN_DIR [--capacities 512,2048,8192] [--simulations 128] [--repeats 3]

Each capacity: one warm-up search (compiles), then `repeats` searches of `simulations` from the initial position on a
fresh tree; prints one JSON line per capacity with the tree's bytes and the milliseconds per simulation.
"""

import argparse
import json
import sys
import time

import jax

from az_jax.frontends.tree_search import TreeSearch, default_capacity, node_bytes
from az_jax.runtime.agent import load_agent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--capacities", default="512,2048,8192")
    parser.add_argument("--simulations", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    agent = load_agent(args.run_dir)
    state = agent.env.init(jax.random.key(0))
    per_node = node_bytes(agent.env)
    print(
        json.dumps({"game": agent.config.game, "node_bytes": per_node, "default_capacity": default_capacity(agent.env)})
    )
    for capacity in [int(c) for c in args.capacities.split(",")]:
        ts = TreeSearch(agent, capacity=capacity, chunk=args.simulations)
        ts.reset(state)
        ts.search(args.simulations)
        start = time.perf_counter()
        for _ in range(args.repeats):
            ts.reset(state)
            ts.search(args.simulations)
        seconds = (time.perf_counter() - start) / args.repeats
        row = {
            "capacity": capacity,
            "tree_mb": capacity * per_node / 2**20,
            "ms_per_simulation": 1000 * seconds / args.simulations,
        }
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
