"""The policy head's 1×1 convolution with more than the papers' two filters (Config.policy_head_filters): the
parameters' shapes and count by hand, the default equal to the papers' network value for value, and the key's checks."""

import chex
import jax
import pytest

from az_jax.core import config as config_lib
from az_jax.core import overrides
from az_jax.runtime import checkpoint

from conftest import tiny_head_params


def test_policy_head_filters_widen_its_convolution_and_the_logits_input():
    # The default is AGZ's head: 1×1 conv 4 → 2 filters, its 3·3·2 = 18 outputs into the 9 move logits.
    default, wide = tiny_head_params(), tiny_head_params(policy_head_filters=5)
    # the key's default is the papers' network, value for value
    chex.assert_trees_all_equal(default, tiny_head_params(policy_head_filters=2))
    assert (default["Conv_1"]["kernel"].shape, default["Dense_0"]["kernel"].shape) == ((1, 1, 4, 2), (18, 9))
    # 5 filters: kernel 1×1×4×5, the BN's scale and bias 5 each, the logits' layer reads 3·3·5 = 45 inputs
    assert (wide["Conv_1"]["kernel"].shape, wide["BatchNorm_1"]["scale"].shape) == ((1, 1, 4, 5), (5,))
    assert wide["Dense_0"]["kernel"].shape == (45, 9)
    # parameters: +4·3 (kernel) +3·2 (BN scale and bias) +9·3·9 (logits' kernel rows) = 12 + 6 + 243 = 261
    count = lambda params: sum(leaf.size for leaf in jax.tree.leaves(params))
    assert count(wide) - count(default) == 261
    # the value head is untouched: its conv and hidden layer keep their shapes
    assert wide["Conv_2"]["kernel"].shape == (1, 1, 4, 1) and wide["Dense_1"]["kernel"].shape == (9, 8)


def test_the_key_is_checked_and_a_resume_cannot_change_it():
    with pytest.raises(config_lib.ConfigError, match="policy_head_filters must be a positive integer, got 0"):
        overrides.override(config_lib.Config(), ["policy_head_filters=0"]).validate()
    wide = overrides.override(config_lib.Config(), ["policy_head_filters=32"])
    assert wide.policy_head_filters == 32 and config_lib.Config().policy_head_filters == 2  # AGZ's 2 by default
    with pytest.raises(checkpoint.CheckpointError, match="policy_head_filters: saved 2 vs requested 32"):
        checkpoint.check_compatible(config_lib.Config(), wide, "checkpoint 10")
