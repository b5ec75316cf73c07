"""`az-jax` — a thin command line over the library, one module per subcommand:

    train    train (or resume) a run                                              train.py
    play     play against a trained agent in the terminal                         play.py
    bench    throughput, compile time, memory, FLOPs and MFU of a config          bench.py
    eval     a trained run (or any player) against another player                 eval.py
    ladder   Elo of every checkpoint of a run, plus baselines                     ladder.py
    sweep    a hyperparameter sweep from a JSON spec                              sweep.py
    render   a position (from a game record or a move list) as SVG or PNG         render.py

Each module has `add_parser(subparsers)` and `run(args) -> int`. `main` sets up the devices before JAX starts its
backend, then runs the subcommand, and is the one place that turns the library's errors into one line
`az-jax: error: ...` with exit status 2.

On CPU, one XLA device uses about one core, so before JAX starts its backend the CLI asks for as many host devices as
the machine has cores, each on one thread (az_jax/host_devices.py; override with --devices or JAX's own XLA_FLAGS).
Importing this package starts no backend: the subcommands import the library (pgx, the games) inside `run`.
"""

import argparse
import sys

import jax

from az_jax import distributed, host_devices
from az_jax.apps.cli import bench, eval, ladder, play, render, sweep, train

# The subcommands in the order `az-jax --help` lists them; each one's name is its module's.
COMMANDS = {module.__name__.rsplit(".", 1)[1]: module for module in (train, play, bench, eval, ladder, sweep, render)}


def error(message: str, code: int = 2) -> int:
    """Prints `az-jax: error: MESSAGE` on stderr; returns the exit status."""
    print(f"az-jax: error: {message}", file=sys.stderr)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="az-jax", description="AlphaZero in JAX: train and play.")
    parser.add_argument(
        "--devices",
        type=int,
        default=None,
        help="host CPU devices to create (default: one per core; ignored on GPU/TPU)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    host_devices.setup(args.devices)  # the backend starts on first use, so this still takes effect
    if args.command == "sweep":  # this process only plans and launches trials: it leaves the accelerators to them
        jax.config.update("jax_platforms", "cpu")
    if args.command == "train":  # joins a multi-process run, if any, before the imports below start JAX's backend
        try:
            distributed.initialize(args.coordinator, args.num_processes, args.process_id)
        except distributed.DistributedError as e:
            return error(str(e))
    # Imported only now: importing them starts JAX's backend, which the lines above set up.
    from az_jax.checkpoint import CheckpointError
    from az_jax.config import ConfigError
    from az_jax.engines import EngineError
    from az_jax.evaluation.players import PlayerSpecError
    from envs.records import RecordError

    try:
        return COMMANDS[args.command].run(args)
    except (ConfigError, CheckpointError, RecordError, PlayerSpecError) as e:
        return error(str(e))
    except EngineError as e:
        return error(f"engine failed: {e}")
