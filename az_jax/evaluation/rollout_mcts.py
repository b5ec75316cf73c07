"""Classic Monte Carlo tree search with uniformly random rollouts: the pre-AlphaGo baseline player, batched in JAX.

No network. Every leaf that the search expands is valued by playing the game out with uniformly random legal moves
(`rollouts` independent playouts, averaged), and children are chosen by UCB1 (Kocsis & Szepesvári's UCT):

    score(a) = (Q(a) + 1) / 2 + c · sqrt(ln N / N(a)),     unvisited legal children first (in random order),

with Q ∈ [−1, 1] from the point of view of the player to move (so (Q + 1) / 2 is the usual [0, 1] reward) and
c = √2 by default (UCB1's constant for rewards in [0, 1]). The tree, backup and sign conventions are mctx's
(`mctx.search` with our own selection function) and the same as az_jax's network search (az_jax/core/search.py): rewards
belong to the player who just moved, discount −1 between plies and 0 after the end. The move played is the most
visited root child.
"""

import functools
import math

import jax
import jax.numpy as jnp
import mctx
import pgx


def random_rollout(env: pgx.Env, state: pgx.State, rng_key: jax.Array, max_length: int) -> jax.Array:
    """Plays every game of the batch [B, ...] to its end with uniformly random legal moves.

    Returns the final outcome [B] from the point of view of the player to move in `state` (0 for finished games).
    At most `max_length` plies are played (the games' own caps end them before that)."""
    batch = jnp.arange(state.current_player.shape[0])
    me = state.current_player

    def cond(carry):
        s, _, _, ply = carry
        return ~jnp.all(s.terminated | s.truncated) & (ply < max_length)

    def body(carry):
        s, key, value, ply = carry
        key, sub = jax.random.split(key)
        action = jax.random.categorical(sub, jnp.where(s.legal_action_mask, 0.0, -jnp.inf))
        s = jax.vmap(env.step)(s, action)
        return s, key, value + s.rewards[batch, me], ply + 1

    _, _, value, _ = jax.lax.while_loop(cond, body, (state, rng_key, jnp.zeros(batch.shape), jnp.int32(0)))
    return value


def _rollout_value(env, state, rng_key, rollouts: int, max_length: int) -> jax.Array:
    """Mean of `rollouts` playouts [B]; the key is consumed."""
    keys = jax.random.split(rng_key, rollouts)
    values = jax.vmap(lambda k: random_rollout(env, state, k, max_length))(keys)  # [R, B]
    return jnp.mean(values, axis=0)


def uct_action_selection(rng_key, tree: mctx.Tree, node_index, depth=None, *, c: float) -> jax.Array:
    """UCB1 over one node's children (unbatched tree, as mctx calls it). Illegal children have the masked prior
    (mctx calls the root's selection without `depth`; the root's prior is masked the same way)."""
    del depth
    visits = tree.children_visits[node_index]  # [A]
    legal = tree.children_prior_logits[node_index] > jnp.finfo(jnp.float32).min / 2
    q = tree.qvalues(node_index)  # [A], mover's view
    parent = jnp.maximum(tree.node_visits[node_index], 1).astype(jnp.float32)
    ucb = (q + 1.0) / 2.0 + c * jnp.sqrt(jnp.log(parent) / jnp.maximum(visits, 1))
    noise = jax.random.uniform(rng_key, visits.shape)  # random order among equals
    score = jnp.where(visits == 0, 1e6 + noise, ucb + 1e-6 * noise)  # unvisited children first
    return jnp.argmax(jnp.where(legal, score, -jnp.inf)).astype(jnp.int32)


def rollout_search(
    env: pgx.Env,
    state: pgx.State,
    rng_key: jax.Array,
    *,
    num_simulations: int,
    c: float = math.sqrt(2),
    rollouts: int = 1,
    max_length: int = 1000,
) -> mctx.Tree:
    """Searches a batch of states [B, ...] with UCT and random rollouts; returns the mctx tree. The key is consumed."""
    root_key, search_key = jax.random.split(rng_key)
    legal = state.legal_action_mask
    uniform = jnp.where(legal, 0.0, jnp.finfo(jnp.float32).min)  # [B, A] masked uniform prior

    def recurrent_fn(params, key, action, s):
        del params
        mover = s.current_player
        s = jax.vmap(env.step)(s, action)
        over = s.terminated | s.truncated
        value = _rollout_value(env, s, key, rollouts, max_length)
        output = mctx.RecurrentFnOutput(
            reward=s.rewards[jnp.arange(action.shape[0]), mover],
            discount=jnp.where(over, 0.0, -1.0),
            prior_logits=jnp.where(s.legal_action_mask, 0.0, jnp.finfo(jnp.float32).min),
            value=jnp.where(over, 0.0, value),
        )
        return output, s

    root = mctx.RootFnOutput(
        prior_logits=uniform, value=_rollout_value(env, state, root_key, rollouts, max_length), embedding=state
    )
    select = functools.partial(uct_action_selection, c=c)
    return mctx.search(
        params=(),
        rng_key=search_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=select,
        interior_action_selection_fn=select,
        num_simulations=num_simulations,
        invalid_actions=~legal,
    )


def rollout_mcts_player(
    env: pgx.Env, *, num_simulations: int, c: float = math.sqrt(2), rollouts: int = 1, max_length: int = 1000
):
    """A `(states [B, ...], key) -> actions [B]` player: the most visited root child of a UCT search."""

    def player(states: pgx.State, rng_key: jax.Array) -> jax.Array:
        tree = rollout_search(
            env, states, rng_key, num_simulations=num_simulations, c=c, rollouts=rollouts, max_length=max_length
        )
        visits = tree.children_visits[:, mctx.Tree.ROOT_INDEX]
        return jnp.argmax(jnp.where(states.legal_action_mask, visits, -1), axis=-1)

    return player
