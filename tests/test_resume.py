"""Exact resume: a run interrupted between iterations and resumed ends bitwise equal to an uninterrupted run."""

import chex
import jax

from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.evaluation.in_training import train_and_evaluate
from az_jax.runtime import checkpoint as ckpt

from conftest import TINY_NETWORK

TINY = [
    *TINY_NETWORK,
    "selfplay_steps=4",
    "replay_capacity=256",
    "min_replay_size=16",
    "eval_every=0",
    "checkpoint_every=2",
    "keep_checkpoints=5",
    "train_ratio=1",
]


def _config(iterations):
    return override(preset("tic_tac_toe", "small"), TINY + [f"num_iterations={iterations}"])


def test_resume_is_bitwise_exact(tmp_path, fast_compiles):
    # The three runs compile the same programs (XLA's optimisation passes off, conftest.py): the first compiles them,
    # the other two load them from the session's compilation cache (conftest.py) instead of compiling them again.
    straight = train_and_evaluate(_config(4), str(tmp_path / "straight"), progress=False)
    # "Interrupted" after iteration 2 (its last checkpoint), then the same command run again with 4 iterations.
    train_and_evaluate(_config(2), str(tmp_path / "resumed"), progress=False)
    resumed = train_and_evaluate(_config(4), str(tmp_path / "resumed"), progress=False)
    assert int(resumed.iteration) == 4
    chex.assert_trees_all_equal(jax.device_get(straight), jax.device_get(resumed))  # same structure, same bits
    # Learning happened in both halves, so equality is not the trivial one of untouched parameters.
    first = ckpt.make_manager(str(tmp_path / "resumed"), read_only=True)
    assert sorted(first.all_steps()) == [2, 4]
