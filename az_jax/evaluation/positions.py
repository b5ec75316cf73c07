"""Solved-position benchmarks: positions given as move lists, turned into batched pgx states, a player run on them,
and the share of its moves that keep each position's game-theoretic value."""

from typing import NamedTuple

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


class Result(NamedTuple):
    """A player's moves in a set of solved positions. Arrays [P]."""

    optimal: np.ndarray  # [P] bool the move kept the position's value
    value: np.ndarray  # [P] int the position's value for the mover (1 won, 0 drawn, −1 lost)
    action: np.ndarray  # [P] int the move played

    def summary(self) -> dict:
        """Share of optimal moves overall and in won / drawn positions, the count of wrong moves, and the counts of
        positions."""
        won, drawn = self.value == 1, self.value == 0
        share = lambda mask: float(self.optimal[mask].mean()) if mask.any() else float("nan")
        return {
            "optimal": float(self.optimal.mean()),
            "optimal_won": share(won),
            "optimal_drawn": share(drawn),
            "mistakes": int((~self.optimal).sum()),
            "positions": int(self.optimal.size),
            "won": int(won.sum()),
            "drawn": int(drawn.sum()),
        }


def evaluate(
    player,
    env: pgx.Env,
    moves: np.ndarray,
    optimal: np.ndarray,
    value: np.ndarray,
    rng_key: jax.Array,
    batch_size: int | None = None,
) -> Result:
    """Runs `player` (states [n, ...], key) -> actions [n] on the positions `moves` [P, L] and scores each move
    against `optimal` [P, A]; `value` [P] is carried into the result. With `batch_size` None all P positions are one
    batch and the key goes to the player as it is; otherwise batches of `batch_size` (the last padded by repeating
    the first position, so one program serves every batch), each with its own key split from `rng_key`. The key is
    consumed."""
    act = jax.jit(player)
    if batch_size is None:
        action = np.asarray(act(states_from_moves(env, moves), rng_key))
    else:
        actions = []
        keys = jax.random.split(rng_key, -(-len(moves) // batch_size))
        for start, key in zip(range(0, len(moves), batch_size), keys):
            chunk = moves[start : start + batch_size]
            padded = np.concatenate([chunk, np.repeat(chunk[:1], batch_size - len(chunk), axis=0)])
            actions.append(np.asarray(act(states_from_moves(env, padded), key))[: len(chunk)])
        action = np.concatenate(actions)
    return Result(optimal=optimal[np.arange(len(action)), action], value=value, action=action)
