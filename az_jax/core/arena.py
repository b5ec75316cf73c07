"""Batched matches between two players on device: N games in parallel, colours alternating, openings diversified.

A player is a pure function `(state [B, ...], rng_key) -> action [B]`; both are asked every ply and the mover's choice
is kept (the cheap way to batch two players in one program). Game i has player A moving first when i is even.

Openings: deterministic players would otherwise replay one game N times, so the first `opening_plies` plies of every
game are uniformly random legal moves, and games 2k and 2k+1 share the same opening (the same random moves from the
same start) with colours swapped — each opening is played once from each side, which cancels its bias.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import pgx

PlayerFn = Callable[[pgx.State, jax.Array], jax.Array]


class Games(NamedTuple):
    """What a batched match returns (all on device)."""

    results: jax.Array  # [N] A's result in {−1, 0, +1} (float)
    actions: jax.Array  # [N, max_length] int32 actions played in order, −1 after the end
    lengths: jax.Array  # [N] int32 plies played
    a_first: jax.Array  # [N] bool: A made the first move
    first_player: jax.Array  # [N] int32 pgx player id of the first mover (pgx draws it from the init key)


def uniform_random_player(state: pgx.State, rng_key: jax.Array) -> jax.Array:
    """Uniform over legal actions. [B] actions; the key is consumed."""
    return jax.random.categorical(rng_key, jnp.where(state.legal_action_mask, 0.0, -jnp.inf))


def play_games(
    env: pgx.Env,
    player_a: PlayerFn,
    player_b: PlayerFn,
    rng_key: jax.Array,
    num_games: int,
    max_length: int,
    first_game: int | jax.Array = 0,
    opening_plies: int = 0,
) -> Games:
    """Plays `num_games` games to the end (or `max_length` plies); the key is consumed.

    `first_game` offsets the game numbering (used when the games are split over devices), so that colours alternate
    and openings pair up over the whole match."""
    init_key, opening_key, play_key = jax.random.split(rng_key, 3)
    game_index = first_game + jnp.arange(num_games)  # [N]
    # every game starts from the same position; pgx draws who is "player 0" from the key, which only relabels sides
    state = jax.vmap(env.init)(jax.random.split(init_key, num_games))
    first_player = state.current_player.astype(jnp.int32)
    a_first = game_index % 2 == 0
    a_player = jnp.where(a_first, state.current_player, 1 - state.current_player)  # [N] A's pgx id
    pair_keys = jax.vmap(lambda i: jax.random.fold_in(opening_key, i))(game_index // 2)  # [N] one per pair
    batch = jnp.arange(num_games)

    def cond(carry):
        state, _, _, _, ply = carry
        return ~jnp.all(state.terminated | state.truncated) & (ply < max_length)

    def body(carry):
        state, key, result, actions, ply = carry
        key, key_a, key_b = jax.random.split(key, 3)
        action = jnp.where(state.current_player == a_player, player_a(state, key_a), player_b(state, key_b))
        if opening_plies:
            opening_logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
            opening = jax.vmap(lambda k, l: jax.random.categorical(jax.random.fold_in(k, ply), l))(
                pair_keys, opening_logits
            )
            action = jnp.where(ply < opening_plies, opening, action)
        over = state.terminated | state.truncated
        actions = actions.at[:, ply].set(jnp.where(over, -1, action).astype(jnp.int32))
        state = jax.vmap(env.step)(state, action)
        result = result + state.rewards[batch, a_player]
        return state, key, result, actions, ply + 1

    actions = jnp.full((num_games, max_length), -1, jnp.int32)
    _, _, result, actions, _ = jax.lax.while_loop(
        cond, body, (state, play_key, jnp.zeros(num_games), actions, jnp.int32(0))
    )
    return Games(
        results=result,
        actions=actions,
        lengths=jnp.sum(actions >= 0, axis=1).astype(jnp.int32),
        a_first=a_first,
        first_player=first_player,
    )


def play_match(
    env: pgx.Env,
    player_a: PlayerFn,
    player_b: PlayerFn,
    rng_key: jax.Array,
    num_games: int,
    max_length: int,
    first_game: int | jax.Array = 0,
    opening_plies: int = 0,
) -> jax.Array:
    """A's results [num_games] in {−1, 0, +1} (see `play_games`). The key is consumed."""
    return play_games(env, player_a, player_b, rng_key, num_games, max_length, first_game, opening_plies).results


def score(results: jax.Array) -> float:
    """(wins + draws / 2) / games for results in {−1, 0, +1}."""
    return float(jnp.mean((results + 1.0) / 2.0))
