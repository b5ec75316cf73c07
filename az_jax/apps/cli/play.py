"""`az-jax play`: a person against a trained agent in the terminal (az_jax/apps/terminal.py): an AlphaZero run
(az_jax/runtime/agent.py) or an AlphaGo agent directory (az_jax/alphago/agent.py, played by
az_jax/alphago/play_agent.py)."""

import argparse

from az_jax.apps.cli.args import (
    MAX_SIMULATIONS,
    add_weights,
    alphago_directory_agent,
    bounded_int,
    non_negative_int,
    path,
    seed,
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("play", help="play against a trained agent in the terminal")
    parser.add_argument(
        "--run-dir",
        type=path,
        required=True,
        help="a run directory, one checkpoint directory, an agent file (`az-jax export`), a shipped agent's name "
        "(tic_tac_toe, connect_four, go_9x9) or an AlphaGo agent directory (`az-jax alphago pipeline`)",
    )
    parser.add_argument("--step", type=non_negative_int, default=None, help="checkpoint step (default: latest)")
    parser.add_argument("--first", choices=["human", "agent"], default="human", help="who moves first")
    parser.add_argument(
        "--simulations", type=bounded_int(1, MAX_SIMULATIONS), default=None, help="search simulations per agent move"
    )
    parser.add_argument("--seed", type=seed, default=0)
    add_weights(parser)
    parser.set_defaults(weights=None)  # None: not given (an AlphaGo directory takes none); "best" for a run
    return parser


def run(args) -> int:
    from az_jax.alphago.agent import is_agent_directory  # the same
    from az_jax.apps.terminal import play_session  # the same
    from az_jax.runtime.agent import load_agent  # starts JAX's backend: after main's device set-up

    if is_agent_directory(args.run_dir):
        agent = alphago_directory_agent(args)
    else:
        agent = load_agent(args.run_dir, step=args.step, weights=args.weights or "best")
    play_session(agent, human_first=args.first == "human", num_simulations=args.simulations, seed=args.seed)
    return 0
