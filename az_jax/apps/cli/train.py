"""`az-jax train`: train (or resume) a run of one game and preset, with config overrides, on one or several
processes."""

import argparse
import os
import sys


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("train", help="train (or resume) a run")
    parser.add_argument("--game", default="connect_four", help="game name (see envs.GAMES)")
    parser.add_argument(
        "--preset",
        default="small",
        help="small (laptop CPU / one GPU), paper (AlphaZero, full scale), alphago_zero (AlphaGo Zero, "
        "full scale) or small_agz (small with the AlphaGo Zero switches)",
    )
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    parser.add_argument("--run-dir", default=None, help="output directory (default runs/GAME-PRESET)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="several processes: process 0's address and a free port (env AZ_JAX_COORDINATOR; "
        "not needed on a Cloud TPU pod slice, SLURM or Open MPI)",
    )
    parser.add_argument(
        "--num-processes",
        type=int,
        default=None,
        metavar="N",
        help="several processes: how many (env AZ_JAX_NUM_PROCESSES)",
    )
    parser.add_argument(
        "--process-id",
        type=int,
        default=None,
        metavar="I",
        help="several processes: this one's index 0..N-1 (env AZ_JAX_PROCESS_ID)",
    )
    return parser


def run(args) -> int:
    from az_jax import config as config_lib  # starts JAX's backend: after main's device set-up and multi-process join
    from az_jax.loop import train_and_evaluate  # the same

    config = config_lib.override(config_lib.preset(args.game, args.preset), args.set or [])
    run_dir = args.run_dir or os.path.join("runs", f"{args.game}-{args.preset}")
    print(f"az-jax: training {config.game} ({args.preset} preset) in {os.path.abspath(run_dir)}", file=sys.stderr)
    try:
        train_and_evaluate(config, run_dir, progress=not args.no_progress)
    except KeyboardInterrupt:
        print("\naz-jax: interrupted; run the same command again to resume from the last checkpoint", file=sys.stderr)
        return 130
    return 0
