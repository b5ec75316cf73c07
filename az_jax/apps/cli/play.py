"""`az-jax play`: a person against a trained agent in the terminal (az_jax/apps/terminal.py)."""

import argparse

from az_jax.apps.cli.args import MAX_SIMULATIONS, add_weights, bounded_int, non_negative_int, path, seed


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("play", help="play against a trained agent in the terminal")
    parser.add_argument("--run-dir", type=path, required=True, help="a run directory or one checkpoint directory")
    parser.add_argument("--step", type=non_negative_int, default=None, help="checkpoint step (default: latest)")
    parser.add_argument("--first", choices=["human", "agent"], default="human", help="who moves first")
    parser.add_argument(
        "--simulations", type=bounded_int(1, MAX_SIMULATIONS), default=None, help="search simulations per agent move"
    )
    parser.add_argument("--seed", type=seed, default=0)
    add_weights(parser)
    return parser


def run(args) -> int:
    from az_jax.agent import load_agent  # starts JAX's backend: after main's device set-up
    from az_jax.apps.terminal import play_session  # the same

    agent = load_agent(args.run_dir, step=args.step, weights=args.weights)
    play_session(agent, human_first=args.first == "human", num_simulations=args.simulations, seed=args.seed)
    return 0
