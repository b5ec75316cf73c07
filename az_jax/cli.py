"""`az-jax` — a thin command line over the library: train, play.

On CPU, one XLA device uses about one core, so before JAX starts its backend the CLI asks for as many host devices as
the machine has cores, each on one thread (az_jax/host_devices.py; override with --devices or JAX's own XLA_FLAGS).
"""
import argparse
import os
import sys


def _setup_devices(requested: int | None) -> None:
    from az_jax import host_devices  # the backend starts on first use, so this still takes effect
    host_devices.setup(requested)


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
    from az_jax.apps import bench
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


def _render(args) -> int:
    from envs import render
    render.check_output_path(args.out)             # before any work: a bad extension writes nothing
    if args.record is not None:
        if args.moves is not None:
            raise render.RenderError("--moves goes with --game, not --record")
        game, state = render.position_from_record(args.record, args.ply)
    else:
        if args.ply is not None:
            raise render.RenderError("--ply goes with --record, not --game")
        game, state = args.game, render.position_from_moves(args.game, args.moves or "")
    print(f"az-jax: wrote {render.write_image(game, state, args.out)}", file=sys.stderr)
    return 0


def _eval(args) -> int:
    from az_jax.evaluation.evaluate import evaluate
    log = (lambda message: print(f"az-jax eval: {message}", file=sys.stderr, flush=True)) if args.verbose else \
        (lambda message: None)
    summary = evaluate(args.run_dir, args.opponent, games=args.games, step=args.step, simulations=args.simulations,
                       opening_plies=args.opening_plies, seed=args.seed, batch_size=args.batch_size,
                       save_games=not args.no_games, player=args.player, game=args.game, out_dir=args.out_dir,
                       log=log)
    print(summary.line())
    return 0


def _ladder(args) -> int:
    from az_jax.evaluation.ladder import run_ladder
    log = lambda message: print(f"az-jax ladder: {message}", file=sys.stderr, flush=True)
    table = run_ladder(args.run_dir, games=args.games, simulations=args.simulations,
                       baselines=[b for b in args.baselines.split(";") if b], anchor=args.anchor, seed=args.seed,
                       steps=args.steps, log=log)
    print(table)
    return 0


