"""AlphaGo's fast rollout policy p_π (Silver et al., Nature 2016, Methods "Rollout policy" and Extended Data Table 4),
in JAX: a linear softmax over binary local pattern features, p_π(a | s) ∝ exp(w · φ(s, a)), trained by maximising
the log-likelihood of expert moves with SGD. Batched over any leading dimensions and jit-able, for rollouts.

    train_set, test_set = dataset.load_split(path)
    policy, report = pattern_training.train(config, train_set, test_set, run_dir)   # vocabularies, then SGD
    scores = logits(policy, position)                            # [..., N*N] float32, -inf on illegal points
    report = time_per_move(policy, positions, batch_size=256)    # µs per move selection, to set beside 2 µs

Features of a candidate move a (Extended Data Table 4), all relative to the player to move:

    response           1  a's response pattern (below) is in the response vocabulary
    save atari         1  a is the liberty of an own chain in atari and the chain it joins has >= 2 liberties after
                          the move (captures counted)
    neighbour          8  a is 8-connected to the previous move, one feature per relative position
    response pattern   R  the 12-point diamond (Manhattan distance 1 or 2) around the previous move, a inside it: the
                          state of each of the 12 points, the liberty bucket of the previous move's chain, and a's
                          place (0..11) in the diamond
    non-response       K  the 3x3 pattern around a: the state of each of its 8 neighbours
    pattern
    nakade             -  not implemented (Extended Data Table 4's 8,192 nakade patterns)

A point's state is one of 8 (`point_states`): 0 empty, 1/2/3 own stone whose chain has 1/2/>=3 liberties, 4/5/6
the same for an opponent stone, 7 off the board. The previous move is the stone with `turns_since == 1`; after a pass
(or at the start) there is none and the response, neighbour and response-pattern features are off.

Pattern codes. The 3x3 code is exact: the 8 neighbour states as base-8 digits (3 bits each, `NEIGHBOURS` order,
first neighbour in the lowest bits), < 8^8 = 2^24. The diamond needs 12 * 3 + 2 + 4 = 42 bits, so its code is a
32-bit hash (`_mix`, murmur3's finaliser over three parts); two distinct diamonds share a code with probability ~2^-32
per pair, negligible against a vocabulary of ~10^5 patterns. Codes are uint32.

Vocabularies (`build_vocabulary`): the sorted distinct codes of the expert moves' patterns in the training data seen at
least `min_count` times (the paper: 32,207 response and 69,338 non-response patterns, Tygem data); a code not in the
vocabulary gives no feature. Lookup (`find`) probes a cuckoo hash table of the vocabulary (`hash_table`: two slots per
code, at most 1/4 of the table full, built on the host when a policy is made or loaded: `hashed`), two gathers where a
binary search (`lookup`, `jnp.searchsorted`; what a policy without tables uses) makes ~log2(V) dependent ones.
Weights are one dense vector [2 + 8 + R + K]: response, save atari, the 8 neighbours, the R response patterns, the K
non-response patterns. As the features are binary and mostly one per group, the logit of a is a sum of at most 5
gathered weights, never a dense φ(s, a).

Sharing with the tree policy p_τ (tree_policy.py, "p_π's features and more"): `encode_parts` hands out what the features
were computed from, `batched`, `diamond_code`, `active` and `feature_sum` build any feature set, and `Family` bundles
a feature set's encode / vocabularies / indices / scores / files, so that `logits`, `select`, `encode_all`,
`accuracy`, `time_per_move` and the training (pattern_training.py) serve both (`family=ROLLOUT`, p_π, by default).
A p_π file has no `kind` entry; a file that has one (a p_τ file) is refused by `load`.

Simplifications against the paper: patterns are not made invariant under the 8 board symmetries (the paper does not
say whether its are); save atari does not count captures of opponent stones elsewhere that free the chain; the
features are recomputed from the whole board at each move, where the paper updates patterns incrementally (a rollout
carries its chain labels and reads only the liberty counts it needs: rollout_game.py).

Legality as in features.py: the point is empty, not `position.ko`, and not suicide (positional superko not checked).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
import zipfile
from collections.abc import Callable
from typing import Any, Protocol

import chex
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from az_jax.alphago.features import _move_features, _shifted
from az_jax.alphago.lean_chains import Chains
from az_jax.alphago.lean_moves import move_features as lean_move_features
from az_jax.alphago.position import Position
from az_jax.runtime import files

EMPTY, OFF_BOARD = 0, 7
NUM_STATES = 8
# the 8 neighbours of the 3x3 pattern, (row, column) offsets; also the neighbour features' order
NEIGHBOURS: tuple[tuple[int, int], ...] = ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1))
# the 12-point diamond around the previous move: Manhattan distance 1, then 2, row-major within each
DIAMOND: tuple[tuple[int, int], ...] = tuple(
    sorted(
        ((dr, dc) for dr in range(-2, 3) for dc in range(-2, 3) if 1 <= abs(dr) + abs(dc) <= 2),
        key=lambda d: (abs(d[0]) + abs(d[1]), d),
    )
)
NUM_FIXED = 10  # response, save atari, 8 neighbours
_RESPONSE, _SAVE_ATARI, _NEIGHBOUR = 0, 1, 2


@struct.dataclass
class Encoded:
    """The raw features of every candidate point of positions [...] (before the vocabulary lookup)."""

    legal: chex.Array  # [..., P] bool
    save_atari: chex.Array  # [..., P] bool
    neighbour: chex.Array  # [..., P] int8: 0..7, the previous move's place around the point's (NEIGHBOURS), -1 none
    in_diamond: chex.Array  # [..., P] bool: inside the 12-point diamond around the previous move
    response_code: chex.Array  # [..., P] uint32: the diamond's hashed code with the point's place (if in_diamond)
    pattern_code: chex.Array  # [..., P] uint32: the 3x3 code around the point


@struct.dataclass
class RolloutPolicy:
    response_vocabulary: chex.Array  # [R] uint32, sorted: the response patterns' codes
    pattern_vocabulary: chex.Array  # [K] uint32, sorted: the non-response (3x3) patterns' codes
    weights: chex.Array  # [NUM_FIXED + R + K] float32
    # cuckoo hash tables of the two vocabularies (`hashed`); None: lookups by binary search
    response_table: chex.Array | None = None  # [T_R, 2] uint32: (code, index + 1) per slot, (0, 0) empty
    pattern_table: chex.Array | None = None  # [T_K, 2] uint32

    @property
    def num_features(self) -> int:
        return int(self.weights.shape[-1])


# --- point states and codes ---------------------------------------------------------------------------------------


def point_states(board: jax.Array, liberties: jax.Array) -> jax.Array:
    """[P] board (+1 own, -1 opponent, 0 empty) and the liberties of the chain at each stone -> [P] int32 states:
    0 empty, 1..3 own with 1, 2, >= 3 liberties, 4..6 opponent likewise (off the board, 7, is the padding)."""
    bucket = jnp.clip(liberties, 1, 3)
    return jnp.where(board == 0, EMPTY, jnp.where(board > 0, bucket, 3 + bucket)).astype(jnp.int32)


def pattern_codes(states: jax.Array, n: int) -> jax.Array:
    """[P] point states -> [P] uint32: each point's 3x3 code, sum over k of state(neighbour k) * 8^k."""
    nbr = _shifted(states, n, OFF_BOARD, NEIGHBOURS).astype(jnp.uint32)  # [P, 8]
    return (nbr << (3 * jnp.arange(8, dtype=jnp.uint32))).sum(-1, dtype=jnp.uint32)


