"""The AlphaGo stages' one training loop (az_jax/alphago/stage_loop.py), through the value network's stage: a damaged
newest checkpoint is moved aside and the run resumes from the one before, to the same weights; a loss that turns NaN
stops the run with one line before anything of it is saved."""

import dataclasses
import json
import os

import numpy as np
import pytest
from test_alphago_value import CONFIG, _counting

from az_jax.alphago import value_training


def _steps(run_dir) -> list[int]:
    return [json.loads(line)["step"] for line in open(os.path.join(run_dir, "metrics.jsonl"))]


def test_a_damaged_checkpoint_is_moved_aside_and_the_run_resumes_from_the_one_before(tmp_path):
    run_dir = str(tmp_path / "v")
    train, test = _counting(600, 0), _counting(100, 1)
    whole = value_training.train(CONFIG, train, test, run_dir, log=lambda line: None)  # 300 steps, saved at 100/200/300
    for name in os.listdir(os.path.join(run_dir, "checkpoints", "300")):  # checkpoint 300 loses its files
        path = os.path.join(run_dir, "checkpoints", "300", name)
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                for f in names:
                    open(os.path.join(root, f), "wb").close()
    lines: list[dict] = []
    again = value_training.train(CONFIG, train, test, run_dir, log=lines.append)
    assert os.path.isdir(os.path.join(run_dir, "checkpoints_damaged", "300"))  # kept, not deleted
    assert lines[0] == {"damaged_checkpoint": 300, "moved_to": os.path.join(run_dir, "checkpoints_damaged", "300")}
    # resumed from 200: steps 201-300 again, each on the minibatch and key of its step: the same weights, to the bit
    assert [line["step"] for line in lines[1:]] == [300] and again["averaged_steps"] == 100
    assert again["test_mse"] == whole["test_mse"]
    assert _steps(run_dir) == [100, 200, 300]  # line 300 dropped on resume, then written once more
    assert value_training.restore_params(run_dir)[2] == 300


class _Stop(Exception):
    pass


def test_a_nan_loss_stops_the_run_before_anything_is_saved(tmp_path):
    run_dir = str(tmp_path / "v")
    train, test = _counting(600, 0), _counting(100, 1)

    def stop_at_200(line):
        if line["step"] == 200:
            raise _Stop  # logged, then stopped before its checkpoint: the newest is 100

    with pytest.raises(_Stop):
        value_training.train(CONFIG, train, test, run_dir, log=stop_at_200)
    poisoned = dataclasses.replace(train, outcome=np.full(len(train), np.nan, np.float32))  # every z NaN
    with pytest.raises(value_training.ValueRunError) as e:
        value_training.train(CONFIG, poisoned, test, run_dir, log=lambda line: None)
    message = str(e.value)
    assert "\n" not in message and "training diverged: the loss is nan at step 101" in message
    assert "the newest checkpoint (step 100) is intact" in message
    assert _steps(run_dir) == [100]  # line 200 dropped on resume; no line of the diverged stretch
    assert value_training.restore_params(run_dir)[2] == 100  # and no checkpoint after it
