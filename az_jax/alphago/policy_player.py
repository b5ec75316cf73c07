"""A policy network of AlphaGo (p_σ or p_ρ) playing by itself, without search, on batched pgx Go states: the raw
players of the paper's comparisons (Silver et al., Nature 2016: "the RL policy network won more than 80% of games
against the SL policy network"; Fig. 4b's raw p_σ and p_ρ).

The network never passes (its data has no passes), so a player must know when to: it plays only sensible moves
(legal, and not filling one of its own eyes: the sensibleness plane of Extended Data Table 2, with pgx's legal moves,
which include positional superko) and passes when none is left, the rule AlphaGo's rollouts and RocAlphaGo's players
end games with.

    actions = policy_actions(network, planes, params, states, key, temperature)   # [B] pgx actions
"""

from typing import cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import pgx

from az_jax.alphago import features as features_lib
from az_jax.alphago.position import from_pgx


def sensible_moves(states: pgx.State) -> tuple[jax.Array, jax.Array]:
    """(planes [B, N, N, 48] of the states, sensible [B, N²] bool: pgx-legal points that fill no own eye)."""
    planes = features_lib.features(from_pgx(states))
    b, n = planes.shape[0], planes.shape[1]
    eye_free = planes[..., features_lib.PLANE_SLICES["sensibleness"]].reshape(b, n * n) > 0
    return planes, eye_free & states.legal_action_mask[:, : n * n]


def policy_actions(
    network: nn.Module, num_planes: int, params, states: pgx.State, key: jax.Array, temperature: float = 0.0
) -> jax.Array:
    """[B] actions: the most probable sensible point (temperature 0), or one sampled from p^(1/temperature) over the
    sensible points; the pass action N² when no point is sensible."""
    planes, sensible = sensible_moves(states)
    logits = cast(jax.Array, network.apply({"params": params}, planes[..., :num_planes]))  # [B, N²]
    masked = jnp.where(sensible, logits, -jnp.inf)
    if temperature == 0.0:
        point = jnp.argmax(masked, axis=-1)
    else:
        point = jax.random.categorical(key, masked / temperature, axis=-1)
    pass_action = sensible.shape[-1]
    return jnp.where(sensible.any(axis=-1), point, pass_action).astype(jnp.int32)
