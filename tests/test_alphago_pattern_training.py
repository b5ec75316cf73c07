"""The pattern policies' training (az_jax/alphago/pattern_training.py: p_π, and p_τ in test_alphago_tree_policy.py)
through the stages' loop: a synthetic task a linear pattern model must learn, the vocabularies' pass a buffer at a
time, a run interrupted and resumed taking the same steps to the bit, and a run directory's refusals. Cost: 150
steps of batch 64 on 7x7 positions, three times."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from az_jax.alphago import pattern_training as PT
from az_jax.alphago import rollout_policy as R
from az_jax.alphago.dataset import Positions
from az_jax.alphago.position import Position

N = 7
P = N * N
CONFIG = PT.TrainConfig(steps=150, batch_size=64, learning_rate=1.0, min_count=2, eval_every=50, checkpoint_every=50)


def synthetic(count: int, seed: int) -> Positions:
    """Random sparse 7x7 positions; the expert move is always the point directly above the previous move."""
    rng = np.random.default_rng(seed)
    boards: list[np.ndarray] = []
    turns: list[np.ndarray] = []
    actions: list[int] = []
    while len(actions) < count:
        board = np.zeros(P, np.int8)
        stones = rng.choice(P, 12, replace=False)
        board[stones[:6]], board[stones[6:]] = 1, -1
        t = np.where(board != 0, rng.integers(2, 9, P), 0).astype(np.int8)
        candidates = [s for s in stones[6:] if s >= N and board[s - N] == 0]
        if not candidates:
            continue
        prev = int(rng.choice(candidates))
        t[prev] = 1
        boards.append(board)
        turns.append(t)
        actions.append(prev - N)
    m = len(actions)
    return Positions(
        position=Position(np.stack(boards), np.stack(turns), np.full(m, -1, np.int32), np.ones(m, bool)),
        action=np.array(actions, np.int32),
        outcome=np.zeros(m, np.int8),
        game=np.arange(m, dtype=np.int32),
        move_number=np.ones(m, np.int32),
    )


class _Interrupt(Exception):
    pass


@pytest.fixture(scope="module")
def sets():
    return synthetic(512, 0), synthetic(256, 1)


@pytest.fixture(scope="module")
def trained(sets, tmp_path_factory):
    """A run interrupted at step 100 (by its log callback, before that step's checkpoint) and resumed from 50."""
    run_dir = str(tmp_path_factory.mktemp("p_pi"))
    first: list[dict] = []

    def stop_at_100(line: dict) -> None:
        first.append(line)
        if line.get("step") == 100:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        PT.train(CONFIG, *sets, run_dir, log=stop_at_100)
    lines: list[dict] = []
    policy, report = PT.train(CONFIG, *sets, run_dir, log=lines.append)
    return run_dir, first, lines, policy, report


def test_training_learns_the_point_above_the_previous_move(trained):
    _, _, _, policy, report = trained
    # before training every legal point scores 0: argmax picks the first legal point, far below 0.9
    assert report["test_accuracy"] > 0.9, report
    assert (report["train_positions"], report["test_positions"], report["steps"]) == (512, 256, 150)
    # 5 of the 512 training moves are suicides (the point above the previous move has no liberty): p = 0 under the
    # features' rules, so the loss leaves them out (it would be infinite, and the run stop as diverged) and counts
    # them, ~1% of each line's minibatches (5 / 512 = 0.98%)
    assert 0 < report["final_loss"] < 0.5 and all(0 <= m["illegal_expert_moves"] < 0.05 for m in trained[2])
    # the neighbour feature "previous move directly below" (index 6) carries it
    w = np.asarray(policy.weights)
    assert w[R._NEIGHBOUR + 6] == w[R._NEIGHBOUR : R._NEIGHBOUR + 8].max() > 1.0


def test_a_resumed_run_takes_the_same_steps_as_one_never_stopped(trained, sets, tmp_path, monkeypatch):
    run_dir, first, lines, policy, report = trained
    # The interrupted call logged 50 and 100; the resumed one started from checkpoint 50 and took steps 51-100 again
    # (step t's minibatch comes from t): its line 100 is the same to the bit, training loss and held-out accuracy.
    assert [m["step"] for m in first] == [50, 100] and [m["step"] for m in lines] == [100, 150]
    for key in ("train_loss", "train_accuracy", "test_accuracy"):
        assert lines[0][key] == first[1][key], key
    written = [json.loads(line)["step"] for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    assert written == [50, 100, 150]  # the interrupted call's line 100 was dropped on resume and written again
    # a run never stopped ends with the same weights, bit for bit
    whole, whole_report = PT.train(CONFIG, *sets, str(tmp_path / "whole"), log=lambda line: None)
    assert np.array_equal(np.asarray(whole.weights), np.asarray(policy.weights))
    assert whole_report["test_accuracy"] == report["test_accuracy"]
    # done: a further call trains nothing and builds no vocabulary (vocabulary.npz is read back), same policy
    monkeypatch.setattr(PT, "build_vocabularies", lambda *a: pytest.fail("vocabularies built again"))
    again_lines: list[dict] = []
    again, again_report = PT.train(CONFIG, *sets, run_dir, log=again_lines.append)
    assert again_lines == [] and np.array_equal(np.asarray(again.weights), np.asarray(policy.weights))
    assert again_report["final_loss"] == report["final_loss"]


def test_the_vocabularies_are_built_a_buffer_at_a_time(trained, sets, tmp_path, monkeypatch):
    sizes: list[int] = []
    encode_all = PT.encode_all
    monkeypatch.setattr(PT, "encode_all", lambda p, **kw: sizes.append(len(p.board)) or encode_all(p, **kw))
    policy, report = PT.train(dataclasses.replace(CONFIG, buffer=100), *sets, str(tmp_path), log=lambda line: None)
    # 512 training rows in ceil(512 / 100) = 6 buffers of 86 or 85 (512 = 2 x 86 + 4 x 85); the set is larger than
    # a buffer, so not resident: the steps and the held-out accuracy compute their positions' features in their
    # jitted programs, never through encode_all
    assert report["buffers"] == 6 and sorted(sizes) == [85, 85, 85, 85, 86, 86] and not report["resident"]
    # the vocabularies come from every expert move either way, and the steps are the resident run's (the fixture's,
    # one buffer of 65,536): the same minibatches, the same features
    whole, whole_report = trained[3], trained[4]
    assert whole_report["resident"] and whole_report["buffers"] == 1
    assert np.array_equal(policy.pattern_vocabulary, whole.pattern_vocabulary)
    assert np.array_equal(policy.response_vocabulary, whole.response_vocabulary)
    np.testing.assert_allclose(np.asarray(policy.weights), np.asarray(whole.weights), rtol=1e-5, atol=1e-5)
    assert report["test_accuracy"] == whole_report["test_accuracy"] > 0.9, report


def test_a_run_directory_refuses_another_config_and_a_damaged_vocabulary(trained, sets, tmp_path):
    run_dir = trained[0]
    with pytest.raises(PT.PatternTrainingError, match=r"another config \(learning_rate differ") as e:
        PT.train(dataclasses.replace(CONFIG, learning_rate=2.0), *sets, run_dir)
    assert "\n" not in str(e.value)
    copy = str(tmp_path / "copy")
    shutil.copytree(run_dir, copy)
    with open(os.path.join(copy, PT.VOCABULARY_FILE), "wb") as f:
        f.write(b"not a zip file")
    with pytest.raises(PT.PatternTrainingError, match="vocabulary.npz cannot be read") as e:
        PT.train(CONFIG, *sets, copy)
    assert "\n" not in str(e.value)
    assert sorted(os.listdir(os.path.join(copy, "checkpoints"))) == ["100", "150", "50"]  # nothing moved or lost


@pytest.mark.parametrize(
    "key, value", [("steps", 0), ("batch_size", 0), ("learning_rate", float("nan")), ("min_count", 0), ("buffer", 0)]
)
def test_invalid_settings_are_refused(key, value):
    with pytest.raises(ValueError, match=f"TrainConfig: invalid {key}="):
        PT.TrainConfig(**{key: value})


def test_empty_sets_are_refused(sets, tmp_path):
    with pytest.raises(PT.PatternTrainingError, match="must both hold positions"):
        PT.train(CONFIG, sets[0], sets[1].take(np.zeros(0, np.int64)), str(tmp_path))
