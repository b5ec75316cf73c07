"""`az-jax sweep`: a hyperparameter sweep from a JSON spec (az_jax/apps/sweep/): trials in parallel processes,
finished ones skipped, then results.csv and plots. This process only plans and launches the trials: `main` keeps it
on the CPU."""

import argparse
import sys

from az_jax.apps.cli.args import path, positive_int


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "sweep",
        help="run a hyperparameter sweep (JSON spec): trials in parallel "
        "processes, finished ones skipped, results.csv and plots",
    )
    parser.add_argument(
        "spec", type=path, help="the sweep spec, a JSON file (see az_jax/apps/sweep/spec.py and experiments/README.md)"
    )
    parser.add_argument(
        "--sweep-dir", type=path, default=None, help="where the trials' run dirs go (default runs/sweeps/NAME)"
    )
    parser.add_argument(
        "--parallel", type=positive_int, default=1, help="trials at once, each on its own share of the devices"
    )
    parser.add_argument(
        "--devices",
        dest="device_ids",
        default=None,
        metavar="IDS",
        help="cores (CPU) or accelerators to use, e.g. 0-3 or 0,2 (default: all), split over --parallel",
    )
    parser.add_argument("--platform", default="auto", help="auto (ask JAX), cpu, gpu or tpu")
    parser.add_argument("--shard", default=None, metavar="I/N", help="run only trials with index = I mod N (N hosts)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key in every trial")
    parser.add_argument(
        "--metrics",
        default=None,
        help="comma-separated metrics to tabulate and plot (default: eval scores, value and policy loss)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the trials' commands, run nothing")
    parser.add_argument("--collect-only", action="store_true", help="run nothing; rebuild the table and plots")
    return parser


def run(args) -> int:
    from az_jax.apps.sweep import sweep_command  # starts JAX's backend: after main pinned this process to the CPU

    return sweep_command(
        args.spec,
        sweep_dir=args.sweep_dir,
        parallel=args.parallel,
        devices=args.device_ids,
        platform=args.platform,
        shard=args.shard,
        extra_set=args.set or [],
        metrics=args.metrics.split(",") if args.metrics else None,
        dry_run=args.dry_run,
        collect_only=args.collect_only,
        log=lambda message: print(f"az-jax sweep: {message}", file=sys.stderr, flush=True),
    )
