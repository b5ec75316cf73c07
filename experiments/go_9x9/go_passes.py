"""Where a go_9x9 run passes: its greedy 32-simulation search against uniform random play, the plies at which each side
passed, and the raw network on the empty board.

    python -m experiments.go_9x9.go_passes RUN_DIR [--games 20] [--simulations 32] [--seed 3]
"""

import argparse
import sys

import jax
import numpy as np

from az_jax.core import arena
from az_jax.runtime.agent import load_agent

PASS = 81  # pgx go_9x9: actions 0-80 are points, 81 is pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    agent = load_agent(args.run_dir)
    if agent.config.game != "go_9x9":
        print(f"go_passes: {args.run_dir} trains {agent.config.game}, not go_9x9", file=sys.stderr)
        return 2
    env = agent.env
    games = jax.jit(
        lambda key: arena.play_games(
            env, agent.player(args.simulations), arena.uniform_random_player, key, args.games, 162
        )
    )(jax.random.key(args.seed))
    actions, results = np.asarray(games.actions), np.asarray(games.results)
    a_first, lengths = np.asarray(games.a_first), np.asarray(games.lengths)
    print(f"{args.run_dir} @ {agent.step} vs random, {args.games} games, first 4 plies not randomised")
    for colour, as_black in (("black", True), ("white", False)):
        rows = np.flatnonzero(a_first == as_black)
        first_pass = []
        for i in rows:
            ply = np.arange(lengths[i])
            mine = (ply % 2 == 0) == as_black
            passes = ply[(actions[i, : lengths[i]] == PASS) & mine]
            first_pass.append(int(passes[0]) if len(passes) else -1)
        score = float(((results[rows] > 0) + 0.5 * (results[rows] == 0)).mean())
        print(
            f"  as {colour}: score {score:.2f} over {len(rows)} games; ply of the agent's first pass "
            f"(-1: none): {sorted(first_pass)}"
        )
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 1))
    probs, value = agent.policy_value(states)
    print(f"  empty board, black to move: prior of pass {float(probs[0, PASS]):.3f}, value {float(value[0]):+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
