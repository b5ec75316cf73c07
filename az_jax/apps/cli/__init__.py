"""`az-jax` — a thin command line over the library, one module per subcommand:

    train    train (or resume) a run                                              train.py
    play     play against a trained agent in the terminal                         play.py
    bench    throughput, compile time, memory, FLOPs and MFU of a config          bench.py
    preflight  compile a run for a TPU slice / GPU on this machine: memory, FLOPs   preflight.py
    eval     a trained run (or any player) against another player                 eval.py
    ladder   Elo of every checkpoint of a run, plus baselines                     ladder.py
    export   a run's network as one small agent file (.azagent)                   export.py
    sweep    a hyperparameter sweep from a JSON spec                              sweep.py
    render   a position (from a game record or a move list) as SVG or PNG         render.py
    gtp      a trained Go agent as a GTP engine (Sabaki, GoGui, Lizzie, referees)   gtp.py
    uci      a trained chess agent as a UCI engine (cutechess, lichess-bot, GUIs)   uci.py
    alphago  the AlphaGo (2016) pipeline: expert games and data, SL policy, ...     alphago.py

Each module has `add_parser(subparsers)` and `run(args) -> int`; args.py holds the parser class and the number types
the arguments are checked with. `main` sets up the devices before JAX starts its backend, then runs the subcommand,
and is the one place that turns a user-caused failure (a bad argument, path, file encoding, record, config, player
spec, sweep spec, checkpoint, engine, or a run that diverged) into one line `az-jax: error: ...` with exit status 2;
a bug keeps its traceback.

On CPU, one XLA device uses about one core, so before JAX starts its backend the CLI asks for as many host devices as
the machine has cores, each on one thread (az_jax/runtime/host_devices.py; override with --devices or JAX's own
XLA_FLAGS). Importing this package starts no backend: the subcommands import the library (pgx, the games) inside `run`.
"""

import functools
import signal
import sys
import threading

import jax

from az_jax.apps.cli import alphago, bench, eval, export, gtp, ladder, play, preflight, render, sweep, train, uci
from az_jax.apps.cli.args import Parser, UsageError, devices
from az_jax.runtime import distributed, host_devices

# The subcommands in the order `az-jax --help` lists them; each one's name is its module's.
COMMANDS = {
    module.__name__.rsplit(".", 1)[1]: module
    for module in (train, play, bench, preflight, eval, ladder, export, sweep, render, gtp, uci, alphago)
}


def one_line(message: str) -> str:
    """`message` on one line (the lines of a multi-line message joined with spaces)."""
    return " ".join(line.strip() for line in str(message).splitlines() if line.strip())


def error(message: str, code: int = 2) -> int:
    """Prints `az-jax: error: MESSAGE` (on one line) on stderr; returns the exit status."""
    print(f"az-jax: error: {one_line(message)}", file=sys.stderr)
    return code


def os_error_message(e: OSError) -> str:
    """What an OSError on a user's path says: the path(s) and the system's reason, e.g. "cannot use 'runs/x': Not a
    directory"."""
    paths = [str(p) for p in (e.filename, e.filename2) if p is not None]
    reason = e.strerror or str(e) or type(e).__name__
    return f"cannot use {' or '.join(repr(p) for p in paths)}: {reason}" if paths else reason


@functools.cache  # built once per process: main may run many times in one (the tests)
def build_parser() -> Parser:
    parser = Parser(prog="az-jax", description="AlphaZero in JAX: train and play.")
    parser.add_argument(
        "--devices",
        type=devices,
        default=None,
        help="host CPU devices to create (default: one per core; ignored on GPU/TPU)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(subparsers)
    return parser


def setup_process(args) -> None:
    """What must happen before JAX starts its backend: the host devices, the sweep's CPU pin, joining a multi-process
    run. Raises DistributedError on a bad multi-process set-up."""
    host_devices.setup(args.devices)  # the backend starts on first use, so this still takes effect
    if args.command == "sweep":  # this process only plans and launches trials: it leaves the accelerators to them
        jax.config.update("jax_platforms", "cpu")
    if args.command == "preflight":  # compiles for compile-only TPU/GPU devices: JAX's own backend stays the CPU
        preflight.before_backend()
    if args.command == "train":  # joins a multi-process run, if any, before the library's imports start the backend
        distributed.initialize(args.coordinator, args.num_processes, args.process_id)


def main(argv: list[str] | None = None) -> int:
    """`az-jax ARGV`: runs the subcommand; the exit status. The one place that turns every user-caused failure (bad
    arguments, paths, encodings, records, configs, specs, checkpoints, engines) into one line `az-jax: error: ...`
    with status 2; anything else is a bug and keeps its traceback."""
    # SIGTERM (kill, a scheduler's time limit) exits like Ctrl-C does, through Python's exit path, so engine process
    # groups are ended and checkpoints being written are waited for (SIGKILL cannot be caught: resume handles it).
    if threading.current_thread() is threading.main_thread():  # signal handlers belong to the main thread
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        args = build_parser().parse_args(argv)
        setup_process(args)
    except (UsageError, distributed.DistributedError) as e:
        return error(str(e))
    # Imported only now: importing them starts JAX's backend, which the lines above set up.
    from az_jax.core.config import ConfigError
    from az_jax.engines import EngineError
    from az_jax.evaluation.players import PlayerSpecError
    from az_jax.runtime import preemption
    from az_jax.runtime.checkpoint import CheckpointError
    from az_jax.runtime.loop import DivergenceError
    from az_jax.runtime.preemption import Preempted
    from envs import UnknownGameError
    from envs.records import RecordError

    try:
        return COMMANDS[args.command].run(args)
    except (UsageError, ConfigError, CheckpointError, RecordError, PlayerSpecError, UnknownGameError) as e:
        return error(str(e))
    except Preempted as e:  # SIGTERM during training: the iteration in flight finished and was saved
        return error(str(e), preemption.EXIT_STATUS)
    except DivergenceError as e:  # a run whose loss or weights stopped being finite: its settings, not a bug
        return error(str(e))
    except EngineError as e:
        return error(f"engine failed: {e}")
    except UnicodeDecodeError as e:
        return error(f"a file is not UTF-8 text: {e.reason} at byte {e.start}")
    except OSError as e:
        return error(os_error_message(e))
