"""AlphaGo Zero's evaluator ("gating", AlphaGo Zero, Silver et al., Nature 2017, Methods, "Evaluator"): the best
player so far generates self-play; every gating
interval the latest weights (the candidate) play it, and replace it only when they score above a threshold.

Gating games: the batched on-device arena (az_jax/core/arena.py), both sides greedy by visit count with no root
noise (τ → 0), random openings played once from each side, split over the devices of the training mesh. The decision
is taken on device from the match's W/D/L summed over devices, so the weights never leave the devices; only the counts
go to the host. The paper ran its evaluator asynchronously on other hardware; here the match shares the devices with
self-play, and the next self-play plays the best player, so it runs between two iterations (az_jax/runtime/loop.py).
"""

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from az_jax.core import arena
from az_jax.core.devices import first_index


@struct.dataclass
class BestPlayer:
    """The weights self-play uses when gating is on (replicated over devices)."""

    params: Any  # network parameters of the best player
    batch_stats: Any  # its batch-norm running averages
    iteration: jax.Array  # [] int32 the iteration whose weights these are (0: the initial network)

    @property
    def variables(self) -> dict:
        return {"params": self.params, "batch_stats": self.batch_stats}


def gating_decision(wins, draws, losses, threshold: float = 0.55):
    """True when the candidate's score (wins + draws / 2) / games is strictly above `threshold` (AGZ: "wins by a
    margin of > 55%"; Go has no draws, and a draw counts half as in the Elo model). Numbers or arrays; 0 games:
    False."""
    games = wins + draws + losses
    score = (wins + 0.5 * draws) / jnp.maximum(games, 1)
    return (games > 0) & (score > threshold)


def gate(
    env,
    player_fn,
    candidate: dict,
    best: BestPlayer,
    candidate_iteration: jax.Array,
    rng_key: jax.Array,
    *,
    num_games: int,
    max_length: int,
    opening_plies: int,
    threshold: float,
    axis_name: str,
) -> tuple[BestPlayer, dict]:
    """One device's share of a gating match, inside shard_map over `axis_name`: `num_games` (this device's) games of
    the candidate (variables `candidate`) against `best`, then the decision from the counts summed over devices.

    `player_fn(variables) -> arena.PlayerFn` makes a greedy player. The key must already differ per device. Returns
    the new best player (the candidate's weights if accepted, else `best` unchanged) and the gating metrics."""
    games = arena.play_games(
        env,
        player_fn(candidate),
        player_fn(best.variables),
        rng_key,
        num_games,
        max_length,
        first_game=first_index(num_games, axis_name),
        opening_plies=opening_plies,
    )
    count = lambda mask: jax.lax.psum(mask.sum(dtype=jnp.int32), axis_name)
    wins, draws, losses = count(games.results > 0), count(games.results == 0), count(games.results < 0)
    accepted = gating_decision(wins, draws, losses, threshold)
    pick = lambda new, old: jnp.where(accepted, new, old)
    new_best = BestPlayer(
        params=jax.tree.map(pick, candidate["params"], best.params),
        batch_stats=jax.tree.map(pick, candidate["batch_stats"], best.batch_stats),
        iteration=pick(candidate_iteration, best.iteration),
    )
    metrics = {
        "gating/score": (wins + 0.5 * draws) / (wins + draws + losses),
        "gating/wins": wins,
        "gating/draws": draws,
        "gating/losses": losses,
        "gating/accepted": accepted.astype(jnp.int32),
        "gating/best_iteration": new_best.iteration,
    }
    return new_best, metrics