def _sweep(args) -> int:
    from az_jax import sweep
    return sweep.sweep_command(
        args.spec, sweep_dir=args.sweep_dir, parallel=args.parallel, devices=args.device_ids, platform=args.platform,
        shard=args.shard, extra_set=args.set or [], metrics=args.metrics.split(",") if args.metrics else None,
        dry_run=args.dry_run, collect_only=args.collect_only,
        log=lambda message: print(f"az-jax sweep: {message}", file=sys.stderr, flush=True))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="az-jax", description="AlphaZero in JAX: train and play.")
    parser.add_argument("--devices", type=int, default=None,
                        help="host CPU devices to create (default: one per core; ignored on GPU/TPU)")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train (or resume) a run")
    train.add_argument("--game", default="connect_four", help="game name (see envs.GAMES)")
    train.add_argument("--preset", default="small",
                       help="small (laptop CPU / one GPU), paper (AlphaZero, full scale), alphago_zero (AlphaGo Zero, "
                            "full scale) or small_agz (small with the AlphaGo Zero switches)")
    train.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    train.add_argument("--run-dir", default=None, help="output directory (default runs/GAME-PRESET)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                       help="several processes: process 0's address and a free port (env AZ_JAX_COORDINATOR; "
                            "not needed on a Cloud TPU pod slice, SLURM or Open MPI)")
    train.add_argument("--num-processes", type=int, default=None, metavar="N",
                       help="several processes: how many (env AZ_JAX_NUM_PROCESSES)")
    train.add_argument("--process-id", type=int, default=None, metavar="I",
                       help="several processes: this one's index 0..N-1 (env AZ_JAX_PROCESS_ID)")
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

    ev = sub.add_parser("eval", help="play a trained run against another player; append the result to the run")
    who = ev.add_mutually_exclusive_group(required=True)
    who.add_argument("--run-dir", help="the run (or one checkpoint directory) to evaluate")
    who.add_argument("--player", metavar="SPEC", help="instead of a run: any player spec (with --game), e.g. gnugo:level=1")
    ev.add_argument("--game", default=None, help="with --player: the game")
    ev.add_argument("--out-dir", default=None, help="with --player: where results.jsonl and games go (default runs/eval)")
    ev.add_argument("--step", type=int, default=None, help="checkpoint step (default: latest)")
    ev.add_argument("--simulations", type=int, default=None,
                    help="search simulations per move (default: the run's eval_simulations; 0: raw policy)")
    ev.add_argument("--opponent", required=True, metavar="SPEC",
                    help='random | mcts:sims=N | run:DIR[@STEP][:sims=N] | gnugo[:level=N] | gtp:"COMMAND" | '
                         'uci:COMMAND[:elo=N,skill=N,nodes=N,movetime=S]')
    ev.add_argument("--games", type=int, default=100, help="games, colours alternating (default 100)")
    ev.add_argument("--opening-plies", type=int, default=None,
                    help="random opening plies, each opening played from both sides (default: 4; tic_tac_toe 2)")
    ev.add_argument("--batch-size", type=int, default=None, help="games played at once on device (default: all)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--no-games", action="store_true", help="do not write the game records")
    ev.add_argument("--verbose", action="store_true", help="a line per finished game (engine matches)")
    ev.set_defaults(func=_eval)

    ladder = sub.add_parser("ladder", help="Elo of every checkpoint of a run (plus baselines): table and plots")
    ladder.add_argument("run_dir", help="the run directory")
    ladder.add_argument("--games", type=int, default=100, help="games per pairing (default 100)")
    ladder.add_argument("--simulations", type=int, default=None,
                        help="search simulations per move for the checkpoints (default: the run's eval_simulations)")
    ladder.add_argument("--baselines", default="random;mcts:sims=200",
                        help="';'-separated player specs rated with the checkpoints (default 'random;mcts:sims=200')")
    ladder.add_argument("--anchor", default="random", help="the player whose Elo is 0 (default: random)")
    ladder.add_argument("--steps", default=None, help="comma-separated checkpoint steps (default: all)")
    ladder.add_argument("--seed", type=int, default=0)
    ladder.set_defaults(func=_ladder)

    sw = sub.add_parser("sweep", help="run a hyperparameter sweep (JSON spec): trials in parallel processes, "
                                      "finished ones skipped, results.csv and plots")
    sw.add_argument("spec", help="the sweep spec, a JSON file (see az_jax/sweep/spec.py and experiments/README.md)")
    sw.add_argument("--sweep-dir", default=None, help="where the trials' run dirs go (default runs/sweeps/NAME)")
    sw.add_argument("--parallel", type=int, default=1, help="trials at once, each on its own share of the devices")
    sw.add_argument("--devices", dest="device_ids", default=None, metavar="IDS",
                    help="cores (CPU) or accelerators to use, e.g. 0-3 or 0,2 (default: all), split over --parallel")
    sw.add_argument("--platform", default="auto", help="auto (ask JAX), cpu, gpu or tpu")
    sw.add_argument("--shard", default=None, metavar="I/N", help="run only trials with index = I mod N (N hosts)")
    sw.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key in every trial")
    sw.add_argument("--metrics", default=None, help="comma-separated metrics to tabulate and plot (default: eval "
                                                    "scores, value and policy loss)")
    sw.add_argument("--dry-run", action="store_true", help="print the trials' commands, run nothing")
    sw.add_argument("--collect-only", action="store_true", help="run nothing; rebuild the table and plots")
    sw.set_defaults(func=_sweep)

    render = sub.add_parser("render", help="draw a position (from a game record or a move list) as SVG or PNG")
    source = render.add_mutually_exclusive_group(required=True)
    source.add_argument("--record", default=None, metavar="FILE", help="a game record (.sgf, .pgn or .json)")
    source.add_argument("--game", default=None, help="game name (see envs.GAMES), with --moves")
    render.add_argument("--ply", type=int, default=None, help="with --record: position after K plies (default: end)")
    render.add_argument("--moves", default=None, help='with --game: moves in the game\'s notation, e.g. "e2e4 e7e5"')
    render.add_argument("--out", required=True, metavar="FILE", help="output picture, FILE.svg or FILE.png")
    render.set_defaults(func=_render)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_devices(args.devices)
    if args.command == "sweep":  # this process only plans and launches trials: it leaves the accelerators to them
        import jax
        jax.config.update("jax_platforms", "cpu")
    if args.command == "train":  # joins a multi-process run, if any, before the imports below start JAX's backend
        from az_jax import distributed
        try:
            distributed.initialize(args.coordinator, args.num_processes, args.process_id)
        except distributed.DistributedError as e:
            return _error(str(e))
    from az_jax.checkpoint import CheckpointError
    from az_jax.config import ConfigError
    from envs.records import RecordError
    from envs.gtp import EngineError
    from az_jax.evaluation.players import PlayerSpecError
    try:
        return args.func(args)
    except (ConfigError, CheckpointError, RecordError, PlayerSpecError) as e:
        return _error(str(e))
    except EngineError as e:
        return _error(f"engine failed: {e}")


if __name__ == "__main__":
    sys.exit(main())
