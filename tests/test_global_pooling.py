"""KataGo's global pooling block (Wu 2019, §4.1; Config.global_pooling_every): every output cell sees the whole
board, which a plain residual block (two 3×3 convs: cells within 2 of it) does not; its parameters, counted by hand."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az_jax.core import networks
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib

pytestmark = pytest.mark.usefixtures("fast_compiles")  # tiny programs: XLA's optimisation passes off (conftest.py)


def _outputs_far_from_a_change(block) -> tuple[float, int]:
    """(largest change of the block's output at cell (5, 6) when only input cell (0, 0) changes, parameter count)."""
    x = jax.random.normal(jax.random.key(0), (1, 6, 7, 9))
    variables = jax.jit(lambda key: block.init(key, x, train=False))(jax.random.key(1))
    moved = x.at[0, 0, 0].add(3.0)
    apply = jax.jit(lambda inputs: block.apply(variables, inputs, train=False))
    far = lambda inputs: apply(inputs)[0, 5, 6]
    params = sum(p.size for p in jax.tree.leaves(variables["params"]))
    return float(jnp.abs(far(moved) - far(x)).max()), params


def test_global_pooling_block_sees_the_whole_board():
    plain, plain_params = _outputs_far_from_a_change(networks.ResidualBlock(9, jnp.float32, None))
    pooling, pooling_params = _outputs_far_from_a_change(networks.GlobalPoolingBlock(9, 3, jnp.float32, None))
    assert plain == 0.0  # (5, 6) is 5 rows and 6 columns from (0, 0): out of two 3×3 convs' reach
    assert pooling > 1e-4
    # Plain, C = 9: two convs 3·3·9·9 = 729 each, two batch norms of 9 (scale + bias) = 18 each: 1,494.
    assert plain_params == 2 * 729 + 2 * 18 == 1494
    # Pooling, C = 9, g = 3: conv 729; dense from the 2g = 6 pooled values to C − g = 6 biases, 6·6 + 6 = 42; second
    # conv from 6 channels 3·3·6·9 = 486; batch norms of g = 3, C − g = 6 and C = 9 channels: 6 + 12 + 18 = 36.
    assert pooling_params == 729 + 42 + 486 + 36 == 1293


def test_config_places_pooling_blocks():
    config = overrides_lib.override(
        presets_lib.preset("connect_four", "small"), ["num_blocks=4", "num_channels=12", "global_pooling_every=2"]
    ).validate()
    net = networks.make_network(config, 7)
    obs = jnp.zeros((1, 6, 7, 2))
    params = jax.eval_shape(lambda: net.init(jax.random.key(0), obs))["params"]
    kinds = sorted(name.split("_")[0] for name in params if "Block" in name)
    # blocks 2 and 4 of 4 pool (every 2nd); 1 and 3 are plain
    assert kinds == ["GlobalPoolingBlock", "GlobalPoolingBlock", "ResidualBlock", "ResidualBlock"]
    logits, value = jax.jit(lambda key: net.apply(net.init(key, obs), obs))(jax.random.key(0))
    assert logits.shape == (1, 7) and value.shape == (1,) and np.isfinite(np.asarray(logits)).all()
