"""Runs a hyperparameter sweep from a JSON spec: one command for every trial, in parallel processes, skipping the
finished ones, then one results table (CSV) with plots (see az_jax/apps/sweep/spec.py for the spec,
experiments/README.md for examples with their results).

    python -m experiments.sweeps.sweep experiments/sweeps/c4_simulations.json [--sweep-dir DIR] [--parallel N]
                                [--devices 0-3] [--platform auto|cpu|gpu|tpu] [--shard I/N] [--set k=v ...]
                                [--dry-run] [--collect-only] [--metrics a,b]

The same as `az-jax sweep ...`. A bad spec (unknown key, invalid value, a trial that does not fit the devices) is a
one-line `az-jax: error: ...` with exit status 2 before any trial starts.
"""

import sys

from az_jax.apps import cli  # noqa: E402  (imports no JAX backend: the sweep process pins itself to CPU in cli.main)

if __name__ == "__main__":
    sys.exit(cli.main(["sweep", *sys.argv[1:]]))
