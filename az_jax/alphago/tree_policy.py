"""AlphaGo's tree policy p_τ (Silver et al., Nature 2016, Methods "Rollout policy" and "Search algorithm", Extended
Data Table 4), in JAX: "similar to the rollout policy but with more features", a linear softmax over binary pattern
features trained like p_π (rollout_policy.py, whose encoding, pattern codes, vocabularies, accuracy and timing it
reuses through `rollout_policy.Family`; the training, pattern_training.py, takes either family).

    train_set, test_set = dataset.load_split(path)
    config = pattern_training.TrainConfig(steps=6000, learning_rate=2.0)
    policy, report = pattern_training.train(config, train_set, test_set, run_dir, TREE)
    scores = logits(policy, position)                            # [..., N*N] float32, -inf on illegal points
    report = time_per_move(policy, positions, batch_size=256)

In the paper p_τ gives a newly expanded node its interim priors until p_σ's arrive from the GPU queue. Our search
(apv_mcts.py) evaluates p_σ synchronously at every expansion, so it has no such interim and does not use p_τ; this
module is the policy itself, measured as p_π is (held-out move-prediction accuracy, time per move).

Features of a candidate move a: every p_π feature (response, save atari, the 8 neighbours, response pattern, 3x3
non-response pattern; nakade not implemented, as in p_π), then Extended Data Table 4's tree-only ones:

    self-atari        1  a is legal, captures nothing, and leaves the chain of the new stone with exactly 1 liberty
                         ("the move allows stones to be captured"; a capture that leaves one liberty, e.g. taking a
                         ko, is not counted)
    last move         34 the Manhattan distance |Δrow| + |Δcolumn| from a to the previous move (the opponent's stone
    distance             with turns_since 1), 17 features, and to the move before it (the player's own stone with
                         turns_since 2), 17 more. For each: distance d = 1, 2, ..., 16 is feature d - 1, d >= 17 is
                         feature 16 (d is at least 1: the stone's point is occupied, so never a candidate; 9x9 boards
                         reach at most 16, 19x19 ones 36). No feature when that move was a pass, the game is younger,
                         or the stone has been captured since (no stone carries that turns_since)
    non-response      D  the 12-point diamond (Manhattan distance 1 or 2, rollout_policy.DIAMOND) centred on a
    pattern              itself: the 8-valued state of each of the 12 points (rollout_policy.point_states: empty, own
                         or opponent stone with 1/2/>=3 liberties, off the board), hashed to a uint32 as p_π's
                         response code is (`rollout_policy.diamond_code` with c = 0), looked up in its own vocabulary
                         of the expert moves' diamonds seen at least `min_count` times (the paper: 32,207 patterns)

Weights [NUM_FIXED + R + K + NUM_EXTRA + D]: p_π's layout (so p_π's indices address them unchanged), then self-atari,
the 17 + 17 distance features, then the D diamond patterns. Every feature group is one-hot or off, so a logit is a
sum of at most 9 gathered weights.

Files: an .npz like p_π's with one more array (the diamond vocabulary) and `kind` = "tree policy (p_tau)", so that
`rollout_policy.load` refuses a p_τ file and `load` here refuses a p_π file, each with a one-line error.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from az_jax.alphago import rollout_policy as rollout_lib
from az_jax.alphago.position import Position
from az_jax.alphago.rollout_policy import DIAMOND, NUM_FIXED, OFF_BOARD

NUM_DISTANCE = 17  # per earlier move: distance 1..16, and >= 17
NUM_EXTRA = 1 + 2 * NUM_DISTANCE  # self-atari, then the two distance groups
KIND = "tree policy (p_tau)"


@struct.dataclass
class Encoded:
    """The raw features of every candidate point of positions [...] (before the vocabulary lookups)."""

    rollout: rollout_lib.Encoded  # p_π's features, [..., P] each
    self_atari: chex.Array  # [..., P] bool
    distance: chex.Array  # [..., P, 2] int8: feature 0..16 of the distance to the previous move / the one before, -1
    diamond_code: chex.Array  # [..., P] uint32: the hashed 12-point diamond around the point


@struct.dataclass
class TreePolicy:
    response_vocabulary: chex.Array  # [R] uint32, sorted (as p_π's)
    pattern_vocabulary: chex.Array  # [K] uint32, sorted: 3x3 patterns (as p_π's)
    diamond_vocabulary: chex.Array  # [D] uint32, sorted: the diamonds centred on the move
    weights: chex.Array  # [NUM_FIXED + R + K + NUM_EXTRA + D] float32
    # cuckoo hash tables of the three vocabularies (`hashed`, as p_π's); None: lookups by binary search
    response_table: chex.Array | None = None  # [T_R, 2] uint32
    pattern_table: chex.Array | None = None  # [T_K, 2] uint32
    diamond_table: chex.Array | None = None  # [T_D, 2] uint32

    @property
    def num_features(self) -> int:
        return int(self.weights.shape[-1])

    @property
    def extra_offset(self) -> int:
        """The index of the self-atari weight: p_π's weights come first."""
        return NUM_FIXED + int(self.response_vocabulary.shape[0]) + int(self.pattern_vocabulary.shape[0])


