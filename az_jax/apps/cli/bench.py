"""`az-jax bench`: throughput, compile time, memory, FLOPs and MFU of a config (az_jax/apps/bench.py); the JSON on
stdout or in a file, then a short table."""

import argparse
import json
import os
import sys

import jax

from az_jax.apps.cli.args import check_game_overrides, devices, path, positive_int


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("bench", help="measure throughput, compile time, memory, FLOPs and MFU of a config")
    parser.add_argument("--game", default="connect_four", help="game name (see envs.GAMES)")
    parser.add_argument("--preset", default="small", help="small (laptop CPU / one GPU) or paper (full scale)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    parser.add_argument(
        "--devices",
        type=devices,
        default=argparse.SUPPRESS,
        help="devices to use (on CPU: host devices to create; default: one per core)",
    )
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed calls per measurement (median reported)")
    parser.add_argument("--json", type=path, default=None, metavar="PATH", help="write the JSON here (default: stdout)")
    return parser


def run(args) -> int:
    # these start JAX's backend: after main's device set-up
    from az_jax.apps import bench
    from az_jax.core import config as config_lib
    from az_jax.core import overrides as overrides_lib
    from az_jax.core import presets as presets_lib

    check_game_overrides(args.game, args.set or [])
    config = overrides_lib.override(presets_lib.preset(args.game, args.preset), args.set or [])
    if args.devices and args.devices > len(jax.devices()):
        raise config_lib.ConfigError(f"--devices {args.devices}: only {len(jax.devices())} devices are available")
    config.validate(args.devices or len(jax.devices()))  # before anything compiles
    devices = jax.devices()[: args.devices] if args.devices else None
    log = lambda message: print(f"az-jax bench: {message}", file=sys.stderr, flush=True)
    result = bench.run_benchmark(config, devices=devices, repeats=args.repeats, log=log)
    result.update(preset=args.preset, overrides=list(args.set or []))
    text = json.dumps(result, indent=2)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    print(bench.format_table(result))
    return 0
