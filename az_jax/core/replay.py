"""An on-device, fixed-capacity circular buffer of self-play positions, written in place and sampled uniformly.

A position is written when it is played, with its outcome still unknown ("pending"); when its game ends, every pending
position of that game (same slot, same episode number) gets z from its own mover's point of view, and, with KataGo's
auxiliary targets on, the final position's ownership and score margin from that same point of view (a resigned game
has no final position: with resignation on, its positions are marked unscored and the learner leaves them out of the
auxiliary losses). Only positions with a known outcome are sampled. Positions of a game still in progress carry over
between iterations, so no game is ever truncated at an iteration boundary.

Row placement is a pure function of the global ply counter: ply t writes its B rows at (t·B + b) mod N. No pointer.
With Reanalyse on (az_jax/core/reanalyse.py) each row also keeps its position's game state, and `rewrite` replaces the
search targets of chosen rows.
"""

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from az_jax.core.rows import where_rows
from envs import symmetries as symmetries_lib


@struct.dataclass
class ReplayBuffer:
    observation: jax.Array  # [N, *obs_shape] pgx observation (bool)
    # [N, A] float32 search policy π (zero on illegal actions); compact rows (`policy_entries` K > 0): [N, K] float32,
    # the K largest entries of π, at the actions `policy_index` names
    policy: jax.Array
    # [N, A] bool legal-action mask; compact rows: [N, ⌈A/8⌉] uint8, the mask packed 8 actions a byte (jnp.packbits)
    legal: jax.Array
    player: jax.Array  # [N] int32 pgx player id of the mover
    slot: jax.Array  # [N] int32 self-play slot the game was played in
    episode: jax.Array  # [N] int32 episode number of that slot's game
    outcome: jax.Array  # [N] float32 z ∈ {−1, 0, +1} for the mover (valid where done)
    pending: jax.Array  # [N] bool written, game still in progress
    done: jax.Array  # [N] bool outcome known: may be sampled
    # [N] float32 the root's search value for the mover; None (not kept) when the value target is z alone
    # (Config.value_target_mix = 0)
    search_value: jax.Array | None = None
    # [N, H·W] int8 ownership of each point of the game's final position for the mover, in {−1, 0, +1} (valid where
    # done); None when not kept (Config.aux_ownership_weight = 0)
    ownership: jax.Array | None = None
    # [N] float32 the game's final score margin in points for the mover (valid where done); None when not kept
    # (Config.aux_score_weight = 0)
    score: jax.Array | None = None
    # [N] bool the game ended by its rules, not by resignation, so `ownership` and `score` are its final position's
    # (valid where done); None when every game is scored (no resignation, or no auxiliary targets)
    scored: jax.Array | None = None
    # compact rows (Config.compact_replay): [N, K] int16 the actions of `policy`'s K entries; None: dense rows
    policy_index: jax.Array | None = None
    # [N, ...] pgx.State of each position, for searching it again (Reanalyse, Config.reanalyse_batches > 0); None:
    # not kept
    state: Any = None
    # [N] bool False where the position's game played random opening moves after it, so its outcome says little of
    # the position (Config.mask_random_opening_values): no value loss there; None: every outcome is a target
    value_known: jax.Array | None = None
    num_actions: int = struct.field(pytree_node=False, default=0)  # A (compact rows store less than A per row)

    @property
    def capacity(self) -> int:
        return self.outcome.shape[0]


@struct.dataclass
class Batch:
    observation: jax.Array  # [n, *obs_shape]
    policy: jax.Array  # [n, A]
    legal: jax.Array  # [n, A]
    outcome: jax.Array  # [n] the value target: z, or z mixed with the search value (sample's value_target_mix)
    ownership: jax.Array | None = None  # [n, H·W] float32 final ownership for the mover, where the buffer keeps it
    score: jax.Array | None = None  # [n] float32 final score margin in points for the mover, where the buffer keeps it
    # [n] float32 1 where the position's game was scored (not resigned), else 0: the auxiliary losses' weights; None:
    # every position's game was scored
    aux_weight: jax.Array | None = None
    # [n] float32 1 where the outcome is a value target, 0 where it follows random opening moves (the buffer's
    # `value_known`); None: every position's
    value_weight: jax.Array | None = None


