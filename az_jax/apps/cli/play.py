"""`az-jax play`: a person against a trained agent in the terminal (az_jax/apps/terminal.py)."""

import argparse


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("play", help="play against a trained agent in the terminal")
    parser.add_argument("--run-dir", required=True, help="a run directory or one checkpoint directory")
    parser.add_argument("--step", type=int, default=None, help="checkpoint step (default: latest)")
    parser.add_argument("--first", choices=["human", "agent"], default="human", help="who moves first")
    parser.add_argument("--simulations", type=int, default=None, help="search simulations per agent move")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def run(args) -> int:
    from az_jax.agent import load_agent  # starts JAX's backend: after main's device set-up
    from az_jax.apps.terminal import play_session  # the same

    agent = load_agent(args.run_dir, step=args.step)
    play_session(agent, human_first=args.first == "human", num_simulations=args.simulations, seed=args.seed)
    return 0
