"""The value target's λ after the learning-rate step (Config.value_target_mix_after_rate_step, not in the papers):
(1 − λ)·z + λ·v_search with one λ before the optimizer's count reaches lr_boundaries[0] and another from there on."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from az_jax.core import config as config_lib
from az_jax.core import learner, replay
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.runtime import checkpoint as ckpt


def _config(*overrides):
    return overrides_lib.override(presets_lib.preset("connect_four", "small"), list(overrides)).validate()


def _opt_state_at(config, count):
    """The optimizer state of `config` whose schedule has taken `count` steps."""
    state = learner.make_optimizer(config).init({"w": jnp.zeros(3)})
    return optax.tree_utils.tree_set(state, count=jnp.int32(count))


def test_lambda_changes_at_the_rate_step():
    config = _config("value_target_mix=0.5", "value_target_mix_after_rate_step=0", "lr_boundaries=100")
    # the step is at count 100: steps 0..99 learn ½z + ½v, step 100 on z alone
    assert float(learner.value_target_mix(config, _opt_state_at(config, 99))) == 0.5
    assert float(learner.value_target_mix(config, _opt_state_at(config, 100))) == 0.0
    assert float(learner.value_target_mix(config, _opt_state_at(config, 5000))) == 0.0
    # the other way round: z until the step, then ¼ of the search value
    late = _config("value_target_mix=0", "value_target_mix_after_rate_step=0.25", "lr_boundaries=100")
    assert float(learner.value_target_mix(late, _opt_state_at(late, 99))) == 0.0
    assert float(learner.value_target_mix(late, _opt_state_at(late, 100))) == 0.25
    # -1 (the default): λ is the plain float, the same before and after, and the program has no switch in it
    plain = _config("value_target_mix=0.5", "lr_boundaries=100")
    assert plain.value_target_mix_after_rate_step == -1.0
    assert learner.value_target_mix(plain, _opt_state_at(plain, 100)) == 0.5
    # so is an after-value equal to λ: z throughout (0 and 0) is the plain z, with no search values kept to mix
    both_z = _config("value_target_mix=0", "value_target_mix_after_rate_step=0", "lr_boundaries=100")
    assert learner.value_target_mix(both_z, _opt_state_at(both_z, 100)) == 0.0
    assert not config_lib.keeps_search_value(both_z)
    # the buffer keeps search values when either λ is > 0
    assert config_lib.keeps_search_value(late) and config_lib.keeps_search_value(config)
    assert not config_lib.keeps_search_value(_config("value_target_mix=0"))


def test_sample_takes_lambda_as_an_array():
    buffer = replay.init(2, (1,), jnp.int32, 2, keep_search_value=True)
    buffer = replay.add(
        buffer,
        jnp.int32(0),
        jnp.int32([[0], [1]]),
        jnp.float32([[0.5, 0.5]] * 2),
        jnp.ones((2, 2), jnp.bool_),
        jnp.int32([0, 1]),
        jnp.int32([0, 0]),
        search_value=jnp.float32([0.2, -0.6]),
    )
    # both games end, player 0 won: z = +1 for row 0's mover, −1 for row 1's
    buffer = replay.resolve(buffer, jnp.bool_([True, True]), jnp.int32([0, 0]), jnp.float32([[1.0, -1.0]] * 2))
    sample = jax.jit(lambda lam: replay.sample(buffer, jax.random.key(0), 64, value_target_mix=lam).outcome)
    rows = np.asarray(replay.sample(buffer, jax.random.key(0), 64).observation[:, 0])
    # λ = 0.5 as a traced array: row 0 → ½·(+1) + ½·0.2 = 0.6, row 1 → ½·(−1) + ½·(−0.6) = −0.8; λ = 0 is z
    np.testing.assert_allclose(np.asarray(sample(jnp.float32(0.5))), np.where(rows == 0, 0.6, -0.8), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(sample(jnp.float32(0.0))), np.where(rows == 0, 1.0, -1.0))


def test_config_checks_the_value():
    with pytest.raises(config_lib.ConfigError, match=r"value_target_mix_after_rate_step must be in \[0, 1\]"):
        _config("value_target_mix_after_rate_step=1.5")
    with pytest.raises(config_lib.ConfigError, match=r"value_target_mix_after_rate_step must be in \[0, 1\]"):
        _config("value_target_mix_after_rate_step=-0.5")
    with pytest.raises(config_lib.ConfigError, match="needs a rate step"):
        _config("value_target_mix_after_rate_step=0", "lr_boundaries=", "learning_rates=0.02")


def test_a_run_may_resume_with_another_lambda_after_the_step_while_the_buffer_keeps_the_same_fields():
    saved = _config("value_target_mix=0.5")
    for after in ("0", "0.25", "-1"):
        ckpt.check_compatible(
            saved, overrides_lib.override(saved, [f"value_target_mix_after_rate_step={after}"]), "run"
        )
    # a run on z alone has no search values stored: it cannot start mixing them in on resume
    plain = _config("value_target_mix=0")
    with pytest.raises(ckpt.CheckpointError, match="has no search values"):
        ckpt.check_compatible(plain, overrides_lib.override(plain, ["value_target_mix_after_rate_step=0.5"]), "run")
    # nor can a run that kept them stop keeping them
    kept = _config("value_target_mix=0", "value_target_mix_after_rate_step=0.5")
    with pytest.raises(ckpt.CheckpointError, match="keeps search values"):
        ckpt.check_compatible(kept, overrides_lib.override(kept, ["value_target_mix_after_rate_step=-1"]), "run")
