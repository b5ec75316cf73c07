"""Tree reuse and engine latency (az_jax/frontends/tree_search.py), on a trained run's network, one game at a time as
an engine plays.

    python -m experiments.engine.tree_reuse RUN_DIR [--simulations 64 | --seconds 0.05] [--games 100] [--json FILE]

1. Latency: seconds from a fresh position to a move at N simulations, the first time (compiles) and after.
2. Tree reuse: games between two TreeSearch players with the same network, each adding N new simulations per move.
   The reusing player keeps its tree across moves (its own and the opponent's), the other starts each move afresh;
   same work per move (--simulations), or the same thinking time per move (--seconds: az_jax.frontends.tree_search's
   `think`, as the engines use it, the time each side spent copying subtrees since its last move deducted; a deeper
   kept tree makes each simulation slower, so this is the engine's case). Openings: the game's random opening plies
   (envs/registry.py), each opening played twice with colours swapped. Reports the visits carried over per move, each
   side's time and new simulations per move, and the reusing player's score and Elo difference with its 95% interval
   (az_jax.evaluation.elo).
"""

import argparse
import json
import sys
import time

import jax
import numpy as np

from az_jax.evaluation.elo import elo_difference
from az_jax.frontends.tree_search import TreeSearch, think
from az_jax.runtime.agent import load_agent
from envs import get_game


def latency(agent, simulations: int, repeats: int = 5) -> dict:
    ts = TreeSearch(agent, capacity=4 * simulations + 1, chunk=simulations)
    state = agent.env.init(jax.random.key(0))
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        ts.reset(state)
        ts.search(simulations)
        ts.best_action()
        times.append(time.perf_counter() - start)
    ts.play(ts.best_action())  # compiles the subtree copy too, so the match below times no compilation
    return {"first_move_s": times[0], "move_s_median": float(np.median(times[1:])), "simulations": simulations}


def play_game(
    agent,
    players: dict[int, TreeSearch],
    reuse: dict[int, bool],
    opening: list[int],
    simulations: int,
    seconds: float | None,
    clock: dict,
):
    """One game; players keyed by pgx player id. Returns (pgx rewards [2], carried visits per reusing move).
    clock[reusing?] accumulates [seconds, moves, simulations added]: each side's own move time (reset or kept tree,
    search, choice) plus its share of the tree copies of `play`."""
    env = agent.env
    state = env.init(jax.random.key(0))
    step = jax.jit(env.step)
    for action in opening:
        state = step(state, action)
    for ts in players.values():
        ts.reset(state)
    carried = []
    owed = dict.fromkeys(players, 0.0)  # seconds each side spent in `play` since its last move
    while not (bool(state.terminated) or bool(state.truncated)):
        mover = int(state.current_player)
        ts = players[mover]
        t = time.perf_counter()
        if reuse[mover]:
            carried.append(ts.visits)
        else:
            ts.reset(state)
        if seconds is None:
            added = ts.search(simulations)
        else:  # its clock also ran while it copied subtrees since its last move
            added = think(ts, seconds=max(seconds - owed[mover], 0.0))
        owed[mover] = 0.0
        action = ts.best_action()
        clock[reuse[mover]][0] += time.perf_counter() - t
        clock[reuse[mover]][1] += 1
        clock[reuse[mover]][2] += added
        for player_id, other in players.items():
            t = time.perf_counter()
            other.play(action)
            spent = time.perf_counter() - t
            clock[reuse[player_id]][0] += spent
            owed[player_id] += spent
        state = step(state, action)
    return np.asarray(state.rewards), carried


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=None, help="equal thinking time per move instead")
    parser.add_argument("--chunk", type=int, default=16, help="simulations per chunk with --seconds")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    agent = load_agent(args.run_dir)
    report = {"run_dir": args.run_dir, "step": agent.step, "latency": latency(agent, args.simulations)}
    print(json.dumps(report["latency"]))

    spec = get_game(agent.config.game)
    rng = np.random.default_rng(args.seed)
    capacity = 64 * args.simulations
    chunk = args.chunk if args.seconds is not None else args.simulations
    reusing = TreeSearch(agent, capacity=capacity, chunk=chunk)
    fresh = TreeSearch(agent, capacity=capacity, chunk=chunk)
    wins = draws = losses = 0
    carried: list[int] = []
    clock = {True: [0.0, 0, 0], False: [0.0, 0, 0]}  # reusing? -> [seconds, moves, simulations added]
    start = time.perf_counter()
    for game in range(args.games):
        if game % 2 == 0:  # a new random opening, played from both sides
            state, opening = agent.env.init(jax.random.key(0)), []
            for _ in range(spec.opening_plies):
                action = int(rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask))))
                opening.append(action)
                state = agent.env.step(state, action)
        first = int(agent.env.init(jax.random.key(0)).current_player)
        reuse_id = first if game % 2 == 0 else 1 - first  # the reusing player moves first in even games
        players = {reuse_id: reusing, 1 - reuse_id: fresh}
        rewards, game_carried = play_game(
            agent, players, {reuse_id: True, 1 - reuse_id: False}, opening, args.simulations, args.seconds, clock
        )
        carried += game_carried
        r = rewards[reuse_id]
        wins, draws, losses = wins + (r > 0), draws + (r == 0), losses + (r < 0)
    elo, (low, high) = elo_difference(wins, draws, losses)
    report["match"] = {
        "games": args.games,
        "simulations_added_per_move": args.simulations if args.seconds is None else None,
        "seconds_per_move": args.seconds,
        "wins": int(wins),
        "draws": int(draws),
        "losses": int(losses),
        "score": (wins + draws / 2) / args.games,
        "elo": elo,
        "elo_95": [low, high],
        "carried_visits_mean": float(np.mean(carried)),
        "carried_visits_median": float(np.median(carried)),
        "seconds": time.perf_counter() - start,
        "move_ms_reusing": 1000 * clock[True][0] / max(clock[True][1], 1),
        "move_ms_fresh": 1000 * clock[False][0] / max(clock[False][1], 1),
        "new_simulations_per_move_reusing": clock[True][2] / max(clock[True][1], 1),
        "new_simulations_per_move_fresh": clock[False][2] / max(clock[False][1], 1),
    }
    print(json.dumps(report["match"]))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
