"""`az-jax eval`: a trained run (or any player spec) against another player; the result is appended to the run's
results and one summary line printed."""

import argparse
import sys

from az_jax.apps.cli.args import add_weights, non_negative_int, path, positive_int, seed, simulations
from az_jax.core.play_keys import PLAY_KEYS


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "eval", help="play a trained run against another player; append the result to the run"
    )
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument(
        "--run-dir",
        type=path,
        help="the run (or one checkpoint directory, an agent file, a shipped agent's name) to evaluate",
    )
    who.add_argument(
        "--player", metavar="SPEC", help="instead of a run: any player spec (with --game), e.g. gnugo:level=1"
    )
    parser.add_argument("--game", default=None, help="with --player: the game")
    parser.add_argument(
        "--out-dir",
        type=path,
        default=None,
        help="with --player or an agent file: where results.jsonl and games go (default runs/eval, runs/eval/NAME)",
    )
    parser.add_argument("--step", type=non_negative_int, default=None, help="checkpoint step (default: latest)")
    parser.add_argument(
        "--simulations",
        type=simulations,
        default=None,
        help="search simulations per move (default: the run's eval_simulations; 0: raw policy)",
    )
    parser.add_argument(
        "--opponent",
        required=True,
        metavar="SPEC",
        help='random | mcts:sims=N | run:DIR[@STEP][:sims=N,weights=best|latest] | gnugo[:level=N] | gtp:"COMMAND" | '
        "uci:COMMAND[:elo=N,skill=N,nodes=N,movetime=S]",
    )
    parser.add_argument("--games", type=positive_int, default=100, help="games, colours alternating (default 100)")
    parser.add_argument(
        "--opening-plies",
        type=non_negative_int,
        default=None,
        help="random opening plies, each opening played from both sides (default: 4; tic_tac_toe 2)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=None, help="games played at once on device (default: all)"
    )
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--no-games", action="store_true", help="do not write the game records")
    parser.add_argument("--verbose", action="store_true", help="a line per finished game (engine matches)")
    parser.add_argument(
        "--set",
        dest="play",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a setting of the agent's greedy play for this match ({', '.join(PLAY_KEYS)}); repeatable",
    )
    add_weights(parser)
    return parser


def run(args) -> int:
    from az_jax.evaluation.evaluate import evaluate  # starts JAX's backend: after main's device set-up

    log = (
        (lambda message: print(f"az-jax eval: {message}", file=sys.stderr, flush=True))
        if args.verbose
        else (lambda message: None)
    )
    summary = evaluate(
        args.run_dir,
        args.opponent,
        games=args.games,
        step=args.step,
        simulations=args.simulations,
        opening_plies=args.opening_plies,
        seed=args.seed,
        batch_size=args.batch_size,
        save_games=not args.no_games,
        player=args.player,
        game=args.game,
        out_dir=args.out_dir,
        weights=args.weights,
        play=tuple(args.play),
        log=log,
    )
    print(summary.line())
    return 0
