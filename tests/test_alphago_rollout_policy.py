"""AlphaGo's fast rollout policy p_π (az_jax/alphago/rollout_policy.py; Silver et al., Nature 2016, Methods "Rollout
policy", Extended Data Table 4) on hand-made 7x7 positions whose pattern codes and features are worked out in the
comments (the training: test_alphago_pattern_training.py).

Boards are drawn with X = the player to move, O = the opponent, rows top to bottom (row r, column c is point
r * 7 + c); `*` is an O stone that is the previous move (turns_since 1). Point states: 0 empty, 1/2/3 own stone
with 1/2/>=3 liberties, 4/5/6 opponent likewise, 7 off the board. Cost: one compile of `encode` for the batch of
hand-made positions (a module-scoped fixture).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

from az_jax.alphago import rollout_policy as R
from az_jax.alphago.features import _chain_labels, _move_features
from az_jax.alphago.lean_moves import move_features as _lean_move_features
from az_jax.alphago.position import Position, from_pgx
from experiments.alphago.rollout_speed import midgame

N = 7
P = N * N


def pt(r: int, c: int) -> int:
    return r * N + c


def parse(drawing: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [line.split()[0] for line in drawing.strip().splitlines()]
    assert len(rows) == N and all(len(r) == N for r in rows)
    chars = np.array([list(r) for r in rows]).reshape(-1)
    board = np.select([chars == "X", (chars == "O") | (chars == "*")], [1, -1], 0).astype(np.int8)
    turns = np.where(board != 0, 5, 0).astype(np.int8)
    turns[chars == "*"] = 1
    return board, turns


BOARDS = {
    # (1,0): neighbours in NEIGHBOURS order (-1,-1) off 7, (-1,0) X (0,0) with 1 liberty (1,0) -> 1, (-1,1) O (0,1)
    # with liberties (0,2), (1,1) -> 5, (0,-1) off 7, (0,1) empty 0, (1,-1) off 7, (1,0) 0, (1,1) 0:
    # code 7 + 1*8 + 5*64 + 7*8^3 + 7*8^5 = 7 + 8 + 320 + 3584 + 229376 = 233295.
    # (2,3): (2,4) X chain (2,4)-(2,5) with liberties (1,4),(1,5),(3,4),(3,5),(2,3),(2,6) -> 3 at k=4; (3,3) O with
    # 4 liberties -> 6 at k=6; the rest empty: code 3*8^4 + 6*8^6 = 12288 + 1572864 = 1585152.
    "patterns": """
        XO.....
        .......
        ....XX.
        ...O...
        .......
        .......
        .......
    """,
    # the previous move in the middle, alone (4 liberties -> centre bucket 3); everything else empty
    "centre": """
        .......
        .......
        .......
        ...*...
        .......
        .......
        .......
    """,
    # the previous move on the top edge at (0,3): liberties (0,2), (0,4), (1,3) -> bucket 3
    "edge": """
        ...*...
        .......
        .......
        .......
        .......
        .......
        .......
    """,
    # X (2,2) in atari (liberty (3,2)); extending there gives liberties (3,1), (3,3), (4,2) -> 3: save atari.
    # X (0,0) in atari (liberty (1,0)); extending there leaves only (2,0) ((1,1) is O) -> 1: no save.
    "save_atari": """
        XO.....
        .OO....
        .OXO...
        .......
        .......
        .......
        ......X
    """,
    # (0,0) has no empty neighbour; X (1,0)-(1,1)-(1,2) is in atari there, and so is O (0,1)-(0,2) (its other
    # neighbours (1,1), (1,2), (0,3) are X). X at (0,0) captures both O stones, which both touch the joined chain
    # ((0,1) next to (0,0), (0,2) next to (1,2)): 2 liberties, save atari. X (0,3) is in atari too (liberty (0,4)):
    # extending to (0,4) gives (0,5), (1,4): save atari.
    "save_by_capture": """
        .OOX...
        XXXO...
        OOO....
        .......
        .......
        .......
        .......
    """,
    # (2,0): X (3,0) in atari there; O (0,0)-(1,0) too (its other neighbours (0,1), (1,1) are X, a chain with 2
    # liberties); O (2,1) is not (it joins (3,1), (4,1), (4,0): 5 more). X at (2,0) captures (0,0)-(1,0), but only
    # (1,0) touches the joined chain (2,0)-(3,0) ((0,0) touches (0,1), another chain): 1 liberty, legal, no save.
    "capture_no_save": """
        OX.....
        OX.....
        .O.....
        XO.....
        OO.....
        .......
        .......
    """,
    # centre, with an X stone at (3,5): Manhattan distance 2 from the previous move, inside the diamond
    "centre_near": """
        .......
        .......
        .......
        ...*.X.
        .......
        .......
        .......
    """,
    # centre, with an X stone at (3,6): distance 3, outside the diamond
    "centre_far": """
        .......
        .......
        .......
        ...*..X
        .......
        .......
        .......
    """,
}
NAMES = list(BOARDS)


@pytest.fixture(scope="module")
def encoded():
    boards, turns = zip(*(parse(d) for d in BOARDS.values()))
    position = Position(
        board=jnp.asarray(np.stack(boards)),
        turns_since=jnp.asarray(np.stack(turns)),
        ko=jnp.full(len(BOARDS), -1, jnp.int32),
        black_to_move=jnp.ones(len(BOARDS), bool),
    )
    out = jax.device_get(jax.jit(R.encode)(position))
    return {name: jax.tree.map(lambda x, i=i: np.asarray(x[i]), out) for i, name in enumerate(NAMES)}


def test_3x3_pattern_codes_by_hand(encoded):
    codes = encoded["patterns"].pattern_code
    assert codes[pt(1, 0)] == 233295
    assert codes[pt(2, 3)] == 1585152
    # (6,6) on an empty corner: off-board neighbours k = 2 ((-1,1)), 4 ((0,1)), 5, 6, 7 -> 7 * (8^2 + 8^4 + 8^5 +
    # 8^6 + 8^7) = 7 * (64 + 4096 + 32768 + 262144 + 2097152) = 7 * 2396224 = 16773568
    assert codes[pt(6, 6)] == 16773568


def test_neighbour_feature_on_exactly_the_8_points_around_the_previous_move(encoded):
    nbr = encoded["centre"].neighbour.reshape(N, N)
    expected = np.full((N, N), -1)
    # the previous move (3,3) seen from (3+dr, 3+dc) sits at offset (-dr, -dc): its index in NEIGHBOURS
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            if (dr, dc) != (0, 0):
                expected[3 + dr, 3 + dc] = R.NEIGHBOURS.index((-dr, -dc))
    np.testing.assert_array_equal(nbr, expected)
    assert nbr[2, 3] == 6  # the point above the previous move: the previous move is below it, (1, 0) = index 6
    # on the edge only the 5 on-board points around (0,3) fire; no previous move: none
    assert set(np.flatnonzero(encoded["edge"].neighbour >= 0)) == {pt(0, 2), pt(0, 4), pt(1, 2), pt(1, 3), pt(1, 4)}
    assert (encoded["patterns"].neighbour == -1).all()


def test_save_atari_only_on_the_extension_that_gains_liberties(encoded):
    e = encoded["save_atari"]
    assert list(np.flatnonzero(e.save_atari)) == [pt(3, 2)]
    assert e.legal[pt(1, 0)]  # the self-atari extension is legal, just not a save


def test_save_atari_counts_the_captured_stones_that_touch_the_joined_chain(encoded):
    assert list(np.flatnonzero(encoded["save_by_capture"].save_atari)) == [pt(0, 0), pt(0, 4)]
    e = encoded["capture_no_save"]
    assert e.legal[pt(2, 0)] and not e.save_atari.any()
    # the bitset count of features.py gives the same liberties after the move: 2 at (0,0), 1 at (2,0)
    move_features = jax.jit(lambda b: _move_features(b, jnp.int32(-1), N))  # one compile for both boards
    # and so does a rollout's count without bitsets, where both moves are the rare case it settles against the whole
    # board: no empty neighbour, the own chain in atari, one neighbour in the captured chain of 2 ((0,1) / (1,1)),
    # whose other stone touches the joined chain ((0,2) touches (1,2)) or does not ((0,0) touches only (0,1))
    lean = jax.jit(lambda b: _lean_move_features(b, jnp.int32(-1), N, _chain_labels(b, N)))
    for name, point, after in (("save_by_capture", pt(0, 0), 2), ("capture_no_save", pt(2, 0), 1)):
        board = jnp.asarray(parse(BOARDS[name])[0])
        assert int(move_features(board)["liberties_after"][point]) == after
        assert int(lean(board)["liberties_after"][point]) == after


def test_response_diamond_covers_exactly_manhattan_1_and_2(encoded):
    r, c = np.divmod(np.arange(P), N)
    distance = np.abs(r - 3) + np.abs(c - 3)
    np.testing.assert_array_equal(encoded["centre"].in_diamond, (distance >= 1) & (distance <= 2))
    assert encoded["centre"].in_diamond.sum() == 12
    assert not encoded["patterns"].in_diamond.any()  # no previous move


def test_response_codes_by_hand(encoded):
    mix = jax.jit(R._mix)
    # centre: all 12 diamond points empty (a = b = 0), the previous move's 4 liberties -> bucket 3; at the point with
    # place k, c = 3 | k << 2
    for k, (dr, dc) in enumerate(R.DIAMOND):
        assert encoded["centre"].response_code[pt(3 + dr, 3 + dc)] == mix(
            np.uint32(0), np.uint32(0), np.uint32(3 | k << 2)
        )
    # edge, previous move (0,3): off the board are places 0 (-1,0), 4 (-2,0), 5 (-1,-1) and 6 (-1,1) ->
    # a = 7*8^0 + 7*8^4 + 7*8^5 = 7 + 28672 + 229376 = 258055 (places 0..5), b = 7*8^0 = 7 (places 6..11); (1,3)
    # is place 3 (offset (1,0))
    assert R.DIAMOND[3] == (1, 0)
    assert encoded["edge"].response_code[pt(1, 3)] == mix(np.uint32(258055), np.uint32(7), np.uint32(3 | 3 << 2))
    # a stone at distance 2 changes every response code; one at distance 3 changes none
    inside = encoded["centre"].in_diamond
    assert (encoded["centre_near"].response_code[inside] != encoded["centre"].response_code[inside]).all()
    np.testing.assert_array_equal(encoded["centre_far"].response_code[inside], encoded["centre"].response_code[inside])


def test_vocabulary_and_lookup():
    # counts: 5 twice, 7 once, 9 three times -> min_count 2 keeps 5 and 9
    np.testing.assert_array_equal(R.build_vocabulary(np.array([9, 5, 7, 9, 5, 9], np.uint32), 2), [5, 9])
    vocab = jnp.asarray(np.array([3, 10, 42], np.uint32))
    got = R.lookup(vocab, jnp.asarray(np.array([10, 11, 0, 42, 100, 3], np.uint32)))
    np.testing.assert_array_equal(got, [1, -1, -1, 2, -1, 0])  # unseen codes: no feature


def test_hash_table_finds_every_code_and_only_those():
    find = jax.jit(R.find)
    # the binary search's example: 3 codes -> a table of 16 slots (the power of two >= 4 * 3)
    table = R.hash_table(np.array([3, 10, 42], np.uint32))
    assert table.shape == (16, 2) and (table[:, 1] > 0).sum() == 3
    codes = jnp.asarray(np.array([10, 11, 0, 42, 100, 3], np.uint32))
    np.testing.assert_array_equal(find(jnp.asarray(table), codes), [1, -1, -1, 2, -1, 0])
    # code 0 is a code like any other: found when in the vocabulary, and an empty slot (0, 0) never matches it
    assert int(find(jnp.asarray(R.hash_table(np.array([0, 5], np.uint32))), jnp.uint32(0))) == 0
    assert int(find(jnp.asarray(R.hash_table(np.array([5], np.uint32))), jnp.uint32(0))) == -1
    # three codes with the same first slot among 16 (slot = code * 0x9E3779B1 mod 2^32, top 4 bits): at most one
    # sits there, the others are moved to their second slots by the insertion
    small = np.arange(1, 4096, dtype=np.uint32)
    first = ((small.astype(np.uint64) * 0x9E3779B1) & 0xFFFFFFFF) >> 28
    same = small[first == first[0]][:3]
    assert len(same) == 3
    table = R.hash_table(same)
    np.testing.assert_array_equal(find(jnp.asarray(table), jnp.asarray(same)), [0, 1, 2])
    # 20,000 random codes with the extremes: the same indices as the binary search, for them and 20,000 others
    rng = np.random.default_rng(0)
    vocab = np.unique(np.concatenate([rng.integers(0, 2**32, 20_000, dtype=np.uint64), [0, 2**32 - 1]]))
    vocab = vocab.astype(np.uint32)
    table = R.hash_table(vocab)
    assert table.shape[0] >= 4 * len(vocab) and (table[:, 1] > 0).sum() == len(vocab)
    others = rng.integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32)
    queries = np.concatenate([rng.permutation(vocab), others])
    expected = np.asarray(R.lookup(jnp.asarray(vocab), jnp.asarray(queries)))
    assert (expected[: len(vocab)] >= 0).all()
    np.testing.assert_array_equal(find(jnp.asarray(table), jnp.asarray(queries)), expected)


def test_logits_use_only_known_patterns_and_mask_illegal_points(encoded):
    e = encoded["patterns"]
    # a vocabulary with (1,0)'s 3x3 code only, weight 2.0; every other point's pattern is unseen: logit 0
    policy = R.RolloutPolicy(
        response_vocabulary=jnp.zeros(0, jnp.uint32),
        pattern_vocabulary=jnp.asarray(np.array([233295], np.uint32)),
        weights=jnp.concatenate([jnp.zeros(R.NUM_FIXED), jnp.array([2.0])]),
    )
    boards, turns = parse(BOARDS["patterns"])
    position = Position(jnp.asarray(boards), jnp.asarray(turns), jnp.int32(pt(5, 5)), jnp.bool_(True))
    scores = np.asarray(jax.jit(R.logits)(policy, position))
    assert scores[pt(1, 0)] == 2.0
    occupied = boards != 0
    assert np.isneginf(scores[occupied]).all() and np.isneginf(scores[pt(5, 5)])  # stones and the ko point
    free = ~occupied & (np.arange(P) != pt(1, 0)) & (np.arange(P) != pt(5, 5))
    assert (scores[free] == 0.0).all()
    idx = jax.jit(R.indices)(policy, jax.tree.map(jnp.asarray, e))
    assert (np.asarray(idx.pattern) >= 0).sum() == 1
    # the same scores through the hash tables (what a loaded or trained policy looks its patterns up with)
    np.testing.assert_array_equal(jax.jit(R.logits)(R.hashed(policy), position), scores)


def test_lean_move_features_match_the_bitsets_on_random_games():
    # 32 9x9 games of uniformly random legal moves, after 40, 80 and 120 plies: on every empty point the rollout's
    # move features without bitsets equal features.py's (liberties after a move capped at 2, as p_π reads them)
    n = 9
    full = jax.jit(jax.vmap(lambda b, k: _move_features(b, k, n)))
    lean = jax.jit(jax.vmap(lambda b, k, label: _lean_move_features(b, k, n, label)))
    checked = 0
    for plies in (40, 80, 120):
        position = from_pgx(midgame(pgx.make("go_9x9"), 32, plies, seed=plies))
        board, ko = position.board.astype(jnp.int8), jnp.asarray(position.ko, jnp.int32)
        want = jax.device_get(full(board, ko))
        got = jax.device_get(lean(board, ko, jnp.asarray(want["label"])))
        empty = np.asarray(board) == 0
        for key in ("liberties", "legal", "own_eye"):
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
        np.testing.assert_array_equal(got["liberties_after"][empty], np.minimum(want["liberties_after"], 2)[empty])
        checked += int(empty.sum())
    assert checked > 32 * 3 * 20  # at least 20 empty points a position


def test_sample_draws_the_softmax_and_never_a_masked_point():
    # logits log 1, -inf, log 3, log 4: probabilities 1/8, 0, 3/8, 4/8 (the -inf entry has weight 0, total 1 + 3 + 4)
    logits = jnp.log(jnp.array([1.0, 0.0, 3.0, 4.0]))
    draws = np.asarray(jax.vmap(R.sample, (0, None))(jax.random.split(jax.random.key(0), 20_000), logits))
    share = np.bincount(draws, minlength=4) / draws.size
    assert share[1] == 0.0
    # one standard error of a share p over 20,000 draws is at most sqrt(0.25 / 20,000) = 0.0035: 0.015 is > 4 of them
    np.testing.assert_allclose(share, [1 / 8, 0.0, 3 / 8, 4 / 8], atol=0.015)
    # one finite entry among -inf: always that one; logits far from 0 (1e4) do not overflow
    only = jnp.array([[-jnp.inf, 1e4, -jnp.inf], [-1e4, -jnp.inf, -jnp.inf]])
    assert R.sample(jax.random.key(1), only).tolist() == [1, 0]
    # a row of -inf only (no sensible point: the caller passes) still gives an index inside the row
    assert 0 <= int(R.sample(jax.random.key(2), jnp.full((5,), -jnp.inf))) < 5