@struct.dataclass
class Indices:
    """Each candidate point's active features, as indices into the weights (-1: off)."""

    rollout: rollout_lib.Indices  # p_π's
    extra: chex.Array  # [..., P, 4] int32: self-atari, distance to the previous move, to the one before, diamond


# --- features -------------------------------------------------------------------------------------------------------


def distance_feature(board: jax.Array, turns_since: jax.Array, turns: int, colour: int, n: int) -> jax.Array:
    """[P] int32: the distance feature (0..16) of each point to the stone of `colour` played `turns` turns ago, -1
    everywhere when there is none (a pass, the start of the game, or captured since)."""
    at = turns_since == turns
    stone = jnp.argmax(at)
    present = at.any() & (board[stone] == colour)
    q = jnp.arange(n * n)
    d = jnp.abs(q // n - stone // n) + jnp.abs(q % n - stone % n)
    return jnp.where(present, jnp.minimum(d, NUM_DISTANCE) - 1, -1).astype(jnp.int32)


def diamond_codes(states: jax.Array, n: int) -> jax.Array:
    """[P] point states -> [P] uint32: the hashed 12-point diamond (DIAMOND order) centred on every point."""
    padded = jnp.pad(states.reshape(n, n), 2, constant_values=OFF_BOARD)
    around = jnp.stack([padded[2 + dr : 2 + dr + n, 2 + dc : 2 + dc + n].reshape(-1) for dr, dc in DIAMOND], -1)
    return rollout_lib.diamond_code(around, jnp.uint32(0))


def _encode_one(board: jax.Array, turns_since: jax.Array, ko: jax.Array, n: int) -> Encoded:
    board = board.astype(jnp.int8)
    rollout, moves, states = rollout_lib.encode_parts(board, turns_since, ko, n)
    self_atari = moves["legal"] & (moves["capture_size"] == 0) & (moves["liberties_after"] == 1)
    distance = jnp.stack(
        [distance_feature(board, turns_since, 1, -1, n), distance_feature(board, turns_since, 2, 1, n)], -1
    ).astype(jnp.int8)
    return Encoded(rollout=rollout, self_atari=self_atari, distance=distance, diamond_code=diamond_codes(states, n))


def encode(position: Position) -> Encoded:
    """The raw features of every point of `position` (leading dims [...]), before the vocabulary lookups."""
    return rollout_lib.batched(_encode_one, position)


# --- vocabularies and logits ----------------------------------------------------------------------------------------


def _as_rollout(policy: TreePolicy) -> rollout_lib.RolloutPolicy:
    """p_π's view of the policy: its vocabularies and their tables, for p_π's `indices` (which address the front of
    the weights)."""
    return rollout_lib.RolloutPolicy(
        policy.response_vocabulary,
        policy.pattern_vocabulary,
        policy.weights,
        response_table=policy.response_table,
        pattern_table=policy.pattern_table,
    )


def hashed(policy: TreePolicy) -> TreePolicy:
    """`policy` with the hash tables of its three vocabularies (rollout_policy.device_table)."""
    return dataclasses.replace(
        policy,
        response_table=rollout_lib.device_table(policy.response_vocabulary),
        pattern_table=rollout_lib.device_table(policy.pattern_vocabulary),
        diamond_table=rollout_lib.device_table(policy.diamond_vocabulary),
    )


def indices(policy: TreePolicy, encoded: Encoded) -> Indices:
    start = policy.extra_offset
    diamond = rollout_lib.find_or_lookup(policy.diamond_vocabulary, policy.diamond_table, encoded.diamond_code)
    distance = encoded.distance.astype(jnp.int32)
    extra = jnp.stack(
        [
            jnp.where(encoded.self_atari, start, -1),
            jnp.where(distance[..., 0] >= 0, start + 1 + distance[..., 0], -1),
            jnp.where(distance[..., 1] >= 0, start + 1 + NUM_DISTANCE + distance[..., 1], -1),
            jnp.where(diamond >= 0, start + NUM_EXTRA + diamond, -1),
        ],
        -1,
    )
    return Indices(rollout=rollout_lib.indices(_as_rollout(policy), encoded.rollout), extra=extra)


def _scores(weights: jax.Array, idx: Indices) -> jax.Array:
    """w · φ(s, a) for every point, -inf where illegal."""
    every = jnp.concatenate([rollout_lib.active(idx.rollout), idx.extra], -1)  # [..., P, 9]
    return rollout_lib.feature_sum(weights, every, idx.rollout.legal)


def _init(encoded: Encoded, actions: np.ndarray, min_count: int) -> tuple[TreePolicy, dict[str, int]]:
    """p_τ with the vocabularies of the expert moves `actions` [M] in `encoded` (numpy [M, P]) and zero weights."""
    response, pattern = rollout_lib.vocabularies(encoded.rollout, actions, min_count)
    diamond = rollout_lib.build_vocabulary(
        np.asarray(encoded.diamond_code)[np.arange(len(actions)), actions], min_count
    )
    policy = TreePolicy(
        response_vocabulary=jnp.asarray(response),
        pattern_vocabulary=jnp.asarray(pattern),
        diamond_vocabulary=jnp.asarray(diamond),
        weights=jnp.zeros(NUM_FIXED + len(response) + len(pattern) + NUM_EXTRA + len(diamond), jnp.float32),
    )
    policy = hashed(policy)
    sizes = {
        "response_patterns": len(response),
        "non_response_patterns": len(pattern),
        "diamond_patterns": len(diamond),
    }
    return policy, sizes


# --- files ----------------------------------------------------------------------------------------------------------


class TreePolicyError(Exception):
    """A tree-policy file that is missing, damaged or not one (one-line message)."""


def save(path: str | os.PathLike, policy: TreePolicy, report: dict | None = None) -> None:
    """Writes the policy (and the training report, as JSON text) to an .npz, atomically; never a pickle."""
    rollout_lib.save_arrays(
        path,
        {
            "kind": np.asarray(KIND),
            "response_vocabulary": np.asarray(policy.response_vocabulary),
            "pattern_vocabulary": np.asarray(policy.pattern_vocabulary),
            "diamond_vocabulary": np.asarray(policy.diamond_vocabulary),
            "weights": np.asarray(policy.weights),
            "report": np.asarray(json.dumps(report or {}, default=str)),
        },
    )


def load(path: str | os.PathLike) -> TreePolicy:
    try:
        with np.load(path, allow_pickle=False) as f:
            if "kind" not in f.files and "response_vocabulary" in f.files:
                raise TreePolicyError(f"{path} is a rollout policy (p_pi) file, not a tree policy (p_tau) file")
            if str(f["kind"]) != KIND:
                raise TreePolicyError(f"{path} is a {f['kind']} file, not a tree policy (p_tau) file")
            policy = TreePolicy(
                response_vocabulary=jnp.asarray(f["response_vocabulary"]),
                pattern_vocabulary=jnp.asarray(f["pattern_vocabulary"]),
                diamond_vocabulary=jnp.asarray(f["diamond_vocabulary"]),
                weights=jnp.asarray(f["weights"]),
            )
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise TreePolicyError(f"{path} is not a tree policy file ({type(e).__name__}: {e})") from None
    expected = policy.extra_offset + NUM_EXTRA + policy.diamond_vocabulary.shape[0]
    if policy.weights.shape != (expected,):
        raise TreePolicyError(f"{path}: {policy.weights.shape[0]} weights for {expected} features")
    return hashed(policy)


TREE = rollout_lib.Family(encode=encode, init=_init, indices=indices, scores=_scores, save=save, load=load)


def logits(policy: TreePolicy, position: Position) -> jax.Array:
    """[..., N*N] float32: w · φ(s, a) for every point a of `position`, -inf on illegal points."""
    return rollout_lib.logits(policy, position, TREE)


def select(policy: TreePolicy, position: Position, key: jax.Array, greedy: bool = False) -> jax.Array:
    """[...] int32: a move sampled from p_τ (or its argmax), N*N (pass) when no point is legal."""
    return rollout_lib.select(policy, position, key, greedy, TREE)


def accuracy(policy: TreePolicy, encoded: Encoded, actions: np.ndarray) -> float:
    """Share of positions where the argmax of p_τ is the expert's move (encoded: numpy [M, P], `encode_all`)."""
    return rollout_lib.accuracy(policy, encoded, actions, family=TREE)


def encode_all(positions: Position, chunk: int = 256) -> Encoded:
    return rollout_lib.encode_all(positions, chunk, TREE)


def time_per_move(policy: TreePolicy, positions: Position, batch_size: int, repeats: int = 20) -> dict[str, Any]:
    """As rollout_policy.time_per_move, for p_τ."""
    return rollout_lib.time_per_move(policy, positions, batch_size, repeats, TREE)
