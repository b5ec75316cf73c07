"""`az-jax uci`: a trained chess agent as a UCI engine on stdin/stdout (az_jax/frontends/uci_engine.py), for
cutechess-cli, python-chess, lichess-bot and chess GUIs:

    az-jax uci --run-dir runs/chess [--step N] [--simulations 800]

The engine answers `uci` at once, and loads the checkpoint and compiles its search in the background; `isready`
waits for that (the first time: seconds on a GPU, tens of seconds for pgx chess on a CPU).
"""

import argparse
import os

from az_jax.apps.cli.args import (
    MAX_SIMULATIONS,
    UsageError,
    add_search,
    add_weights,
    bounded_int,
    engine_search,
    non_negative_int,
    path,
    seed,
)

MAX_CAPACITY = 1 << 24  # tree nodes; each holds a pgx chess state and its children's statistics (~150 kB)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("uci", help="a trained chess agent as a UCI engine on stdin/stdout")
    parser.add_argument(
        "--run-dir", type=path, required=True, help="a chess run directory, one checkpoint directory or an agent file"
    )
    parser.add_argument("--step", type=non_negative_int, default=None, help="checkpoint step (default: latest)")
    parser.add_argument(
        "--simulations",
        type=bounded_int(1, MAX_SIMULATIONS),
        default=None,
        help="simulations per move when the GUI sets no time or node limit: the Simulations option's default "
        "(default: the run's evaluation simulations)",
    )
    parser.add_argument(
        "--capacity",
        type=bounded_int(2, MAX_CAPACITY),
        default=None,
        help="search tree nodes, the most simulations one move can hold (about 160 kB of memory each; default 256: "
        "a larger tree makes every simulation slower on CPU)",
    )
    parser.add_argument("--seed", type=seed, default=0)
    add_search(parser)
    add_weights(parser)
    return parser


def run(args) -> int:
    import io
    import sys

    from az_jax.frontends.uci_engine import serve  # the same
    from az_jax.runtime.agent import load_agent  # starts JAX's backend: after main's device set-up

    search = engine_search(args.search)
    if not os.path.isdir(args.run_dir) and not os.path.isfile(args.run_dir):
        raise UsageError(f"no run or checkpoint at {os.path.abspath(args.run_dir)}")

    def load():
        """Run in the engine's warm-up thread: loading pgx chess and the checkpoint takes seconds, and GUIs and
        python-chess give the `uci` handshake about 10 (its errors reach main from the next command that waits)."""
        agent = load_agent(args.run_dir, step=args.step, weights=args.weights)
        if agent.config.game != "chess":
            raise UsageError(f"{args.run_dir} is a {agent.config.game} run; az-jax uci plays chess")
        print(
            f"az-jax uci: checkpoint {agent.step} of {os.path.abspath(args.run_dir)}, "
            f"{args.simulations or agent.default_simulations} simulations per move by default",
            file=sys.stderr,
        )
        return agent

    # Bytes that are not UTF-8 (a GUI's junk) become U+FFFD instead of ending the engine with a decode error.
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    try:
        options = {"simulations": args.simulations, "capacity": args.capacity, "seed": args.seed, "search": search}
        return serve(load, stdin, sys.stdout, **options)
    except KeyboardInterrupt:  # Ctrl-C in a terminal session: the engine ends as at `quit`
        return 130
