"""The non-finite guard: a run whose learning rate makes it diverge stops with one line naming the iteration, before
anything of that iteration is saved, and its newest checkpoint is finite; config floats that are NaN or ±inf and ints
beyond int32 are ConfigErrors naming the key, whichever way they arrive (override, JSON, dataclasses.replace)."""

import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import pytest

from az_jax.core import learner
from az_jax.core.config import FIELDS, ConfigError
from az_jax.core.devices import make_mesh
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.evaluation.in_training import train_and_evaluate
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.loop import DivergenceError, divergence_message
from az_jax.runtime.metrics import read_metrics
from az_jax.runtime.trainer import Trainer

from conftest import TINY_NETWORK

# tests/test_resume.py's tiny tic-tac-toe run, with a learning rate that overflows float32 within a few steps
TINY = [
    *TINY_NETWORK,
    "selfplay_steps=4",
    "replay_capacity=256",
    "min_replay_size=16",
    "eval_every=0",
    "train_ratio=1",
]


def test_divergence_stops_before_the_diverged_iteration_is_saved(tmp_path, fast_compiles):
    # Every iteration is checkpointed and kept, so a checkpoint of the diverged iteration would show.
    config = override(
        preset("tic_tac_toe", "small"),
        [
            *TINY,
            "learning_rates=1e9",
            "lr_boundaries=",
            "num_iterations=12",
            "checkpoint_every=1",
            "keep_checkpoints=0",
        ],
    )
    run_dir = str(tmp_path / "run")
    with pytest.raises(DivergenceError) as info:
        train_and_evaluate(config, run_dir, progress=False)
    message = str(info.value)
    found = re.match(r"training diverged at iteration (\d+): the (loss|gradient norm|updated weights)", message)
    assert found and "\n" not in message, message
    diverged = int(found.group(1))
    assert 2 <= diverged <= 12  # learning starts after 16 positions with an outcome, i.e. not in iteration 1

    # Every iteration before the diverged one is saved and logged, exactly once; the diverged one is neither.
    manager = ckpt.make_manager(run_dir, read_only=True)
    assert sorted(manager.all_steps()) == list(range(1, diverged))
    assert [r["iteration"] for r in read_metrics(run_dir)] == list(range(1, diverged))
    assert f"the newest checkpoint (iteration {diverged - 1}) is intact" in message

    # The newest checkpoint restores with every float finite, after steps at learning rate 1e9 (its weights are far
    # from the initial ones, whose largest is below 3: LeCun-normal kernels of fan-in >= 18, batch-norm scales 1).
    state = ckpt.restore(manager, diverged - 1, Trainer(config, make_mesh()).abstract_state(), config)
    assert bool(learner.all_finite((state.params, state.batch_stats, state.opt_state)))
    largest = max(float(jnp.abs(x).max()) for x in jax.tree.leaves(state.params))
    learned = [r for r in read_metrics(run_dir) if r["train/steps"] > 0]
    assert learned, "the run diverged in its first learning iteration: the checkpoint test above is trivial"
    assert largest > 1e3
    assert all(r["train/finite"] == 1.0 and r["train/grad_norm"] > 0 for r in learned)


def test_divergence_message_names_what_diverged_and_what_to_do():
    metrics = {"train/loss": math.nan, "train/grad_norm": 3.5, "train/learning_rate": 1e9}
    assert divergence_message(7, metrics, 6) == (
        "training diverged at iteration 7: the loss is nan (learning rate 1e+09); nothing of iteration 7 was saved "
        "and the newest checkpoint (iteration 6) is intact: lower learning_rates (--set learning_rates=...) and run "
        "the same command again to resume from it"
    )
    both = divergence_message(3, {**metrics, "train/grad_norm": math.inf}, None)
    assert both.startswith("training diverged at iteration 3: the loss is nan and the gradient norm is inf (")
    assert both.endswith(
        "no checkpoint was written yet: lower learning_rates (--set learning_rates=...) and start again"
    )
    weights = divergence_message(4, {**metrics, "train/loss": 2.0}, 2)
    assert weights.startswith("training diverged at iteration 4: the updated weights are not finite (")


def test_a_diverged_run_may_resume_with_lower_learning_rates():
    # What the message advises: the schedule is no part of the saved state, so the run dir accepts new rates.
    saved = override(preset("tic_tac_toe"), ["learning_rates=1e9", "lr_boundaries="])
    ckpt.check_compatible(saved, override(saved, ["learning_rates=0.01,0.001", "lr_boundaries=100"]), "run")
    with pytest.raises(ckpt.CheckpointError, match="num_blocks"):
        ckpt.check_compatible(saved, override(saved, ["num_blocks=3"]), "run")


def test_all_finite():
    assert bool(learner.all_finite({"w": jnp.float32([1.0, -2.0]), "count": jnp.int32(3)}))
    assert not bool(learner.all_finite({"w": jnp.float32([1.0, jnp.nan]), "count": jnp.int32(3)}))
    assert not bool(learner.all_finite([jnp.float32(0.0), jnp.float32([-jnp.inf])]))
    assert bool(learner.all_finite({"count": jnp.int32(3)}))  # no float leaf: nothing can be non-finite


HUGE = "9" * 5000


@pytest.mark.parametrize(
    "assignment,key",
    [
        ("learning_rates=nan", "learning_rates"),
        ("learning_rates=inf", "learning_rates"),
        ("learning_rates=0.1,-inf", "learning_rates"),
        ("weight_decay=nan", "weight_decay"),
        ("c_init=nan", "c_init"),
        ("c_base=inf", "c_base"),
        ("dirichlet_alpha=nan", "dirichlet_alpha"),
        ("momentum=NaN", "momentum"),
        ("num_blocks=inf", "num_blocks"),
        ("num_blocks=1e5000", "num_blocks"),  # parses to float inf
        (f"num_blocks={HUGE}", "num_blocks"),
        ("num_blocks=nan", "num_blocks"),
        ("lr_boundaries=100,inf", "lr_boundaries"),
        (f"seed={HUGE}", "seed"),
        ("seed=2147483648", "seed"),  # 2^31: one beyond int32
    ],
)
def test_non_finite_and_huge_numbers_are_config_errors(assignment, key):
    with pytest.raises(ConfigError, match=f"^{key} must be") as info:
        override(preset("tic_tac_toe"), [assignment]).validate()
    assert "\n" not in str(info.value) and len(str(info.value)) < 200  # one short line, even for 5,000 digits


FLOAT_KEYS = [key for key, field in FIELDS.items() if field.type is float]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_validate_rejects_every_non_finite_float(value):
    # Configs made without override (dataclasses.replace) are judged by validate(): NaN compares false, so a range
    # check alone (`lr <= 0`) would let it through.
    assert {"c_init", "weight_decay", "dirichlet_alpha", "gating_threshold", "v_resign_init"} <= set(FLOAT_KEYS)
    base = preset("tic_tac_toe")
    for key in FLOAT_KEYS:
        with pytest.raises(ConfigError, match=f"^{key} must be finite"):
            dataclasses.replace(base, **{key: value}).validate()
    with pytest.raises(ConfigError, match="^learning_rates must be finite"):
        dataclasses.replace(base, learning_rates=(0.1, value)).validate()
