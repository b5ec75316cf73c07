"""`az-jax export`: a run's network as one small agent file (its config and one set of weights, no optimizer state or
replay), loadable wherever a run directory is (az_jax/runtime/agent_file.py)."""

import argparse

from az_jax.apps.cli.args import add_weights, non_negative_int, path


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("export", help="a run's network as one small agent file (.azagent)")
    parser.add_argument("run_dir", type=path, help="the run (or one checkpoint directory) to export")
    parser.add_argument("out", type=path, help="the agent file to write, NAME.azagent (never replaced if it exists)")
    parser.add_argument("--step", type=non_negative_int, default=None, help="checkpoint step (default: latest)")
    add_weights(parser)
    return parser


def run(args) -> int:
    import os

    from az_jax.runtime.agent import export_agent  # starts JAX's backend: after main's device set-up

    agent = export_agent(args.run_dir, args.out, step=args.step, weights=args.weights)
    size = os.path.getsize(args.out)
    print(
        f"az-jax export: {agent.config.game} agent of checkpoint {agent.step} (weights of iteration "
        f"{agent.weights_iteration}) -> {args.out} ({size / 2**20:.2f} MiB)"
    )
    return 0
