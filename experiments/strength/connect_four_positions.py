r"""Generates the connect-four solver benchmark's position set (az_jax/evaluation/connect_four_solver.py):

python -m experiments.strength.connect_four_positions --positions 1000 --seed 0 \
    --out experiments/data/connect_four_positions.jsonl
"""

import argparse
import collections
import os
import sys
import time

from az_jax.evaluation import connect_four_solver as solver_lib


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-depth", type=int, default=36)
    parser.add_argument("--p-good", type=float, default=0.8)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if os.path.exists(args.out):
        print(f"connect_four_positions: {args.out} exists; not overwriting it", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    positions = solver_lib.generate(args.positions, seed=args.seed, max_depth=args.max_depth, p_good=args.p_good)
    solver_lib.save(args.out, positions)
    values = collections.Counter(positions.value.tolist())
    print(
        f"{len(positions.moves)} positions ({values[1]} won, {values[0]} drawn for the mover), depth "
        f"{positions.depth.min()}-{positions.depth.max()}, {time.perf_counter() - t0:.0f} s -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
