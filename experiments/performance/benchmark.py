"""Benchmarks one game/config: self-play positions/s and simulations/s, training samples/s, the network / env step /
tree bookkeeping split of a self-play ply, compile time, peak memory, FLOPs and MFU (see az_jax/apps/bench.py).

    python -m experiments.performance.benchmark --game connect_four --preset small [--set k=v ...] [--devices N] \
        [--repeats R] [--json out.json]

The same as `az-jax bench ...`: on CPU, --devices host devices are created before JAX starts (default: one per core).
Prints the JSON (or writes it to --json) and then a short table.
"""

import sys

from az_jax.apps import cli  # noqa: E402  (imports no JAX backend: devices are set up inside cli.main)

if __name__ == "__main__":
    sys.exit(cli.main(["bench", *sys.argv[1:]]))
