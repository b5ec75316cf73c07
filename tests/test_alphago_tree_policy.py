"""AlphaGo's tree policy p_τ (az_jax/alphago/tree_policy.py; Silver et al., Nature 2016, Extended Data Table 4): its
three features beyond p_π's worked out by hand on 9x9 positions, a training run on a synthetic task that only those
features can solve, its files (and p_π's) refusing each other, and the `az-jax alphago tree` stage.

Boards are drawn with X = the player to move, O = the opponent, rows top to bottom (row r, column c is point r * 9 + c);
`*` is an O stone that is the previous move (turns_since 1), `+` an X stone that is the move before it (turns_since 2).
Point states (rollout_policy.point_states): 0 empty, 1/2/3 own stone with 1/2/>=3 liberties, 4/5/6 opponent likewise,
7 off the board. Cost: one compile of `encode` at the training chunk (256 positions), shared by the hand-made boards
(padded to it), the training run and the CLI; one SGD step; `select` at batch 1 and 256 in the CLI run.
"""

import contextlib
import io
import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az_jax.alphago import dataset, pattern_training
from az_jax.alphago import rollout_policy as R
from az_jax.alphago import tree_policy as T
from az_jax.alphago.dataset import Positions
from az_jax.alphago.position import Position
from az_jax.apps import cli

N = 9
P = N * N


def pt(r: int, c: int) -> int:
    return r * N + c


