"""The new APV-MCTS against the old at equal time per move: K leaves a step under virtual loss (and optionally the
expansion threshold with p_τ's placeholder priors) against the synchronous search (one leaf a step, every leaf
expanded at once), both with one agent directory's networks.

    python -m experiments.alphago.search_equal_time --agent runs/alphago/ag9-cpu --old-simulations 128 \
        --new leaves=8 --games 100 --json experiments/alphago/results/search_equal_time_9x9.json

1. Time: each search plays one game (batch 1, as an engine does), timed on `--positions` positions of `--plies`
   random legal moves from the empty board after one compiling call. The old search is timed at
   `--old-simulations`; the new at the same count and twice it, and its simulations for equal time are read off the
   line through those two points (rounded to a multiple of its leaves), then timed again.
2. Strength: `--games` games between the two at those counts (colours alternating, the game's random opening
   plies), batched on the devices (one per core) like `az-jax eval` (time per move only sets the counts; a search at
   batch 1 runs on one device, so on one core), and the Elo difference of
   the new search with its 95% interval (evaluation/elo.elo_difference).

Both searches take λ and the other settings from the agent's preset.json unless `--new` / `--old` name them
(`leaves=K,thr=T,lambda=L,c=C` as in an `alphago:DIR:...` spec).
"""

import argparse
import json
import platform
import sys
import time
import zlib

import jax

from az_jax.runtime import host_devices


def spec(agent: str, simulations: int, extra: str) -> str:
    return f"alphago:{agent}:sims={simulations}" + (f",{extra}" if extra else "")


def seconds_per_move(player, states: list, key: jax.Array) -> float:
    """Mean seconds of one search at batch 1 over `states`, after one compiling call."""
    jax.block_until_ready(player.apply(player.variables, states[0], jax.random.fold_in(key, 0)))
    start = time.perf_counter()
    for i, s in enumerate(states):
        jax.block_until_ready(player.apply(player.variables, s, jax.random.fold_in(key, i + 1)))
    return (time.perf_counter() - start) / len(states)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True, help="an AlphaGo agent directory")
    parser.add_argument("--old-simulations", type=int, default=128)
    parser.add_argument("--old", default="", help="more settings of the old search (default: the preset's)")
    parser.add_argument("--new", default="leaves=8", help="the new search's settings, e.g. leaves=8,thr=8")
    parser.add_argument("--new-simulations", type=int, default=0, help="skip the timing's choice (0: equal time)")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--positions", type=int, default=4)
    parser.add_argument("--plies", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    host_devices.setup()  # one device per core, as `az-jax eval` has: before anything starts JAX's backend
    from az_jax.evaluation import elo
    from az_jax.evaluation import match as match_lib
    from az_jax.evaluation.players import make_player
    from envs import get_game
    from experiments.alphago.apv_speed import opening

    with open(f"{args.agent}/preset.json") as f:
        size = json.load(f)["size"]
    game = f"go_{size}x{size}"
    key = jax.random.key(args.seed)
    states = [opening(size, jax.random.fold_in(key, 1000 + i), args.plies) for i in range(args.positions)]
    timing = {}

    def timed(label: str, simulations: int, extra: str) -> float:
        seconds = seconds_per_move(make_player(spec(args.agent, simulations, extra), game), states, key)
        timing[f"{label}@{simulations}"] = round(seconds, 4)
        print(f"{label} at {simulations} simulations: {seconds:.3f} s a move", flush=True)
        return seconds

    n = args.old_simulations
    old_s = timed("old", n, args.old)
    leaves = int(dict(kv.split("=") for kv in args.new.split(",") if kv).get("leaves", 1))
    if args.new_simulations:
        m = args.new_simulations
    else:
        t1, t2 = timed("new", n, args.new), timed("new", 2 * n, args.new)
        per_sim = max((t2 - t1) / n, 1e-9)
        m = max(leaves, round((n + (old_s - t1) / per_sim) / leaves) * leaves)
    new_s = timed("new", m, args.new)

    old, new = make_player(spec(args.agent, n, args.old), game), make_player(spec(args.agent, m, args.new), game)
    rng = jax.random.key(zlib.crc32(f"{new.name}|{old.name}|{args.seed}".encode()) % 2**31)
    start = time.perf_counter()
    played = match_lib.play(game, new, old, rng, args.games, opening_plies=get_game(game).opening_plies)
    match_seconds = time.perf_counter() - start
    r = [g.result for g in played]
    wins, draws, losses = sum(x > 0 for x in r), sum(x == 0 for x in r), sum(x < 0 for x in r)
    diff, (low, high) = elo.elo_difference(wins, draws, losses)
    out = {
        "command": "python -m experiments.alphago.search_equal_time " + " ".join(argv or sys.argv[1:]),
        "machine": {"devices": str(jax.devices()), "cpu": platform.processor() or platform.machine()},
        "old": {"spec": spec(args.agent, n, args.old), "seconds_per_move": round(old_s, 4)},
        "new": {"spec": spec(args.agent, m, args.new), "seconds_per_move": round(new_s, 4)},
        "timing": timing,
        "games": args.games,
        "new_wins": wins,
        "draws": draws,
        "new_losses": losses,
        "new_score": (wins + draws / 2) / args.games,
        "elo_new_minus_old": round(diff, 1),
        "elo_interval_95": [round(low, 1), round(high, 1)],
        "match_seconds": round(match_seconds, 1),
        "mean_game_length": sum(len(g.actions) for g in played) / len(played),
    }
    print(json.dumps(out, indent=1), flush=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