def _mix(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """Three uint32 -> one uint32 hash (murmur3's 32-bit finaliser after each part)."""

    def fmix(h):
        h = h ^ (h >> 16)
        h = h * jnp.uint32(0x85EBCA6B)
        h = h ^ (h >> 13)
        h = h * jnp.uint32(0xC2B2AE35)
        return h ^ (h >> 16)

    h = fmix(a.astype(jnp.uint32) + jnp.uint32(0x9E3779B9))
    h = fmix(h ^ b.astype(jnp.uint32))
    return fmix(h ^ c.astype(jnp.uint32))


@functools.cache
def _diamond_tables(n: int) -> dict[str, np.ndarray]:
    """Static tables: place [5, 5] (offset + 2 -> 0..11 in the diamond, -1 outside it or the centre), and
    neighbour_place [3, 3] (offset + 1 -> 0..7 in NEIGHBOURS, -1 for the centre)."""
    place = np.full((5, 5), -1, np.int32)
    for k, (dr, dc) in enumerate(DIAMOND):
        place[dr + 2, dc + 2] = k
    neighbour_place = np.full((3, 3), -1, np.int32)
    for k, (dr, dc) in enumerate(NEIGHBOURS):
        neighbour_place[dr + 1, dc + 1] = k
    return {"place": place, "neighbour_place": neighbour_place}


def diamond_code(around: jax.Array, c: jax.Array) -> jax.Array:
    """[..., 12] point states of a diamond (DIAMOND order) and a uint32 `c` -> [...] uint32: the states as 3-bit digits,
    points 0..5 in one word and 6..11 in another, hashed with `c` (`_mix`)."""
    around = around.astype(jnp.uint32)
    shifts = 3 * jnp.arange(6, dtype=jnp.uint32)
    a = (around[..., :6] << shifts).sum(-1, dtype=jnp.uint32)
    b = (around[..., 6:] << shifts).sum(-1, dtype=jnp.uint32)
    return _mix(a, b, c)


def encode_parts(
    board: jax.Array,
    turns_since: jax.Array,
    ko: jax.Array,
    n: int,
    label: jax.Array | None = None,
    lean: bool = False,
    chains: Chains | None = None,
) -> tuple[Encoded, dict[str, jax.Array], jax.Array]:
    """One position's raw features, with what they were computed from: features.py's move features (chains,
    liberties, the result of a move at each point) and the point states [P], for feature sets that extend p_π's.
    `label`: the chain labels when the caller carries them (a rollout's), else found here. `lean` (with `label`):
    only the move features p_π reads, liberties after a move capped at 2 (`lean_moves.move_features`, a rollout's; the
    same Encoded), not enough for p_τ's; `chains`: the chains' liberty counts, sums and sizes a rollout carries with its
    labels (lean_chains.py), else counted here."""
    p = n * n
    board = board.astype(jnp.int8)
    ko = ko.astype(jnp.int32)
    if lean:
        assert label is not None, "lean move features read the carried chain labels"
        moves = lean_move_features(board, ko, n, label, chains)
    else:
        moves = _move_features(board, ko, n, label)
    states = point_states(board, moves["liberties"])
    legal = moves["legal"]
    # save atari: a is the liberty of an own neighbour chain in atari, and the joined chain keeps >= 2 liberties
    colour = _shifted(board, n, 3)  # [P, 4]
    nbr_libs = _shifted(moves["liberties"], n, 0)
    in_atari = ((colour == 1) & (nbr_libs == 1)).any(-1)
    save_atari = legal & in_atari & (moves["liberties_after"] >= 2)
    # the previous move, and each point's offset from it
    last = turns_since == 1
    has_last = last.any() & (board[jnp.argmax(last)] == -1)
    prev = jnp.argmax(last)
    q = jnp.arange(p)
    dr, dc = q // n - prev // n, q % n - prev % n
    t = _diamond_tables(n)
    near = (jnp.abs(dr) <= 1) & (jnp.abs(dc) <= 1)
    # the previous move sits at offset (-dr, -dc) from the candidate
    neighbour = jnp.asarray(t["neighbour_place"])[jnp.clip(1 - dr, 0, 2), jnp.clip(1 - dc, 0, 2)]
    neighbour = jnp.where(has_last & near, neighbour, -1).astype(jnp.int8)
    place = jnp.asarray(t["place"])[jnp.clip(dr + 2, 0, 4), jnp.clip(dc + 2, 0, 4)]
    in_diamond = has_last & (jnp.abs(dr) + jnp.abs(dc) <= 2) & (place >= 0)
    # the diamond's states around the previous move, hashed with its liberty bucket and the point's place
    padded = jnp.pad(states.reshape(n, n), 2, constant_values=OFF_BOARD)
    pr, pc = prev // n + 2, prev % n + 2
    around = jnp.stack([padded[pr + r, pc + c] for r, c in DIAMOND])  # [12]
    centre = jnp.clip(moves["liberties"][prev], 1, 3).astype(jnp.uint32)
    c = centre | (jnp.maximum(place, 0).astype(jnp.uint32) << 2)  # [P]
    encoded = Encoded(
        legal=legal,
        save_atari=save_atari,
        neighbour=neighbour,
        in_diamond=in_diamond,
        response_code=diamond_code(around, c),
        pattern_code=pattern_codes(states, n),
    )
    return encoded, moves, states


def _encode_one(board: jax.Array, turns_since: jax.Array, ko: jax.Array, n: int) -> Encoded:
    return encode_parts(board, turns_since, ko, n)[0]


def batched(encode_one: Callable[[jax.Array, jax.Array, jax.Array, int], Any], position: Position) -> Any:
    """`encode_one(board [P], turns_since [P], ko [], n)` over the leading dims [...] of `position`."""
    n = position.size
    lead = position.board.shape[:-1]
    board = position.board.reshape(-1, n * n)
    turns = position.turns_since.reshape(-1, n * n)
    ko = jnp.asarray(position.ko).reshape(-1)
    out = jax.vmap(lambda b, t, k: encode_one(b, t, k, n))(board, turns, ko)
    return jax.tree.map(lambda x: x.reshape((*lead, *x.shape[1:])), out)


def encode(position: Position) -> Encoded:
    """The raw features of every point of `position` (leading dims [...]), before the vocabulary lookup."""
    return batched(_encode_one, position)


# --- vocabularies and logits --------------------------------------------------------------------------------------


def lookup(vocabulary: jax.Array, codes: jax.Array) -> jax.Array:
    """[V] sorted uint32 vocabulary, codes [...] -> [...] int32: each code's index in the vocabulary, -1 if absent."""
    if vocabulary.shape[0] == 0:
        return jnp.full(codes.shape, -1, jnp.int32)
    i = jnp.searchsorted(vocabulary, codes).astype(jnp.int32)
    i = jnp.minimum(i, vocabulary.shape[0] - 1)
    return jnp.where(vocabulary[i] == codes, i, -1)


# multiplicative hashing (Knuth's golden-ratio constant and a second odd one): slot = (code * A mod 2^32) >> (32 - b)
_HASH_MULTIPLIERS = (0x9E3779B1, 0x85EBCA77)
_MAX_KICKS = 500


def table_size(count: int) -> int:
    """The first table size `hash_table` tries for `count` codes: a power of two >= 4 * count, at least 16."""
    return max(16, 1 << int(np.ceil(np.log2(max(4 * count, 1)))))


def _slots(codes: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(codes, np.uint64)
    return tuple(((c * a) & 0xFFFFFFFF) >> (32 - bits) for a in _HASH_MULTIPLIERS)  # type: ignore[return-value]


def hash_table(vocabulary: np.ndarray) -> np.ndarray:
    """[V] distinct uint32 codes -> [T, 2] uint32 cuckoo table: the code and its index + 1 in one of its two slots
    (`_slots`), (0, 0) in an empty slot. Tries `table_size(V)` slots and doubles on the rare failed insertion."""
    vocabulary = np.asarray(vocabulary, np.uint32)
    bits = int(np.log2(table_size(len(vocabulary))))
    while True:
        table = _cuckoo(vocabulary, bits)
        if table is not None:
            return table
        bits += 1


def _cuckoo(vocabulary: np.ndarray, bits: int) -> np.ndarray | None:
    first, second = (s.astype(np.int64) for s in _slots(vocabulary, bits))
    table = np.zeros((1 << bits, 2), np.uint32)
    for i in range(len(vocabulary)):
        entry, slot = (int(vocabulary[i]), i + 1), int(first[i])
        for _ in range(_MAX_KICKS):
            if table[slot, 1] == 0:
                table[slot] = entry
                break
            evicted = (int(table[slot, 0]), int(table[slot, 1]))
            table[slot] = entry
            entry = evicted
            a, b = int(first[entry[1] - 1]), int(second[entry[1] - 1])
            slot = b if slot == a else a  # the evicted code moves to its other slot
        else:
            return None
    return table


def find(table: jax.Array, codes: jax.Array) -> jax.Array:
    """[T, 2] `hash_table`, codes [...] uint32 -> [...] int32: each code's vocabulary index, -1 if absent. A code is
    in one of its two slots or nowhere, so the larger of the two matches' index + 1 is the answer."""
    bits = table.shape[0].bit_length() - 1
    found = jnp.zeros(codes.shape, jnp.uint32)
    for a in _HASH_MULTIPLIERS:
        entry = table[(codes * jnp.uint32(a)) >> (32 - bits)]  # [..., 2]
        found = jnp.maximum(found, jnp.where(entry[..., 0] == codes, entry[..., 1], 0))
    return found.astype(jnp.int32) - 1


def device_table(vocabulary: jax.Array) -> jax.Array:
    """The `hash_table` of a vocabulary, built on the host (once: tens of ms for ~10^5 codes), as a device array."""
    return jnp.asarray(hash_table(np.asarray(vocabulary)))


def hashed(policy: RolloutPolicy) -> RolloutPolicy:
    """`policy` with the hash tables of its vocabularies."""
    return dataclasses.replace(
        policy,
        response_table=device_table(policy.response_vocabulary),
        pattern_table=device_table(policy.pattern_vocabulary),
    )


def find_or_lookup(vocabulary: jax.Array, table: jax.Array | None, codes: jax.Array) -> jax.Array:
    """Each code's index in the sorted `vocabulary` (-1: absent): by its hash `table`, or by binary search if None."""
    return lookup(vocabulary, codes) if table is None else find(table, codes)


def build_vocabulary(codes: np.ndarray, min_count: int = 1) -> np.ndarray:
    """[M] uint32 codes (the expert moves' patterns) -> the sorted distinct codes seen at least `min_count` times."""
    values, counts = np.unique(np.asarray(codes, np.uint32), return_counts=True)
    return values[counts >= min_count].astype(np.uint32)


@struct.dataclass
class Indices:
    """Each candidate point's active features, as indices into the weights (-1: off)."""

    legal: chex.Array  # [..., P] bool
    fixed: chex.Array  # [..., P, 3] int32: response, save atari, neighbour feature (or -1)
    response: chex.Array  # [..., P] int32: NUM_FIXED + response pattern index, or -1
    pattern: chex.Array  # [..., P] int32: NUM_FIXED + R + 3x3 pattern index, or -1


def indices(policy: RolloutPolicy, encoded: Encoded) -> Indices:
    r = policy.response_vocabulary.shape[0]
    response = find_or_lookup(policy.response_vocabulary, policy.response_table, encoded.response_code)
    response = jnp.where(encoded.in_diamond, response, -1)
    pattern = find_or_lookup(policy.pattern_vocabulary, policy.pattern_table, encoded.pattern_code)
    neighbour = encoded.neighbour.astype(jnp.int32)
    fixed = jnp.stack(
        [
            jnp.where(response >= 0, _RESPONSE, -1),
            jnp.where(encoded.save_atari, _SAVE_ATARI, -1),
            jnp.where(neighbour >= 0, _NEIGHBOUR + neighbour, -1),
        ],
        -1,
    )
    return Indices(
        legal=encoded.legal,
        fixed=fixed,
        response=jnp.where(response >= 0, NUM_FIXED + response, -1),
        pattern=jnp.where(pattern >= 0, NUM_FIXED + r + pattern, -1),
    )


def active(idx: Indices) -> jax.Array:
    """[..., P, 5] int32: each point's active features (response, save atari, neighbour, response pattern, 3x3
    pattern) as indices into the weights, -1 where off."""
    return jnp.concatenate([idx.fixed, idx.response[..., None], idx.pattern[..., None]], -1)


def feature_sum(weights: jax.Array, every: jax.Array, legal: jax.Array) -> jax.Array:
    """w · φ(s, a) from the active features' indices `every` [..., P, F] (-1: off), -inf where not `legal` [..., P]."""
    w = jnp.where(every >= 0, weights[jnp.maximum(every, 0)], 0.0).sum(-1)
    return jnp.where(legal, w, -jnp.inf)


def _scores(weights: jax.Array, idx: Indices) -> jax.Array:
    """w · φ(s, a) for every point, -inf where illegal."""
    return feature_sum(weights, active(idx), idx.legal)


def _init(encoded: Encoded, actions: np.ndarray, min_count: int) -> tuple[RolloutPolicy, dict[str, int]]:
    """p_π with the vocabularies of the expert moves `actions` [M] in `encoded` (numpy [M, P]) and zero weights, and
    the vocabulary sizes for the training report."""
    response_vocab, pattern_vocab = vocabularies(encoded, actions, min_count)
    policy = RolloutPolicy(
        response_vocabulary=jnp.asarray(response_vocab),
        pattern_vocabulary=jnp.asarray(pattern_vocab),
        weights=jnp.zeros(NUM_FIXED + len(response_vocab) + len(pattern_vocab), jnp.float32),
    )
    return hashed(policy), {"response_patterns": len(response_vocab), "non_response_patterns": len(pattern_vocab)}


# --- files ----------------------------------------------------------------------------------------------------------


class RolloutPolicyError(Exception):
    """A rollout-policy file that is missing, damaged or not one (one-line message)."""


def save_arrays(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """Writes `arrays` to an .npz at `path` atomically (a temporary file renamed over it); never a pickle."""
    with files.replaced_whole_bytes(os.fspath(path)) as f:
        np.savez(f, allow_pickle=False, **arrays)


def save(path: str | os.PathLike, policy: RolloutPolicy, report: dict | None = None) -> None:
    """Writes the policy (and the training report, as JSON text) to an .npz, atomically; never a pickle."""
    save_arrays(
        path,
        {
            "response_vocabulary": np.asarray(policy.response_vocabulary),
            "pattern_vocabulary": np.asarray(policy.pattern_vocabulary),
            "weights": np.asarray(policy.weights),
            "report": np.asarray(json.dumps(report or {}, default=str)),
        },
    )


def load(path: str | os.PathLike) -> RolloutPolicy:
    try:
        with np.load(path, allow_pickle=False) as f:
            # a p_π file has no `kind`; other pattern policies (tree_policy.py's p_τ) name theirs
            if "kind" in f.files:
                raise RolloutPolicyError(f"{path} is a {f['kind']} file, not a rollout policy (p_pi) file")
            policy = RolloutPolicy(
                response_vocabulary=jnp.asarray(f["response_vocabulary"]),
                pattern_vocabulary=jnp.asarray(f["pattern_vocabulary"]),
                weights=jnp.asarray(f["weights"]),
            )
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise RolloutPolicyError(f"{path} is not a rollout policy file ({type(e).__name__}: {e})") from None
    expected = NUM_FIXED + policy.response_vocabulary.shape[0] + policy.pattern_vocabulary.shape[0]
    if policy.weights.shape != (expected,):
        raise RolloutPolicyError(f"{path}: {policy.weights.shape[0]} weights for {expected} features")
    return hashed(policy)


class PatternPolicy(Protocol):
    """What the shared functions below read of a policy (RolloutPolicy, tree_policy.TreePolicy): its weights; the
    rest (vocabularies) only its family's `indices` reads."""

    @property
    def weights(self) -> jax.Array: ...


@dataclasses.dataclass(frozen=True)
class Family:
    """A linear softmax policy over binary pattern features, as far as `logits`, `select`, `train`, `accuracy` and
    `time_per_move` need it: p_π (`ROLLOUT`) here, the tree policy p_τ in tree_policy.py. The policy is a
    struct.dataclass with a `weights` leaf; hashable, so a static argument of jitted functions."""

    encode: Callable[[Position], Any]  # positions [...] -> raw features [..., P] (no vocabulary)
    init: Callable[[Any, np.ndarray, int], tuple[Any, dict[str, int]]]  # (encoded, actions, min_count) -> policy
    indices: Callable[[Any, Any], Any]  # (policy, encoded) -> active features as weight indices
    scores: Callable[[jax.Array, Any], jax.Array]  # (weights, indices) -> [..., P], -inf where illegal
    save: Callable[..., None]  # (path, policy, report=None): the family's .npz file, atomically
    load: Callable[[str | os.PathLike], Any]  # path -> policy; the family's one-line error if it is not one


ROLLOUT = Family(encode=encode, init=_init, indices=indices, scores=_scores, save=save, load=load)


def logits(policy: PatternPolicy, position: Position, family: Family = ROLLOUT) -> jax.Array:
    """[..., N*N] float32: w · φ(s, a) for every point a of `position`, -inf on illegal points. A position with no
    legal point has all -inf (pass)."""
    return family.scores(policy.weights, family.indices(policy, family.encode(position)))


def sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    """[...] int32: one index of the last axis of `logits` [..., A] drawn from their softmax by the inverse CDF: one
    uniform number per row, where `jax.random.categorical` draws a Gumbel number per entry (measured with
    experiments/alphago/rollout_profile.py, the rollout's sample). Entries at -inf are never drawn; a row that is
    all -inf gives an index to be ignored."""
    top = logits.max(-1, keepdims=True)
    weights = jnp.exp(logits - jnp.where(jnp.isfinite(top), top, 0.0))  # the largest 1, -inf entries 0
    cdf = jnp.cumsum(weights, -1)
    # u in (0, total]: the first index whose cdf reaches u has cdf[k] >= u > cdf[k - 1], so a positive weight
    u = (1.0 - jax.random.uniform(key, cdf.shape[:-1] + (1,))) * cdf[..., -1:]
    return jnp.minimum((cdf < u).sum(-1), logits.shape[-1] - 1).astype(jnp.int32)


def select(
    policy: PatternPolicy, position: Position, key: jax.Array, greedy: bool = False, family: Family = ROLLOUT
) -> jax.Array:
    """[...] int32: a move sampled from p_π (or its argmax), N*N (pass) when no point is legal."""
    scores = logits(policy, position, family)
    p = scores.shape[-1]
    move = jnp.argmax(scores, -1) if greedy else jax.random.categorical(key, scores, -1)
    return jnp.where(jnp.isfinite(scores).any(-1), move, p).astype(jnp.int32)


# --- training -----------------------------------------------------------------------------------------------------


@functools.cache
def _jitted(fn: Callable) -> Callable:
    return jax.jit(fn)


def encode_all(positions: Position, chunk: int = 256, family: Family = ROLLOUT) -> Any:
    """`family.encode` over M positions (numpy leaves) in chunks of `chunk`; numpy leaves [M, P]. The last chunk is
    padded to `chunk` so that only one program is compiled."""
    m = positions.board.shape[0]
    parts = []
    for start in range(0, m, chunk):
        part = jax.tree.map(lambda x, s=start: np.asarray(x[s : s + chunk]), positions)
        k = part.board.shape[0]
        if k < chunk:
            part = jax.tree.map(lambda x, k=k: np.concatenate([x, np.repeat(x[-1:], chunk - k, 0)]), part)
        parts.append(jax.tree.map(lambda x, k=k: np.asarray(x)[:k], jax.device_get(_jitted(family.encode)(part))))
    return jax.tree.map(lambda *xs: np.concatenate(xs), *parts)


def vocabularies(encoded: Encoded, actions: np.ndarray, min_count: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(response, non-response) vocabularies of the expert moves `actions` [M] in `encoded` (numpy [M, P])."""
    rows = np.arange(actions.shape[0])
    in_diamond = np.asarray(encoded.in_diamond)[rows, actions]
    response = build_vocabulary(np.asarray(encoded.response_code)[rows, actions][in_diamond], min_count)
    pattern = build_vocabulary(np.asarray(encoded.pattern_code)[rows, actions], min_count)
    return response, pattern


@functools.partial(jax.jit, static_argnames="family")
def _correct(policy, encoded, actions, family=ROLLOUT):
    return (jnp.argmax(family.scores(policy.weights, family.indices(policy, encoded)), -1) == actions).sum()


def accuracy(
    policy: PatternPolicy, encoded: Any, actions: np.ndarray, chunk: int = 1024, family: Family = ROLLOUT
) -> float:
    """Share of positions where the argmax of the policy is the expert's move (encoded: numpy [M, P])."""
    m = actions.shape[0]
    correct = 0
    for start in range(0, m, chunk):
        part = jax.tree.map(lambda x, s=start: x[s : s + chunk], encoded)
        correct += int(_correct(policy, part, actions[start : start + chunk], family))
    return correct / max(m, 1)


# --- speed --------------------------------------------------------------------------------------------------------


def time_per_move(
    policy: PatternPolicy, positions: Position, batch_size: int, repeats: int = 20, family: Family = ROLLOUT
) -> dict[str, Any]:
    """Seconds per move selection (features, logits and a sample) for `batch_size` positions at once (the first
    `batch_size` of `positions`, numpy leaves [M, P]), jitted, after a warm-up: the batch's time and µs per position
    (batch time / batch size), to set beside the paper's 2 µs per move on one CPU thread."""
    batch = jax.tree.map(lambda x: jnp.asarray(x[:batch_size]), positions)
    fn = jax.jit(functools.partial(select, family=family))
    key = jax.random.key(0)
    # the keys sliced before the timer: indexing a key array dispatches (and first compiles) a slice per key
    keys = jax.block_until_ready(list(jax.random.split(key, repeats + 1)))
    jax.block_until_ready(fn(policy, batch, keys[0]))
    start = time.perf_counter()
    for k in keys[1:]:
        out = fn(policy, batch, k)
    jax.block_until_ready(out)
    seconds = (time.perf_counter() - start) / repeats
    b = int(batch.board.shape[0])
    return {"batch_size": b, "seconds_per_batch": seconds, "us_per_position": 1e6 * seconds / b}
