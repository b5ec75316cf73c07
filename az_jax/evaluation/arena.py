"""Batched matches between two players on device: N games in parallel, colours alternating.

A player is a pure function `(state [B, ...], rng_key) -> action [B]`; both are asked every ply and the mover's choice
is kept (the cheap way to batch two players in one program). Game i has player A moving first when i is even.
"""
from typing import Callable

import jax
import jax.numpy as jnp
import pgx

PlayerFn = Callable[[pgx.State, jax.Array], jax.Array]


def uniform_random_player(state: pgx.State, rng_key: jax.Array) -> jax.Array:
    """Uniform over legal actions. [B] actions; the key is consumed."""
    return jax.random.categorical(rng_key, jnp.where(state.legal_action_mask, 0.0, -jnp.inf))


def play_match(env: pgx.Env, player_a: PlayerFn, player_b: PlayerFn, rng_key: jax.Array, num_games: int,
               max_length: int, first_game: int | jax.Array = 0) -> jax.Array:
    """Plays `num_games` games; returns A's results [num_games] in {−1, 0, +1}. The key is consumed.

    `first_game` offsets the game numbering (used when the games are split over devices), so that colours alternate
    over the whole match: A moves first in even-numbered games."""
    init_key, play_key = jax.random.split(rng_key)
    state = jax.vmap(env.init)(jax.random.split(init_key, num_games))
    a_first = (first_game + jnp.arange(num_games)) % 2 == 0
    a_player = jnp.where(a_first, state.current_player, 1 - state.current_player)             # [N] A's pgx id

    def cond(carry):
        state, _, _, ply = carry
        return ~jnp.all(state.terminated | state.truncated) & (ply <= max_length)

    def body(carry):
        state, key, result, ply = carry
        key, key_a, key_b = jax.random.split(key, 3)
        action = jnp.where(state.current_player == a_player, player_a(state, key_a), player_b(state, key_b))
        state = jax.vmap(env.step)(state, action)
        result = result + state.rewards[jnp.arange(num_games), a_player]
        return state, key, result, ply + 1

    _, _, result, _ = jax.lax.while_loop(cond, body, (state, play_key, jnp.zeros(num_games), jnp.int32(0)))
    return result


def score(results: jax.Array) -> float:
    """(wins + draws / 2) / games for results in {−1, 0, +1}."""
    return float(jnp.mean((results + 1.0) / 2.0))
