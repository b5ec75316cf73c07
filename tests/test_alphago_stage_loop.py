"""The AlphaGo stages' one training loop (az_jax/alphago/stage_loop.py), through the value network's stage: a damaged
newest checkpoint is moved aside and the run resumes from the one before, to the same weights; a loss that turns NaN
stops the run with one line before anything of it is saved; a set held on the devices and one gathered on the host
take the same steps."""

import dataclasses
import json
import os

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from test_alphago_value import CONFIG, _counting

from az_jax.alphago import stage_loop, value_training
from az_jax.core import devices


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


def test_a_resident_set_and_one_gathered_on_the_host_give_the_same_run(tmp_path, monkeypatch):
    # The counting set (600 positions, well under 1 GiB) is resident: put on the devices once, each minibatch gathered
    # there. With the limit at 0 bytes every minibatch is gathered on the host instead: the same rows, so the same
    # steps, to the bit.
    train, test = _counting(600, 0), _counting(100, 1)
    resident = value_training.train(CONFIG, train, test, str(tmp_path / "resident"), log=lambda line: None)
    monkeypatch.setattr(stage_loop, "RESIDENT_BYTES", 0)
    hosted = value_training.train(CONFIG, train, test, str(tmp_path / "host"), log=lambda line: None)
    assert hosted["test_mse"] == resident["test_mse"] and hosted["train_mse"] == resident["train_mse"]
    a, b = (value_training.restore_params(str(tmp_path / d))[1] for d in ("resident", "host"))
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))
    # what each form hands the step: the rows of the set, split over the mesh either way
    mesh = devices.make_mesh()
    sharding = devices.shardings(mesh, P(devices.DEVICE_AXIS))
    rows = np.array([5, 0, 599, 5])
    on_devices = stage_loop.minibatches((train.position, train.outcome), sharding)(rows)
    on_host = stage_loop.minibatches((train.position, train.outcome), sharding, limit=0)(rows)
    leaves = jax.tree.leaves((train.position, train.outcome))
    for x, y, leaf in zip(jax.tree.leaves(on_devices), jax.tree.leaves(on_host), leaves, strict=True):
        assert np.array_equal(np.asarray(x), leaf[rows]) and np.array_equal(np.asarray(y), leaf[rows])
        assert x.sharding == y.sharding == sharding
