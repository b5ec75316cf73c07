"""`az-jax ladder`: the Elo of every checkpoint of a run, rated together with baseline players; a table and plots."""

import argparse
import sys

from az_jax.apps.cli.args import add_weights, path, positive_int, seed, simulations


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("ladder", help="Elo of every checkpoint of a run (plus baselines): table and plots")
    parser.add_argument("run_dir", type=path, help="the run directory")
    parser.add_argument("--games", type=positive_int, default=100, help="games per pairing (default 100)")
    parser.add_argument(
        "--simulations",
        type=simulations,
        default=None,
        help="search simulations per move for the checkpoints (default: the run's eval_simulations)",
    )
    parser.add_argument(
        "--baselines",
        default="random;mcts:sims=200",
        help="';'-separated player specs rated with the checkpoints (default 'random;mcts:sims=200')",
    )
    parser.add_argument("--anchor", default="random", help="the player whose Elo is 0 (default: random)")
    parser.add_argument("--steps", default=None, help="comma-separated checkpoint steps (default: all)")
    parser.add_argument("--seed", type=seed, default=0)
    add_weights(parser)
    return parser


def run(args) -> int:
    from az_jax.evaluation.ladder import run_ladder  # starts JAX's backend: after main's device set-up

    log = lambda message: print(f"az-jax ladder: {message}", file=sys.stderr, flush=True)
    table = run_ladder(
        args.run_dir,
        games=args.games,
        simulations=args.simulations,
        baselines=[b for b in args.baselines.split(";") if b],
        anchor=args.anchor,
        seed=args.seed,
        steps=args.steps,
        weights=args.weights,
        log=log,
    )
    print(table)
    return 0
