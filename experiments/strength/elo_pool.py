"""One Elo pool of any players: every listed pairing played (resumably), then one maximum-likelihood fit.

    python -m experiments.strength.elo_pool --game go_9x9 --out experiments/alphago/pool.jsonl \
        --player "random=random" --player "gnugo0=gnugo:level=0" --player "p_sigma=sl:runs/alphago/sl9-k32" \
        --pairs all --games 20

Players are the specs of `az-jax eval --opponent` (az_jax/evaluation/players.py), each under a short name.
`--pairs all` plays every pair; `--pairs chain` plays neighbours in the order given (cheaper; the fit then rests on
the chain); `--pair A,B` (repeatable) adds a pairing. Each pairing's result is one line of `--out` (JSON Lines), keyed
by the two specs, the games and the seed: a rerun plays only what is missing, so an interrupted pool resumes and a
pool can grow. The table printed (and written next to `--out` as .elo.json) is anchored at `--anchor` (Elo 0).
Pairings of two JAX players are batched on device; a pairing with an engine plays one game at a time.
"""

import argparse
import itertools
import json
import os
import sys
import time
import zlib

import jax

from az_jax.evaluation import elo
from az_jax.evaluation import match as match_lib
from az_jax.evaluation.players import make_player
from az_jax.runtime.files import append_jsonl, read_jsonl
from envs import get_game


def _named(text: str) -> tuple[str, str]:
    name, sep, spec = text.partition("=")
    if not sep or not name or not spec:
        raise argparse.ArgumentTypeError(f"expected NAME=SPEC, got {text!r}")
    return name, spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", required=True)
    parser.add_argument("--player", type=_named, action="append", required=True, metavar="NAME=SPEC")
    parser.add_argument("--pairs", choices=("all", "chain", "none"), default="all")
    parser.add_argument("--pair", action="append", default=[], metavar="A,B", help="one more pairing (repeatable)")
    parser.add_argument("--games", type=int, default=20, help="games per pairing, colours alternated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--anchor", default=None, help="the player rated 0 (default: the first)")
    parser.add_argument("--out", required=True, help="results, JSON Lines (appended; resumes)")
    args = parser.parse_args(argv)

    specs = dict(args.player)
    if len(specs) != len(args.player):
        parser.error("two players have the same name")
    names = list(specs)
    todo = {"all": list(itertools.combinations(names, 2)), "chain": list(zip(names, names[1:])), "none": []}[args.pairs]
    for pair in args.pair:
        a, _, b = pair.partition(",")
        if a not in specs or b not in specs or a == b:
            parser.error(f"--pair {pair}: expected two different player names of {names}")
        if (a, b) not in todo and (b, a) not in todo:
            todo.append((a, b))
    anchor = args.anchor or names[0]
    if anchor not in specs:
        parser.error(f"--anchor {anchor}: not a player name")

    opening_plies = get_game(args.game).opening_plies
    done = {(m["a_spec"], m["b_spec"], m["games"], m["seed"]): m for m in read_jsonl(args.out)}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    players: dict = {}
    results = []
    for a, b in todo:
        key = (specs[a], specs[b], args.games, args.seed)
        m = done.get(key)
        if m is None:
            for name in (a, b):
                if name not in players:
                    players[name] = make_player(specs[name], args.game)
            # the pairing's key depends on its players' specs only, so a grown pool replays nothing
            rng = jax.random.key(zlib.crc32(f"{specs[a]}|{specs[b]}|{args.seed}".encode()) % 2**31)
            t0 = time.perf_counter()
            played = match_lib.play(args.game, players[a], players[b], rng, args.games, opening_plies=opening_plies)
            r = [g.result for g in played]
            m = {
                "a": a,
                "b": b,
                "a_spec": specs[a],
                "b_spec": specs[b],
                "wins": sum(x > 0 for x in r),
                "draws": sum(x == 0 for x in r),
                "losses": sum(x < 0 for x in r),
                "games": args.games,
                "seed": args.seed,
                "opening_plies": opening_plies,
                "seconds": time.perf_counter() - t0,
            }
            append_jsonl(args.out, m)
            print(f"{a} vs {b}: +{m['wins']} ={m['draws']} -{m['losses']} ({m['seconds']:.0f} s)", flush=True)
        results.append((a, b, m["wins"], m["draws"], m["losses"]))
    if not results:
        return 0
    fit = elo.fit_elo(results, anchor=anchor)
    table = fit.to_dict()
    table["specs"] = specs
    with open(os.path.splitext(args.out)[0] + ".elo.json", "w") as f:
        json.dump(table, f, indent=1)
    width = max(len(n) for n in fit.players)
    for i in sorted(range(len(fit.players)), key=lambda i: -fit.ratings[i]):
        print(
            f"{fit.players[i]:<{width}}  {fit.ratings[i]:+7.0f}  [{fit.lower[i]:+6.0f}, {fit.upper[i]:+6.0f}]  "
            f"{int(fit.games[i])} games  {specs[fit.players[i]]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
