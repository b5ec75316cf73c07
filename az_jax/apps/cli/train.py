"""`az-jax train`: train (or resume) a run of one game and preset, with config overrides, on one or several
processes."""

import argparse
import errno
import json
import os
import sys

from az_jax.apps.cli.args import check_game_overrides, non_negative_int, path, positive_int


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("train", help="train (or resume) a run")
    parser.add_argument("--game", default="connect_four", help="game name (see envs.GAMES)")
    parser.add_argument(
        "--preset",
        default="small",
        help="small (laptop CPU / one GPU), hours (connect_four: a 4 x 48 network and game forking for ~4 hours of 2 "
        "fast CPU cores; "
        "go_9x9: small with liberty planes and the eye rule for ~2 hours), "
        "paper (AlphaZero, full scale), alphago_zero (AlphaGo Zero, full scale) or small_agz (small with the AlphaGo "
        "Zero switches)",
    )
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    parser.add_argument("--run-dir", type=path, default=None, help="output directory (default runs/GAME-PRESET)")
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
        type=positive_int,
        default=None,
        metavar="N",
        help="several processes: how many (env AZ_JAX_NUM_PROCESSES)",
    )
    parser.add_argument(
        "--process-id",
        type=non_negative_int,
        default=None,
        metavar="I",
        help="several processes: this one's index 0..N-1 (env AZ_JAX_PROCESS_ID)",
    )
    return parser


def check_run_dir_files(run_dir: str) -> None:
    """`run_dir`, if it exists, is a directory whose config.json, if it has one, is readable UTF-8 JSON: an OSError or
    ConfigError naming the path otherwise. Reads only."""
    from az_jax.core.config import ConfigError  # starts JAX's backend: after main's device set-up

    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), run_dir)
    path = os.path.join(run_dir, "config.json")
    if os.path.lexists(path):
        with open(path, "rb") as f:
            data = f.read()
        try:
            json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path} is not UTF-8 text (byte {e.start}); it is not an az_jax config") from None
        except (ValueError, RecursionError) as e:  # RecursionError: nested thousands deep
            raise ConfigError(f"{path} is not valid JSON ({e}); it is not an az_jax config") from None


def make_run_dir(run_dir: str) -> None:
    """Makes `run_dir` if needed; an OSError naming it when it is not writable."""
    os.makedirs(run_dir, exist_ok=True)
    if not os.access(run_dir, os.W_OK | os.X_OK):
        raise OSError(errno.EACCES, "not writable (read-only file system or no permission)", run_dir)


def run(args) -> int:
    # these start JAX's backend: after main's device set-up and multi-process join
    from az_jax.core import overrides as overrides_lib
    from az_jax.core import presets as presets_lib
    from az_jax.core import validation
    from az_jax.evaluation import in_training

    check_game_overrides(args.game, args.set or [])
    config = overrides_lib.override(presets_lib.preset(args.game, args.preset), args.set or [])
    run_dir = args.run_dir or os.path.join("runs", f"{args.game}-{args.preset}")
    check_run_dir_files(run_dir)
    run = in_training.prepare(config, run_dir)  # the one check of the run, before anything is written
    make_run_dir(run_dir)
    print(f"az-jax: training {config.game} ({args.preset} preset) in {os.path.abspath(run_dir)}", file=sys.stderr)
    for line in validation.warnings(config):
        print(f"az-jax: warning: {line}", file=sys.stderr)
    try:
        in_training.train(run, progress=not args.no_progress)
    except KeyboardInterrupt:
        print("\naz-jax: interrupted; run the same command again to resume from the last checkpoint", file=sys.stderr)
        return 130
    return 0