def parse(drawing: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [line.split()[0] for line in drawing.strip().splitlines()]
    assert len(rows) == N and all(len(r) == N for r in rows)
    chars = np.array([list(r) for r in rows]).reshape(-1)
    board = np.select([(chars == "X") | (chars == "+"), (chars == "O") | (chars == "*")], [1, -1], 0).astype(np.int8)
    turns = np.where(board != 0, 5, 0).astype(np.int8)
    turns[chars == "*"] = 1
    turns[chars == "+"] = 2
    return board, turns


BOARDS = {
    # Self-atari (legal, no capture, the new stone's chain left with 1 liberty):
    #   (0,0): next to O (1,0) (liberties (1,1), (2,0): not captured); its only liberty would be (0,1) -> self-atari.
    #   (8,0): joins X (7,0) (O at (6,0), (7,1)); the chain {(7,0), (8,0)} keeps only (8,1) -> self-atari.
    #   (4,4): takes the ko. O (4,3) has its last liberty there (X at (3,3), (4,2), (5,3)); after the capture the new
    #   stone's only liberty is (4,3) ((3,4), (4,5), (5,4) are O chains with 2, 3, 2 liberties): one liberty, but a
    #   capture -> not self-atari.
    #   Every other empty point keeps >= 2 liberties, e.g. (8,8): (7,8), (8,7); (3,5): (2,5), (3,6).
    "self_atari": """
        .........
        O........
        .........
        ...XO....
        ..XO.O...
        ...XO....
        O........
        XO.......
        .........
    """,
    # previous move * at (2,3), the move before + at (6,6)
    "distance": """
        .........
        .........
        ...*.....
        .........
        .........
        .........
        ......+..
        .........
        .........
    """,
    # the previous move was a pass: + at (6,6) was played 2 turns ago, no stone has turns_since 1
    "after_pass": """
        .........
        .........
        .........
        .........
        .........
        .........
        ......+..
        .........
        .........
    """,
    "empty": "\n".join(["........."] * N),
    # The diamonds around (2,2) and (6,6) are alike: O 1 above (4 liberties: state 6), X 2 to the right (4 and 3
    # liberties, both >= 3: state 3), the other 10 points empty and on the board.
    "twins": """
        .........
        ..O......
        ....X....
        .........
        .........
        ......O..
        ........X
        .........
        .........
    """,
    # twins plus O (3,4): Manhattan distance 1 + 2 = 3 from (2,2), outside its diamond; X (2,4) drops to 3 liberties,
    # still state 3. Plus O (8,6), distance 2 below (6,6): inside its diamond.
    "twins_changed": """
        .........
        ..O......
        ....X....
        ....O....
        .........
        ......O..
        ........X
        .........
        ......O..
    """,
}
NAMES = list(BOARDS)


@pytest.fixture(scope="module")
def encoded():
    boards, turns = zip(*(parse(d) for d in BOARDS.values()))
    m = len(BOARDS)
    position = Position(np.stack(boards), np.stack(turns), np.full(m, -1, np.int32), np.ones(m, bool))
    out = T.encode_all(position)  # padded to the 256 positions of a training chunk: the training run's program
    return {name: jax.tree.map(lambda x, i=i: np.asarray(x[i]), out) for i, name in enumerate(NAMES)}


def test_self_atari_by_hand(encoded):
    e = encoded["self_atari"]
    assert set(np.flatnonzero(e.self_atari)) == {pt(0, 0), pt(8, 0)}
    assert e.rollout.legal[pt(4, 4)] and not e.self_atari[pt(4, 4)]  # the ko capture
    assert e.rollout.legal[pt(8, 8)] and not e.self_atari[pt(8, 8)]
    assert not encoded["empty"].self_atari.any()


def test_last_move_distances_by_hand(encoded):
    d = encoded["distance"].distance  # [P, 2]: feature = distance - 1 (distance >= 17: 16), -1 none
    # (4,4): to * (2,3) |4-2| + |4-3| = 3 -> feature 2; to + (6,6) 2 + 2 = 4 -> feature 3
    assert list(d[pt(4, 4)]) == [2, 3]
    # (8,8): to (2,3) 6 + 5 = 11 -> 10; to (6,6) 2 + 2 = 4 -> 3
    assert list(d[pt(8, 8)]) == [10, 3]
    # (0,0): to (2,3) 2 + 3 = 5 -> 4; to (6,6) 6 + 6 = 12 -> 11
    assert list(d[pt(0, 0)]) == [4, 11]
    # (2,4), next to the previous move: 1 -> 0
    assert d[pt(2, 4), 0] == 0
    # after a pass: no previous move anywhere, the move before it still counted; at the start: neither
    after = encoded["after_pass"].distance
    assert (after[:, 0] == -1).all() and after[pt(4, 4), 1] == 3
    assert (encoded["empty"].distance == -1).all()


def test_distances_of_17_and_more_share_the_last_feature():
    n = 19
    board = jnp.zeros(n * n, jnp.int8).at[0].set(-1)  # the previous move at (0,0)
    turns = jnp.zeros(n * n, jnp.int8).at[0].set(1)
    d = np.asarray(jax.jit(T.distance_feature, static_argnums=(2, 3, 4))(board, turns, 1, -1, n))
    # (8,8): 16 -> 15; (9,8): 17 -> 16; (18,18): 36 -> 16; (0,1): 1 -> 0
    assert [d[8 * n + 8], d[9 * n + 8], d[18 * n + 18], d[1]] == [15, 16, 16, 0]


def test_diamond_codes_by_hand(encoded):
    mix = jax.jit(R._mix)
    empty = encoded["empty"].diamond_code
    # the middle of an empty board: all 12 states 0 -> mix(0, 0, 0), the same at every point 2 from the edge
    assert empty[pt(4, 4)] == empty[pt(2, 6)] == mix(np.uint32(0), np.uint32(0), np.uint32(0))
    # the corner (0,0): off the board (state 7) are DIAMOND places 0 (-1,0), 1 (0,-1), 4 (-2,0), 5 (-1,-1) in the
    # first word, 6 (-1,1), 7 (0,-2), 9 (1,-1) in the second (place k: digit 8^(k mod 6)):
    # a = 7 * (1 + 8 + 8^4 + 8^5) = 7 * 36873 = 258111, b = 7 * (1 + 8 + 8^3) = 7 * 521 = 3647
    assert [R.DIAMOND[k] for k in (0, 1, 4, 5, 6, 7, 9)] == [
        (-1, 0),
        (0, -1),
        (-2, 0),
        (-1, -1),
        (-1, 1),
        (0, -2),
        (1, -1),
    ]
    assert empty[pt(0, 0)] == mix(np.uint32(258111), np.uint32(3647), np.uint32(0))
    twins, changed = encoded["twins"].diamond_code, encoded["twins_changed"].diamond_code
    assert twins[pt(2, 2)] == twins[pt(6, 6)] != empty[pt(4, 4)]  # the same neighbourhood in two places
    assert changed[pt(2, 2)] == twins[pt(2, 2)]  # a stone at distance 3 and a liberty lost within a bucket: no change
    assert changed[pt(6, 6)] != twins[pt(6, 6)]  # one point of the diamond changed


def synthetic(count: int, seed: int, first_game: int = 0) -> Positions:
    """Random sparse 9x9 positions with the previous move (O) 4 points from the move before it (X) in a straight
    line; the expert plays next to that X stone, towards the previous move: the only point at distance 1 from the
    move before and 3 from the previous move (the other three neighbours are at 5). p_π sees no turns and no distance
    beyond 2, so only p_τ's distance features single it out (p_π trained alike: 5.9% held out)."""
    rng = np.random.default_rng(seed)
    boards: list[np.ndarray] = []
    turns: list[np.ndarray] = []
    actions: list[int] = []
    while len(actions) < count:
        board = np.zeros(P, np.int8)
        stones = rng.choice(P, 10, replace=False)
        board[stones[:5]], board[stones[5:]] = 1, -1
        t = np.where(board != 0, rng.integers(3, 9, P), 0).astype(np.int8)
        r, c = rng.integers(0, N, 2)
        dr, dc = [(-1, 0), (1, 0), (0, -1), (0, 1)][rng.integers(4)]
        if not (0 <= r + 4 * dr < N and 0 <= c + 4 * dc < N):
            continue
        before, previous, target = pt(r, c), pt(r + 4 * dr, c + 4 * dc), pt(r + dr, c + dc)
        if board[target] != 0 or board[before] != 0 or board[previous] != 0:
            continue
        board[before], board[previous] = 1, -1
        t[before], t[previous] = 2, 1
        boards.append(board)
        turns.append(t)
        actions.append(target)
    m = len(actions)
    return Positions(
        position=Position(np.stack(boards), np.stack(turns), np.full(m, -1, np.int32), np.ones(m, bool)),
        action=np.array(actions, np.int32),
        outcome=np.zeros(m, np.int8),
        game=np.arange(first_game, first_game + m, dtype=np.int32),
        move_number=np.ones(m, np.int32),
    )


@pytest.fixture(scope="module")
def sets():
    return synthetic(512, 0), synthetic(256, 1, first_game=512)


@pytest.fixture(scope="module")
def trained(sets, tmp_path_factory):
    config = pattern_training.TrainConfig(steps=150, batch_size=64, learning_rate=1.0, min_count=2)
    return pattern_training.train(config, *sets, str(tmp_path_factory.mktemp("tree")), T.TREE)


def test_training_learns_the_distance_features(trained):
    policy, report = trained
    # uniform over the ~70 legal points would be right ~1.5% of the time; the two distance features make it exact
    assert report["test_accuracy"] > 0.9, report
    w = np.asarray(policy.weights)
    start = policy.extra_offset
    previous = w[start + 1 : start + 1 + T.NUM_DISTANCE]
    before = w[start + 1 + T.NUM_DISTANCE : start + 1 + 2 * T.NUM_DISTANCE]
    assert previous.argmax() == 2 and before.argmax() == 0, (previous, before)  # distance 3 and distance 1
    assert report["num_features"] == start + T.NUM_EXTRA + report["diamond_patterns"] == len(w)


def test_save_load_round_trip_and_files_refuse_each_other(tmp_path, trained, sets):
    policy, report = trained
    tree_file, rollout_file = tmp_path / "tree.npz", tmp_path / "rollout.npz"
    T.save(tree_file, policy, report)
    loaded = T.load(tree_file)
    for name in ("response_vocabulary", "pattern_vocabulary", "diamond_vocabulary", "weights"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(policy, name))
    test = sets[1]
    enc = T.encode_all(test.position)
    accuracy = T.accuracy(loaded, enc, test.action)
    assert accuracy == T.accuracy(policy, enc, test.action) and round(accuracy, 4) == report["test_accuracy"]
    # the trained and the loaded policy look their three vocabularies up in hash tables; the binary search (no tables)
    # finds the same indices; held-out diamonds are in the vocabulary often enough that the check is not one of -1s
    # (57 of the 256 test moves' diamonds when written)
    assert all(t is not None for t in (loaded.response_table, loaded.pattern_table, loaded.diamond_table))
    searched = loaded.replace(response_table=None, pattern_table=None, diamond_table=None)
    by_table, by_search = jax.jit(T.indices)(loaded, enc), jax.jit(T.indices)(searched, enc)
    chex.assert_trees_all_equal(by_table, by_search)
    assert (np.asarray(by_table.extra)[np.arange(len(test.action)), test.action, 3] >= 0).mean() > 0.1
    # p_π's part of the same weights, saved as p_π
    rollout = R.RolloutPolicy(
        policy.response_vocabulary, policy.pattern_vocabulary, policy.weights[: policy.extra_offset]
    )
    R.save(rollout_file, rollout)
    assert R.load(rollout_file).num_features == policy.extra_offset
    with pytest.raises(R.RolloutPolicyError, match=r"tree\.npz is a tree policy \(p_tau\) file, not a rollout") as e:
        R.load(tree_file)
    assert "\n" not in str(e.value)
    with pytest.raises(T.TreePolicyError, match=r"rollout\.npz is a rollout policy \(p_pi\) file, not a tree") as e:
        T.load(rollout_file)
    assert "\n" not in str(e.value)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(T.TreePolicyError, match="bad.npz is not a tree policy file") as e:
        T.load(bad)
    assert "\n" not in str(e.value)
    # a tree file whose weights do not match its vocabularies
    T.save(bad, policy.replace(weights=policy.weights[:-1]))
    with pytest.raises(T.TreePolicyError, match=f"{len(policy.weights) - 1} weights for {len(policy.weights)}"):
        T.load(bad)


def in_process(argv: list[str]) -> tuple[int, str, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue().splitlines()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--data", "{tmp}/none.npz", "--out", "{tmp}/t.npz"], "none.npz"),
        (["--data", "{tmp}/none.npz", "--out", "{tmp}/t.npz", "--steps", "0"], "argument --steps"),
        (["--data", "{tmp}/none.npz", "--out", "{tmp}/t.npz", "--learning-rate", "-1"], "argument --learning-rate"),
        (["--data", "{tmp}/none.npz"], "--out"),
    ],
)
def test_cli_user_errors_are_one_line(tmp_path, args, needle):
    code, _, err = in_process(["alphago", "tree", *[a.format(tmp=tmp_path) for a in args]])
    assert (code, len(err)) == (2, 1), err
    assert err[0].startswith("az-jax: error: ") and needle.format(tmp=tmp_path) in err[0], err[0]


