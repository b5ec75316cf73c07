"""Engine latency of `az-jax gtp`, measured from outside as a GUI sees it: the engine's start-up (the first answered
command), the first `genmove` (which compiles the search), and the median of the next genmoves, at N simulations per
move, the kept subtree included (so later moves search only what reuse did not carry over).

    python -m experiments.engine.engine_latency RUN_DIR [--simulations 64,256] [--moves 10] [--opponent random|self]

--opponent random (default): the engine plays Black by genmove and White's moves are random points sent with `play`,
as against an opponent it cannot predict (little of its tree carries over). --opponent self: genmove for both
colours, so the engine keeps the subtree of its own choices (the most reuse; later moves are the cheapest).

RUN_DIR: a go_9x9 (or go_19x19) run. Each simulation count starts a fresh engine, so each first genmove compiles.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time

from az_jax.engines.gtp import GTPEngine


def measure(run_dir: str, simulations: int, moves: int, opponent: str, seed: int = 0) -> dict:
    command = [sys.executable, "-m", "az_jax.apps.cli", "gtp", "--run-dir", run_dir, "--simulations", str(simulations)]
    start = time.perf_counter()
    with GTPEngine(command, start_timeout=600, move_timeout=600) as engine:
        engine.name()
        startup = time.perf_counter() - start
        engine.clear_board()
        with open(os.path.join(run_dir, "config.json")) as f:
            size = int(json.load(f)["game"].rsplit("x", 1)[1])  # go_9x9 -> 9
        rng = random.Random(seed)
        free = [f"{'ABCDEFGHJKLMNOPQRST'[c]}{r + 1}" for r in range(size) for c in range(size)]
        times = []
        colour = "b"
        for _ in range(moves + 1):
            t = time.perf_counter()
            move = engine.genmove(colour)
            times.append(time.perf_counter() - t)
            if move.lower() == "resign":
                break
            if move.upper() in free:
                free.remove(move.upper())
            if opponent == "self":
                colour = "w" if colour == "b" else "b"
                continue
            while free:  # a random point for White; an illegal one (suicide, ko) is refused, try another
                vertex = free.pop(rng.randrange(len(free)))
                if engine.request(f"play w {vertex}").success:
                    break
    return {
        "simulations": simulations,
        "startup_s": startup,
        "first_genmove_s": times[0],
        "genmove_median_s": statistics.median(times[1:]) if len(times) > 1 else None,
        "moves": len(times),
        "opponent": opponent,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--simulations", default="64,256")
    parser.add_argument("--moves", type=int, default=10)
    parser.add_argument("--opponent", choices=("random", "self"), default="random")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    for sims in [int(s) for s in args.simulations.split(",")]:
        row = {"run_dir": args.run_dir, **measure(args.run_dir, sims, args.moves, args.opponent)}
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