def init(
    capacity: int,
    obs_shape: tuple[int, ...],
    obs_dtype,
    num_actions: int,
    keep_search_value: bool = False,
    keep_ownership: bool = False,
    keep_score: bool = False,
    policy_entries: int = 0,
    keep_scored: bool = False,
    state_example: Any = None,
    keep_value_known: bool = False,
) -> ReplayBuffer:
    """An empty buffer; ownership is kept per point of the observation's H × W board. `keep_scored`: whether each
    game was scored is kept (resignation with auxiliary targets). `policy_entries` K > 0: compact rows, each keeping
    the K largest entries of π (exactly π when no position has more than K legal actions, the caller's bound:
    GameSpec.max_legal_actions) and the legal mask as bits. `state_example` (one unbatched pgx.State; None: no states
    kept): each row also keeps its position's game state, shaped as this one (Reanalyse). `keep_value_known`: whether
    each row's outcome is a value target is kept (Config.mask_random_opening_values)."""
    zeros = lambda shape, dtype: jnp.zeros(shape, dtype)
    points = obs_shape[0] * obs_shape[1] if keep_ownership else 0
    compact = 0 < policy_entries < num_actions
    return ReplayBuffer(
        observation=zeros((capacity, *obs_shape), obs_dtype),
        policy=zeros((capacity, policy_entries if compact else num_actions), jnp.float32),
        legal=zeros((capacity, -(-num_actions // 8)), jnp.uint8)
        if compact
        else zeros((capacity, num_actions), jnp.bool_),
        policy_index=zeros((capacity, policy_entries), jnp.int16) if compact else None,
        num_actions=num_actions,
        player=zeros((capacity,), jnp.int32),
        slot=zeros((capacity,), jnp.int32),
        episode=zeros((capacity,), jnp.int32),
        outcome=zeros((capacity,), jnp.float32),
        pending=zeros((capacity,), jnp.bool_),
        done=zeros((capacity,), jnp.bool_),
        search_value=zeros((capacity,), jnp.float32) if keep_search_value else None,
        ownership=zeros((capacity, points), jnp.int8) if keep_ownership else None,
        score=zeros((capacity,), jnp.float32) if keep_score else None,
        scored=zeros((capacity,), jnp.bool_) if keep_scored else None,
        state=None
        if state_example is None
        else jax.tree.map(lambda x: zeros((capacity, *x.shape), x.dtype), state_example),
        value_known=zeros((capacity,), jnp.bool_) if keep_value_known else None,
    )


def _stored_policy(buffer: ReplayBuffer, policy: jax.Array) -> tuple[jax.Array, jax.Array | None]:
    """π [R, A] as the buffer's rows keep it: itself (dense rows), or its K largest entries and their actions."""
    if buffer.policy_index is None:
        return policy, None
    policy, index = jax.lax.top_k(policy, buffer.policy.shape[1])
    return policy, index.astype(jnp.int16)


def add(
    buffer: ReplayBuffer,
    ply_index: jax.Array,
    observation,
    policy,
    legal,
    player,
    episode,
    search_value: jax.Array | None = None,
    trainable: jax.Array | None = None,
    state: Any = None,
    value_known: jax.Array | None = None,
) -> ReplayBuffer:
    """Writes one ply of B games (arrays [B, ...]) at rows (ply_index·B + b) mod N, outcome pending.
    `search_value` [B] and `state` (the games' pgx.State [B, ...]) are stored when the buffer keeps them (ignored
    otherwise). `trainable` ([] or [B] bool; None:
    all) marks the positions that will be trained on: the others (the fast searches of playout cap randomization) are
    written neither pending nor done, so no outcome ever reaches them and no minibatch draws them. `value_known` ([]
    or [B] bool; None: all) marks the positions whose outcome will be a value target, where the buffer keeps that."""
    num_games = player.shape[0]
    # (p·B) mod N computed as ((p mod N)·B) mod N, so a long run's ply counter cannot overflow int32.
    rows = ((ply_index % buffer.capacity) * num_games + jnp.arange(num_games)) % buffer.capacity
    put = lambda field, value: field.at[rows].set(value)
    policy, index = _stored_policy(buffer, policy)
    if buffer.policy_index is not None:  # compact rows: the mask's bits
        legal = jnp.packbits(legal, axis=-1)
    return buffer.replace(  # type: ignore[attr-defined]
        observation=put(buffer.observation, observation),
        policy=put(buffer.policy, policy),
        legal=put(buffer.legal, legal),
        policy_index=None if index is None else put(buffer.policy_index, index),
        player=put(buffer.player, player),
        slot=put(buffer.slot, jnp.arange(num_games, dtype=jnp.int32)),
        episode=put(buffer.episode, episode),
        outcome=put(buffer.outcome, 0.0),
        pending=put(buffer.pending, True if trainable is None else jnp.broadcast_to(trainable, (num_games,))),
        done=put(buffer.done, False),
        search_value=None if buffer.search_value is None else put(buffer.search_value, search_value),
        ownership=None if buffer.ownership is None else put(buffer.ownership, 0),
        score=None if buffer.score is None else put(buffer.score, 0.0),
        scored=None if buffer.scored is None else put(buffer.scored, False),
        state=None if buffer.state is None else jax.tree.map(put, buffer.state, state),
        value_known=None
        if buffer.value_known is None
        else put(buffer.value_known, True if value_known is None else jnp.broadcast_to(value_known, (num_games,))),
    )


def rewrite(
    buffer: ReplayBuffer, rows: jax.Array, policy: jax.Array, search_value: jax.Array, valid: jax.Array
) -> ReplayBuffer:
    """Replaces the policy targets π [R, A] (and search values [R], where kept) of distinct `rows` [R] where `valid`
    [R] bool; everything else of those rows (outcome, mask, state) stays. Reanalyse's write."""
    policy, index = _stored_policy(buffer, policy)
    put = lambda field, value: field.at[rows].set(where_rows(valid, value, field[rows]))
    return buffer.replace(  # type: ignore[attr-defined]
        policy=put(buffer.policy, policy),
        policy_index=None if index is None else put(buffer.policy_index, index),
        search_value=None if buffer.search_value is None else put(buffer.search_value, search_value),
    )


def dense_targets(buffer: ReplayBuffer, rows: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The policy targets [R, A] and legal masks [R, A] bool of `rows` [R], compact rows expanded."""
    policy, legal = buffer.policy[rows], buffer.legal[rows]
    if buffer.policy_index is not None:  # compact rows back to [R, A]: the entries at their actions, the mask's bits
        index = buffer.policy_index[rows].astype(jnp.int32)
        dense = jnp.zeros((rows.shape[0], buffer.num_actions), jnp.float32)
        policy = dense.at[jnp.arange(rows.shape[0])[:, None], index].set(policy)
        legal = jnp.unpackbits(legal, axis=-1, count=buffer.num_actions).astype(jnp.bool_)
    return policy, legal


def resolve(
    buffer: ReplayBuffer,
    ended: jax.Array,
    episode: jax.Array,
    rewards: jax.Array,
    final_targets: tuple[jax.Array, jax.Array] | None = None,
    resigned: jax.Array | None = None,
) -> ReplayBuffer:
    """Gives every pending position of each game that just ended its outcome.

    ended [B] bool, episode [B] int32 (the episode number of the game that ended in each slot), rewards [B, 2] (pgx's
    final rewards per player id). A position's target is z = rewards[slot, player]: +1 if its mover won, −1 if lost, 0
    draw — the mover's own point of view whoever moved last. `final_targets` (ownership [B, 2, H·W], margin [B, 2],
    per player id like `rewards`: GameSpec.final_targets of each slot's final state) reach the positions the same way,
    into the fields the buffer keeps. `resigned` [B] bool (None: none was): the games that ended by resignation, whose
    positions are marked unscored where the buffer keeps that.
    """
    hit = buffer.pending & ended[buffer.slot] & (buffer.episode == episode[buffer.slot])  # [N]
    z = rewards[buffer.slot, buffer.player]  # [N]
    ownership, score = buffer.ownership, buffer.score
    if final_targets is not None and ownership is not None:
        mine = final_targets[0][buffer.slot, buffer.player].astype(jnp.int8)  # [N, H·W]
        ownership = jnp.where(hit[:, None], mine, ownership)
    if final_targets is not None and score is not None:
        score = jnp.where(hit, final_targets[1][buffer.slot, buffer.player], score)
    scored = buffer.scored
    if scored is not None:
        by_rules = jnp.ones_like(ended) if resigned is None else ~resigned  # [B]
        scored = jnp.where(hit, by_rules[buffer.slot], scored)
    return buffer.replace(  # type: ignore[attr-defined]
        outcome=jnp.where(hit, z, buffer.outcome),
        pending=buffer.pending & ~hit,
        done=buffer.done | hit,
        ownership=ownership,
        score=score,
        scored=scored,
    )


def sample(
    buffer: ReplayBuffer,
    rng_key: jax.Array,
    batch_size: int,
    symmetry_game: str | None = None,
    value_target_mix: float | jax.Array = 0.0,
) -> Batch:
    """Uniform sample with replacement among positions whose outcome is known; the key is consumed.

    The batch's value target is z, or with `value_target_mix` λ > 0 (a float, or a [] array inside a program: the
    buffer must keep search values)
    (1 − λ)·z + λ·v_search: the game's outcome mixed with the root's search value at the time the position was played,
    both from the mover's point of view.

    With `symmetry_game`, each sampled position is seen under its own uniformly random symmetry of that game
    (AlphaGo Zero's data augmentation, AlphaGo Zero, Silver et al., Nature 2017, Methods, "Domain knowledge"):
    observation, policy target, legal mask and ownership are transformed together, the outcome and score are unchanged.
    Requires at least one position with an outcome (the learner checks before calling)."""
    rows_key = rng_key
    if symmetry_game is not None:
        rows_key, symmetry_key = jax.random.split(rng_key)
    weights = buffer.done.astype(jnp.float32)
    rows = jax.random.choice(rows_key, buffer.capacity, (batch_size,), p=weights / jnp.maximum(weights.sum(), 1.0))
    outcome = buffer.outcome[rows]
    if isinstance(value_target_mix, jax.Array) or value_target_mix:
        assert buffer.search_value is not None  # some λ > 0 (config.keeps_search_value): the buffer keeps them
        outcome = (1.0 - value_target_mix) * outcome + value_target_mix * buffer.search_value[rows]
    policy, legal = dense_targets(buffer, rows)
    batch = Batch(
        observation=buffer.observation[rows],
        policy=policy,
        legal=legal,
        outcome=outcome,
        ownership=None if buffer.ownership is None else buffer.ownership[rows].astype(jnp.float32),
        score=None if buffer.score is None else buffer.score[rows],
        aux_weight=None if buffer.scored is None else buffer.scored[rows].astype(jnp.float32),
        value_weight=None if buffer.value_known is None else buffer.value_known[rows].astype(jnp.float32),
    )
    if symmetry_game is None:
        return batch
    return augment(batch, symmetry_key, symmetry_game)


def augment(batch: Batch, rng_key: jax.Array, symmetry_game: str) -> Batch:
    """Each position of `batch` [n, ...] under its own uniformly random symmetry of the game; the key is consumed."""
    sym = symmetries_lib.random_symmetry(symmetry_game, rng_key, batch.outcome.shape[0])  # [n]
    ownership = batch.ownership
    if ownership is not None:  # a board plane [n, H, W, 1], moved with the observation
        n, h, w = batch.observation.shape[:3]
        plane = ownership.reshape(n, h, w, 1)
        ownership = symmetries_lib.transform_observation(symmetry_game, sym, plane).reshape(n, h * w)
    return batch.replace(  # type: ignore[attr-defined]
        observation=symmetries_lib.transform_observation(symmetry_game, sym, batch.observation),
        policy=symmetries_lib.transform_policy(symmetry_game, sym, batch.policy),
        legal=symmetries_lib.transform_policy(symmetry_game, sym, batch.legal),
        ownership=ownership,
    )
