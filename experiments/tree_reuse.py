"""Tree reuse and engine latency (az_jax/frontends/tree_search.py), on a trained run's network, one game at a time as
an engine plays.

    python experiments/tree_reuse.py RUN_DIR [--simulations 64] [--games 100] [--json FILE]

1. Latency: seconds from a fresh position to a move at N simulations, the first time (compiles) and after.
2. Tree reuse: games between two TreeSearch players with the same network, each adding N new simulations per move.
   The reusing player keeps its tree across moves (its own and the opponent's), the other starts each move afresh;
   same work per move, so the same time per move up to the cost of the copy. Openings: the game's random opening
   plies (envs/registry.py), each opening played twice with colours swapped. Reports the visits carried over per move
   and the reusing player's score and Elo difference with its 95% interval (az_jax.evaluation.elo).
"""

import argparse
import json
import sys
import time

import jax
import numpy as np

from az_jax.agent import load_agent
from az_jax.evaluation.elo import elo_difference
from az_jax.frontends.tree_search import TreeSearch
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
    return {"first_move_s": times[0], "move_s_median": float(np.median(times[1:])), "simulations": simulations}


def play_game(agent, players: dict[int, TreeSearch], reuse: dict[int, bool], opening: list[int], simulations: int):
    """One game; players keyed by pgx player id. Returns (pgx rewards [2], carried visits per reusing move)."""
    env = agent.env
    state = env.init(jax.random.key(0))
    step = jax.jit(env.step)
    for action in opening:
        state = step(state, action)
    for ts in players.values():
        ts.reset(state)
    carried = []
    while not (bool(state.terminated) or bool(state.truncated)):
        mover = int(state.current_player)
        ts = players[mover]
        if reuse[mover]:
            carried.append(ts.visits)
        else:
            ts.reset(state)
        ts.search(simulations)
        action = ts.best_action()
        for other in players.values():
            other.play(action)
        state = step(state, action)
    return np.asarray(state.rewards), carried


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--simulations", type=int, default=64)
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
    reusing, fresh = TreeSearch(agent, capacity=capacity), TreeSearch(agent, capacity=capacity)
    wins = draws = losses = 0
    carried: list[int] = []
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
            agent, players, {reuse_id: True, 1 - reuse_id: False}, opening, args.simulations
        )
        carried += game_carried
        r = rewards[reuse_id]
        wins, draws, losses = wins + (r > 0), draws + (r == 0), losses + (r < 0)
    elo, (low, high) = elo_difference(wins, draws, losses)
    report["match"] = {
        "games": args.games,
        "simulations_added_per_move": args.simulations,
        "wins": int(wins),
        "draws": int(draws),
        "losses": int(losses),
        "score": (wins + draws / 2) / args.games,
        "elo": elo,
        "elo_95": [low, high],
        "carried_visits_mean": float(np.mean(carried)),
        "carried_visits_median": float(np.median(carried)),
        "seconds": time.perf_counter() - start,
    }
    print(json.dumps(report["match"]))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
