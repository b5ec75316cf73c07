"""Measures the typical number of legal moves per game under uniformly random play.

AlphaZero scales the root Dirichlet alpha "in inverse proportion to the approximate number of legal moves in a
typical position" (AlphaZero, Silver et al., Science 2018, Methods: chess 0.3, shogi 0.15, Go 0.03). envs/registry.py
uses the figures this
script prints to pick alpha for the games the papers do not cover.

    python -m experiments.performance.legal_moves [--games 256]
"""

import argparse

import jax
import jax.numpy as jnp
import pgx

GAMES = [
    "tic_tac_toe",
    "connect_four",
    "othello",
    "hex",
    "go_9x9",
    "go_19x19",
    "chess",
    "gardner_chess",
    "shogi",
    "animal_shogi",
]


def mean_legal_moves(name: str, num_games: int, seed: int = 0) -> tuple[float, float]:
    """Returns (mean legal moves over non-terminal positions, mean game length) under uniform random play."""
    env = pgx.make(name)
    init_key, play_key = jax.random.split(jax.random.key(seed))
    state = jax.vmap(env.init)(jax.random.split(init_key, num_games))

    def body(carry):
        state, key, legal_sum, positions = carry
        key, sub = jax.random.split(key)
        alive = ~state.terminated
        legal_sum += jnp.where(alive, state.legal_action_mask.sum(-1), 0).sum()
        positions += alive.sum()
        logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
        action = jax.random.categorical(sub, logits)
        return jax.vmap(env.step)(state, action), key, legal_sum, positions

    state, _, legal_sum, positions = jax.jit(lambda c: jax.lax.while_loop(lambda c: ~c[0].terminated.all(), body, c))(
        (state, play_key, jnp.int32(0), jnp.int32(0))
    )
    return float(legal_sum / positions), float(positions / num_games)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", type=int, default=256)
    args = parser.parse_args()
    print(f"{'game':<14} {'legal moves':>12} {'plies':>8}")
    for name in GAMES:
        legal, plies = mean_legal_moves(name, args.games)
        print(f"{name:<14} {legal:>12.1f} {plies:>8.1f}", flush=True)
