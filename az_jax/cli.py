"""`az-jax` — a thin command line over the library: train, play.

On CPU, one XLA device uses about one core, so before JAX starts its backend the CLI asks for as many host devices as
the machine has cores (override with --devices or JAX's own XLA_FLAGS).
"""
import argparse
import os
import sys


def _setup_devices(requested: int | None) -> None:
    import jax  # the backend starts on first use, so this still takes effect
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return
    jax.config.update("jax_num_cpu_devices", requested or os.cpu_count() or 1)


def _error(message: str, code: int = 2) -> int:
    print(f"az-jax: error: {message}", file=sys.stderr)
    return code


def _train(args) -> int:
    from az_jax import config as config_lib
    from az_jax.loop import train_and_evaluate
    config = config_lib.override(config_lib.preset(args.game, args.preset), args.set or [])
    run_dir = args.run_dir or os.path.join("runs", f"{args.game}-{args.preset}")
    print(f"az-jax: training {config.game} ({args.preset} preset) in {os.path.abspath(run_dir)}", file=sys.stderr)
    try:
        train_and_evaluate(config, run_dir, progress=not args.no_progress)
    except KeyboardInterrupt:
        print("\naz-jax: interrupted; run the same command again to resume from the last checkpoint",
              file=sys.stderr)
        return 130
    return 0


def _play(args) -> int:
    from az_jax.agent import load_agent
    from az_jax.play import play_session
    agent = load_agent(args.run_dir, step=args.step)
    play_session(agent, human_first=args.first == "human", num_simulations=args.simulations, seed=args.seed)
    return 0


def _bench(args) -> int:
    import json
    import jax
    from az_jax import bench
    from az_jax import config as config_lib
    config = config_lib.override(config_lib.preset(args.game, args.preset), args.set or [])
    devices = jax.devices()[:args.devices] if args.devices else None
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="az-jax", description="AlphaZero in JAX: train and play.")
    parser.add_argument("--devices", type=int, default=None,
                        help="host CPU devices to create (default: one per core; ignored on GPU/TPU)")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train (or resume) a run")
    train.add_argument("--game", default="connect_four", help="game name (see envs.GAMES)")
    train.add_argument("--preset", default="small", help="small (laptop CPU / one GPU) or paper (full scale)")
    train.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    train.add_argument("--run-dir", default=None, help="output directory (default runs/GAME-PRESET)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.set_defaults(func=_train)

    play = sub.add_parser("play", help="play against a trained agent in the terminal")
    play.add_argument("--run-dir", required=True, help="a run directory or one checkpoint directory")
    play.add_argument("--step", type=int, default=None, help="checkpoint step (default: latest)")
    play.add_argument("--first", choices=["human", "agent"], default="human", help="who moves first")
    play.add_argument("--simulations", type=int, default=None, help="search simulations per agent move")
    play.add_argument("--seed", type=int, default=0)
    play.set_defaults(func=_play)

    bench = sub.add_parser("bench", help="measure throughput, compile time, memory, FLOPs and MFU of a config")
    bench.add_argument("--game", default="connect_four", help="game name (see envs.GAMES)")
    bench.add_argument("--preset", default="small", help="small (laptop CPU / one GPU) or paper (full scale)")
    bench.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    bench.add_argument("--devices", type=int, default=argparse.SUPPRESS,
                       help="devices to use (on CPU: host devices to create; default: one per core)")
    bench.add_argument("--repeats", type=int, default=3, help="timed calls per measurement (median reported)")
    bench.add_argument("--json", default=None, metavar="PATH", help="write the JSON here (default: stdout)")
    bench.set_defaults(func=_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_devices(args.devices)
    from az_jax.checkpoint import CheckpointError
    from az_jax.config import ConfigError
    try:
        return args.func(args)
    except (ConfigError, CheckpointError) as e:
        return _error(str(e))


if __name__ == "__main__":
    sys.exit(main())