def test_cli_trains_reports_and_saves_a_tree_policy(tmp_path, sets):
    train, test = sets
    data = tmp_path / "go9.npz"
    both = Positions(
        position=jax.tree.map(lambda a, b: np.concatenate([a, b]), train.position, test.position),
        action=np.concatenate([train.action, test.action]),
        outcome=np.concatenate([train.outcome, test.outcome]),
        game=np.concatenate([train.game, test.game]),
        move_number=np.concatenate([train.move_number, test.move_number]),
    )
    dataset.save(data, both, test_games=test.game.tolist())
    out = tmp_path / "tree.npz"
    code, stdout, err = in_process(["alphago", "tree", "--data", str(data), "--out", str(out), "--steps", "100"])
    assert code == 0, err
    report = json.loads(stdout.strip().splitlines()[-1])
    assert (report["train_positions"], report["test_positions"]) == (512, 256)
    assert report["test_accuracy"] > 0.9, report  # batch 256, learning rate 2.0: as in the training test
    assert [t["batch_size"] for t in report["time_per_move"]] == [1, 256]
    assert T.load(out).num_features == report["num_features"]
    # the training run beside it (default: FILE without .npz + _run), its checkpoint at the last step
    assert json.loads((tmp_path / "tree_run" / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 100
    with pytest.raises(R.RolloutPolicyError, match="is a tree policy"):
        R.load(out)
