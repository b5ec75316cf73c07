"""Positions given as move lists, turned into batched pgx states: the input of the solved-position benchmarks."""
import jax
import jax.numpy as jnp
import numpy as np
import pgx


def states_from_moves(env: pgx.Env, moves: np.ndarray) -> pgx.State:
    """pgx states [P, ...] reached by playing each row of `moves` [P, L] (pgx actions, −1 padded at the end) from the
    game's start position. pgx draws which player id moves first from the init key; the key is fixed, and
    observations are from the mover's point of view, so what the network sees does not depend on it."""
    def replay(row):
        state = env.init(jax.random.key(0))

        def step(state, action):
            stepped = env.step(state, jnp.maximum(action, 0))
            return jax.tree.map(lambda new, old: jnp.where(action >= 0, new, old), stepped, state), None

        return jax.lax.scan(step, state, row)[0]

    return jax.jit(jax.vmap(replay))(jnp.asarray(moves, jnp.int32))
