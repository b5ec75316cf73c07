"""`az-jax render`: draw a position, from a game record (.sgf, .pgn, .json) or a move list, as SVG or PNG."""

import argparse
import sys

from az_jax.apps.cli.args import non_negative_int, path


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("render", help="draw a position (from a game record or a move list) as SVG or PNG")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--record", type=path, default=None, metavar="FILE", help="a game record (.sgf, .pgn or .json)")
    source.add_argument("--game", default=None, help="game name (see envs.GAMES), with --moves")
    parser.add_argument(
        "--ply", type=non_negative_int, default=None, help="with --record: position after K plies (default: end)"
    )
    parser.add_argument("--moves", default=None, help='with --game: moves in the game\'s notation, e.g. "e2e4 e7e5"')
    parser.add_argument("--out", type=path, required=True, metavar="FILE", help="output picture, FILE.svg or FILE.png")
    return parser


def run(args) -> int:
    from envs import render  # starts JAX's backend: after main's device set-up

    render.check_output_path(args.out)  # before any work: a bad extension writes nothing
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
