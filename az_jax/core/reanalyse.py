"""Reanalyse: stored positions searched again by the latest network, their policy targets replaced by the new search's.

MuZero Reanalyse (Schrittwieser et al., "Online and Offline Reinforcement Learning by Planning with a Learned Model",
NeurIPS 2021; MuZero, Nature 2020, Appendix H "Reanalyze"): a position's policy target was made by the network that
played it, possibly many updates ago; searching it again with the latest network gives a fresher target for the next
time it is trained on. Here the model is the game itself (pgx), as in AlphaZero, so each replay row keeps its game
state (replay.ReplayBuffer.state) and the search is self-play's own (its simulations, method and root noise). Only the
policy target and the root's search value (where the buffer keeps it, for Config.value_target_mix) are replaced; z
stays the game's outcome (AlphaZero's value target; MuZero's reanalysed n-step value targets need a value bootstrap
that z does not have).

    buffer, metrics = reanalyse(env, apply_fn, variables, search, buffer, key, num_positions=R, chunks=C)

R distinct rows are drawn uniformly among the rows that will be trained on (pending or done), searched in C groups
one after the other (a tree lives only during its group's search), and rewritten. Not in the AlphaZero papers.
"""

import jax
import jax.numpy as jnp
import pgx

from az_jax.core import replay as replay_lib
from az_jax.core import search as search_lib
from az_jax.core import selfplay as selfplay_lib


def reanalyse(
    env: pgx.Env,
    apply_fn: search_lib.ApplyFn,
    variables: dict,
    search: search_lib.SearchConfig,
    buffer: replay_lib.ReplayBuffer,
    rng_key: jax.Array,
    *,
    num_positions: int,
    chunks: int = 1,
) -> tuple[replay_lib.ReplayBuffer, dict]:
    """Searches `num_positions` distinct trainable rows of `buffer` (which keeps states) again and rewrites their
    targets; the key is consumed. Rows drawn while fewer than `num_positions` rows are trainable (the run's first
    iterations) are searched but not written. Returns the buffer and this device's sums: "positions" (rows rewritten)
    and "policy_change" (the total variation ½·Σ|π_new − π_old| summed over them)."""
    assert buffer.state is not None, "Reanalyse needs a buffer that keeps game states (replay.init(state_example=…))"
    rows_key, search_key = jax.random.split(rng_key)
    trainable = buffer.pending | buffer.done  # [N]
    weights = trainable.astype(jnp.float32)
    rows = jax.random.choice(
        rows_key,
        buffer.capacity,
        (num_positions,),
        replace=False,
        p=weights / jnp.maximum(weights.sum(), 1.0),
    )  # [R] distinct
    valid = trainable[rows]  # [R]
    states = jax.tree.map(lambda x: x[rows], buffer.state)
    _, policy, _, value, _ = selfplay_lib.search_in_chunks(apply_fn, env, variables, search_key, states, search, chunks)
    old, _ = replay_lib.dense_targets(buffer, rows)
    change = 0.5 * jnp.abs(policy - old).sum(-1)  # [R]
    buffer = replay_lib.rewrite(buffer, rows, policy, value, valid)
    return buffer, {"positions": valid.sum(), "policy_change": jnp.where(valid, change, 0.0).sum()}
