"""`az-jax gtp`: a trained Go agent as a GTP engine on stdin/stdout (az_jax/frontends/gtp_engine.py), for Sabaki,
GoGui, Lizzie, gtp2ogs and tournament referees: an AlphaZero run (searched by PUCT unless --search says otherwise) or
an AlphaGo agent directory (`az-jax alphago pipeline`; searched by APV-MCTS, az_jax/alphago/play_agent.py).

    az-jax gtp --run-dir runs/go_9x9-small [--step N] [--simulations 200] [--resign-threshold -0.8]
    az-jax gtp --run-dir runs/alphago/ag9-cpu [--simulations 400]

Standard output carries the protocol only; the start-up line and notes go to standard error.
"""

import argparse
import math
import re
import sys

from az_jax.apps.cli.args import (
    MAX_SIMULATIONS,
    UsageError,
    add_search,
    add_weights,
    alphago_directory_agent,
    bounded_int,
    engine_search,
    non_negative_int,
    path,
    seed,
)


def _resign_threshold(text: str) -> float:
    """The argparse type of a value threshold in [-1, 1]."""
    if not re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)", text.strip()):
        raise argparse.ArgumentTypeError(f"expected a number from -1 to 1, got {text!r}")
    value = float(text)
    if not (math.isfinite(value) and -1.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"must be a number from -1 to 1, got {text!r}")
    return value


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("gtp", help="a trained Go agent as a GTP engine on stdin/stdout")
    parser.add_argument(
        "--run-dir",
        type=path,
        required=True,
        help="a go_9x9 or go_19x19 run, one checkpoint dir, an agent file, a shipped agent's name (go_9x9) or an "
        "AlphaGo agent directory",
    )
    parser.add_argument("--step", type=non_negative_int, default=None, help="checkpoint step (default: latest)")
    parser.add_argument(
        "--simulations",
        type=bounded_int(1, MAX_SIMULATIONS),
        default=None,
        help="visits per move with no clock, the kept subtree's included (default: the run's); the cap with a clock",
    )
    parser.add_argument(
        "--resign-threshold",
        type=_resign_threshold,
        default=None,
        help="resign when the search's value for the engine is below this (in [-1, 1]; -1 never resigns; default -0.8)",
    )
    parser.add_argument(
        "--capacity",
        type=bounded_int(2, 1_000_000),
        default=None,
        help="nodes of the search tree kept between moves (a search stops when it is full; default: as many as fit "
        "16 MiB, 2048 on 9x9 and 256 on 19x19: a larger tree makes every simulation slower on CPU; an AlphaGo "
        "agent: at least twice its simulations)",
    )
    parser.add_argument(
        "--chunk", type=bounded_int(1, 65_536), default=32, help="simulations per search call (time checks between)"
    )
    parser.add_argument("--seed", type=seed, default=0, help="the search's tie-breaking noise")
    parser.add_argument(
        "--leaves",
        type=bounded_int(1, 1024),
        default=None,
        help="an AlphaGo agent: leaves per tree per step under virtual loss, evaluated together (default: its "
        "preset's, 1 without)",
    )
    parser.add_argument(
        "--expansion-threshold",
        type=bounded_int(0, 1_000_000),
        default=None,
        help="an AlphaGo agent: visits before a node of the kept tree is expanded with p_σ's priors, p_τ's until "
        "then (needs DIR/tree.npz; the paper's 40; default: its preset's, 0: at once)",
    )
    add_search(parser)
    add_weights(parser)
    parser.set_defaults(search=None, weights=None)  # None: not given (an AlphaGo directory takes neither)
    return parser


def run(args) -> int:
    from az_jax.alphago.agent import is_agent_directory  # starts JAX's backend: after main's device set-up
    from az_jax.frontends import gtp_engine, gtp_protocol, tree_search  # the same (imports pgx)
    from az_jax.runtime.agent import load_agent  # the same

    capacity = args.capacity
    if is_agent_directory(args.run_dir):
        if args.search not in (None, "alphago"):
            raise UsageError(f"--search {args.search}: an AlphaGo agent searches by alphago (the paper's selection)")
        agent, search = alphago_directory_agent(args), "alphago"
        leaves = args.leaves or agent.config.search.leaves
        if capacity is None:  # room for the preset's search twice over (19×19's 16 MiB default holds 256 nodes)
            sims = args.simulations or agent.default_simulations
            capacity = max(tree_search.default_capacity(agent.env), 2 * sims + leaves)
    else:
        for flag, value in (("--leaves", args.leaves), ("--expansion-threshold", args.expansion_threshold)):
            if value is not None:
                raise UsageError(f"{flag}: for AlphaGo agent directories (it is a part of AlphaGo's search)")
        agent = load_agent(args.run_dir, step=args.step, weights=args.weights or "best")
        search, leaves = engine_search(args.search or "puct"), 1
    if agent.config.game not in gtp_engine.GO_GAMES:
        raise UsageError(f"{args.run_dir} is a {agent.config.game} run; GTP engines play Go (`az-jax uci` for chess)")
    threshold = gtp_engine.DEFAULT_RESIGN_THRESHOLD if args.resign_threshold is None else args.resign_threshold
    engine = gtp_engine.GoEngine(
        agent,
        simulations=args.simulations,
        resign_threshold=threshold,
        capacity=capacity,
        chunk=args.chunk,
        seed=args.seed,
        search=search,
        leaves=leaves,
    )
    sims = args.simulations or agent.default_simulations
    print(
        f"az-jax gtp: {agent.config.game} {getattr(agent, 'label', None) or f'checkpoint {agent.step}'}, "
        f"{sims} simulations per move, komi {engine.komi:g}; GTP on stdin/stdout",
        file=sys.stderr,
        flush=True,
    )
    return gtp_protocol.serve(engine, sys.stdin.buffer, sys.stdout)
