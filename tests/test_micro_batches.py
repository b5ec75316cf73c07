"""Config.micro_batches: the learner's batch learned in k parts, their gradients averaged before the one update
(learner.accumulate). The update is the mean of the parts' gradients, batch norm's running means move as the one-batch
step moves them, and the step's temporaries shrink."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from az_jax.core import learner, networks
from az_jax.core.config import ConfigError
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.runtime import targets

from test_remat import _batch
from test_remat import _net as remat_net


def _net(blocks: int = 2, channels: int = 8) -> networks.AlphaZeroNet:
    return remat_net(False, blocks=blocks, channels=channels)  # test_remat's network, without remat


CONFIG = override(preset("connect_four", "small"), [])


def _step(net, micro_batches: int):
    optimizer = learner.make_optimizer(CONFIG)
    return jax.jit(
        lambda p, s, o, b: learner.train_step(
            p,
            s,
            o,
            b,
            apply_fn=learner.learning_apply(net),
            optimizer=optimizer,
            weight_decay=CONFIG.weight_decay,
            axis_name=None,
            micro_batches=micro_batches,
        )
    )


def test_the_update_is_the_mean_of_the_parts_gradients():
    net, batch = _net(), _batch(16)
    variables = net.init(jax.random.key(0), batch.observation)
    params, stats = variables["params"], variables["batch_stats"]
    optimizer = learner.make_optimizer(CONFIG)
    opt_state = optimizer.init(params)
    new_params, new_stats, _, metrics = _step(net, 4)(params, stats, opt_state, batch)

    # by hand: the gradient of each quarter (4 positions) alone, their mean, one SGD-with-momentum update
    apply_fn = learner.learning_apply(net)
    parts = [jax.tree.map(lambda x, i=i: x[4 * i : 4 * i + 4], batch) for i in range(4)]
    outs = [
        learner.gradient(params, stats, part, apply_fn=apply_fn, weight_decay=CONFIG.weight_decay) for part in parts
    ]
    grads = jax.tree.map(lambda *g: sum(g) / 4, *[o[0] for o in outs])
    updates, _ = optimizer.update(grads, opt_state, params)
    chex.assert_trees_all_close(new_params, jax.tree.map(jnp.add, params, updates), rtol=1e-5, atol=1e-7)
    expected_loss = sum(float(o[1][1]["loss"]) for o in outs) / 4
    assert float(metrics["loss"]) == pytest.approx(expected_loss, rel=1e-6)
    chex.assert_trees_all_close(
        new_stats, jax.tree.map(lambda *s: sum(s) / 4, *[o[1][0] for o in outs]), rtol=1e-6, atol=1e-8
    )


def test_running_means_move_as_in_the_one_batch_step():
    # The stem's batch norm sees conv(x) of the same parameters in both steps; the mean of four equal quarters' means
    # is the batch's mean, so its running mean, 0.99·old + 0.01·mean (flax's momentum), is the same either way. Later
    # layers normalise by each quarter's statistics, so theirs differ.
    net, batch = _net(), _batch(16)
    variables = net.init(jax.random.key(0), batch.observation)
    opt_state = learner.make_optimizer(CONFIG).init(variables["params"])
    args = (variables["params"], variables["batch_stats"], opt_state, batch)
    _, one, _, _ = _step(net, 1)(*args)
    _, four, _, _ = _step(net, 4)(*args)
    stem, value_head = "BatchNorm_0", "BatchNorm_2"  # flax's names: the stem's, then the policy and value heads'
    np.testing.assert_allclose(four[stem]["mean"], one[stem]["mean"], rtol=1e-5, atol=1e-8)
    assert not np.allclose(four[stem]["var"], one[stem]["var"], rtol=1e-5, atol=1e-8)  # the quarters' own variances
    assert not np.allclose(four[value_head]["mean"], one[value_head]["mean"], rtol=1e-5, atol=1e-8)


def test_micro_batches_cut_the_steps_temporaries_on_a_gpu():
    # 4 blocks of 32 channels on 256 positions, compiled for one H100 (compile-only): the activations kept for
    # the backward pass are a quarter's with 4 parts. (The TPU compiler already keeps few activations of this small
    # network: 6.3 MB against 8.0 MB.)
    batch = _batch(256)
    device = targets.get_target("h100").topology_devices()
    replicated = NamedSharding(Mesh(np.asarray(device), ("d",)), P())
    temps = {}
    for k in (1, 4):
        net = _net(blocks=4, channels=32)
        variables = jax.eval_shape(lambda n=net: n.init(jax.random.key(0), batch.observation))
        opt_state = jax.eval_shape(learner.make_optimizer(CONFIG).init, variables["params"])
        args = (variables["params"], variables["batch_stats"], opt_state, batch)
        args = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated), args)
        temps[k] = _step(net, k).lower(*args).compile().memory_analysis().temp_size_in_bytes
    assert temps[4] < 0.5 * temps[1], temps  # seen: 6.9 MB against 26.4 MB


def test_micro_batches_must_divide_each_devices_share():
    config = override(preset("connect_four", "small"), ["micro_batches=3"])
    with pytest.raises(ConfigError, match="micro_batches=3 must be >= 1 and divide each device's"):
        config.validate(2)
