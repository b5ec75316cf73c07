"""The win/draw/loss value head (Config.value_head = "wdl"): its target distribution and cross-entropy by hand, the
network's value P(win) − P(loss), the loss it puts in place of (z − v)², learning a drawn share a tanh unit cannot
show, and the key's checks; the value head's 1×1 convolution with more than one filter (Config.value_head_filters)."""

import dataclasses
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az_jax.core import config as config_lib
from az_jax.core import learner, networks, overrides, replay
from az_jax.core.config import Config
from az_jax.runtime import checkpoint

from conftest import tiny_head_params, tiny_variables

LN2, LN3, LN4 = math.log(2.0), math.log(3.0), math.log(4.0)


def test_the_target_is_a_distribution_whose_mean_is_t():
    target = learner.wdl_target(jnp.float32([1.0, 0.0, -1.0, 0.5, -0.2]))
    # (max(t, 0), 1 − |t|, max(−t, 0)): z = 1 / 0 / −1 are one class each; 0.5 lies between draw and win, −0.2
    # between draw and loss
    np.testing.assert_allclose(target, [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.5, 0.5, 0], [0, 0.8, 0.2]], atol=1e-7)
    np.testing.assert_allclose(target[:, 0] - target[:, 2], [1.0, 0.0, -1.0, 0.5, -0.2], atol=1e-7)


def test_cross_entropy_by_hand():
    # logits (ln 2, 0, 0): p = (2, 1, 1) / 4 = (1/2, 1/4, 1/4). A win costs −ln ½ = ln 2 ≈ 0.693147, a draw −ln ¼ =
    # ln 4 ≈ 1.386294, t = 0.5 (½ win, ½ draw) ½(ln 2 + ln 4) ≈ 1.039721
    logits = jnp.float32([[LN2, 0.0, 0.0]] * 3)
    loss = learner.wdl_loss(logits, jnp.float32([1.0, 0.0, 0.5]))
    np.testing.assert_allclose(loss, [LN2, LN4, 0.5 * (LN2 + LN4)], rtol=1e-6)
    # equal logits: ln 3 ≈ 1.098612 whatever the target, as every target sums to 1
    np.testing.assert_allclose(learner.wdl_loss(jnp.zeros((2, 3)), jnp.float32([1.0, -0.3])), LN3, rtol=1e-6)


class FixedOutputNet:
    """Returns fixed outputs, the win/draw/loss logits fifth, as learning_apply(network, aux=True) does."""

    def __init__(self, logits, value, wdl):
        self.outputs = (jnp.float32(logits), jnp.float32(value), None, None, jnp.float32(wdl))

    def __call__(self, variables, observation):
        return self.outputs, {"batch_stats": variables["batch_stats"]}


def test_the_loss_takes_the_cross_entropy_in_place_of_the_squared_error():
    batch = replay.Batch(
        observation=jnp.zeros((2, 1)),
        policy=jnp.float32([[1.0, 0.0], [0.0, 1.0]]),
        legal=jnp.ones((2, 2), bool),
        outcome=jnp.float32([1.0, 0.0]),  # a win and a draw
    )
    # policy: equal logits over 2 legal actions, −ln ½ = ln 2 each row; value: the logits (ln 2, 0, 0) of the test
    # above, the win ln 2 and the draw ln 4: mean (ln 2 + ln 4) / 2 = 1.5 ln 2 ≈ 1.039721. The scalar value 0.25
    # (= ½ − ¼) would give the squared errors 0.5625 and 0.0625 instead: not used.
    net = FixedOutputNet(logits=[[0.0, 0.0]] * 2, value=[0.25, 0.25], wdl=[[LN2, 0.0, 0.0]] * 2)
    loss, (_, metrics) = learner.loss_fn({"w": jnp.float32(0.0)}, {}, net, batch, 0.0)
    np.testing.assert_allclose(metrics["value_loss"], 1.5 * LN2, rtol=1e-6)
    np.testing.assert_allclose(loss, 1.5 * LN2 + LN2, rtol=1e-6)  # ≈ 1.732868


def _network(wdl: bool) -> networks.AlphaZeroNet:
    return networks.AlphaZeroNet(num_actions=9, num_blocks=1, channels=8, value_hidden=8, wdl_value=wdl)


def test_the_value_is_p_win_minus_p_loss_and_only_the_last_layer_changes():
    obs = jnp.asarray(np.random.default_rng(0).integers(0, 2, (4, 3, 3, 2)), jnp.float32)
    net = _network(True)
    variables = tiny_variables(net, obs, seed=1)
    logits, value, ownership, score, wdl = net.apply(variables, obs, aux=True)
    p = jax.nn.softmax(wdl)
    np.testing.assert_allclose(value, p[:, 0] - p[:, 2], atol=1e-6)
    assert ownership is None and score is None and wdl.shape == (4, 3)
    np.testing.assert_array_equal(net.apply(variables, obs)[1], value)  # acting reads the same value
    # the tanh network: the same parameter names; the value head's last layer has 1 unit there, 3 here
    plain = tiny_variables(_network(False), obs, seed=1)["params"]
    shapes = lambda params: jax.tree.map(lambda x: x.shape, params)  # noqa: E731
    last = max((k for k in plain if k.startswith("Dense")), key=lambda k: int(k.split("_")[1]))
    assert shapes(plain)[last]["kernel"] == (8, 1) and shapes(variables["params"])[last]["kernel"] == (8, 3)
    assert {k: v for k, v in shapes(plain).items() if k != last} == {
        k: v for k, v in shapes(variables["params"]).items() if k != last
    }
    assert _network(False).apply(tiny_variables(_network(False), obs), obs, aux=True)[4] is None
    made = networks.make_network(dataclasses.replace(Config(game="tic_tac_toe"), value_head="wdl"), 9)
    assert made.wdl_value and not networks.make_network(Config(game="tic_tac_toe"), 9).wdl_value


def test_gradient_steps_learn_the_drawn_share_of_one_position():
    # 16 copies of one position: 4 won, 8 drawn, 4 lost for the mover. The tanh head's best is v = 0, which says
    # nothing of the draws; the win/draw/loss head's best is p = (¼, ½, ¼), the cross-entropy's floor its entropy
    # −(2 · ¼ ln ¼ + ½ ln ½) = 1.5 ln 2 ≈ 1.039721, where it starts at about ln 3 ≈ 1.0986
    net = _network(True)
    obs = jnp.ones((16, 3, 3, 2), jnp.float32)
    batch = replay.Batch(
        observation=obs,
        policy=jnp.full((16, 9), 1 / 9),
        legal=jnp.ones((16, 9), bool),
        outcome=jnp.float32([1.0] * 4 + [0.0] * 8 + [-1.0] * 4),
    )
    variables = tiny_variables(net, obs, seed=2)
    config = dataclasses.replace(Config(), learning_rates=(0.05,), lr_boundaries=(), momentum=0.9)
    optimizer = learner.make_optimizer(config)
    step = jax.jit(
        lambda p, s, o: learner.train_step(
            p,
            s,
            o,
            batch,
            apply_fn=learner.learning_apply(net, aux=True),
            optimizer=optimizer,
            weight_decay=0.0,
            axis_name=None,
        )
    )
    params, stats, opt = variables["params"], variables["batch_stats"], optimizer.init(variables["params"])
    for _ in range(150):
        params, stats, opt, metrics = step(params, stats, opt)
    assert float(metrics["value_loss"]) < 1.5 * LN2 + 0.005
    _, value, _, _, wdl = net.apply({"params": params, "batch_stats": stats}, obs[:1], aux=True)
    np.testing.assert_allclose(jax.nn.softmax(wdl)[0], [0.25, 0.5, 0.25], atol=0.05)
    assert abs(float(value[0])) < 0.05


def test_the_key_is_checked_and_a_resume_cannot_change_it():
    with pytest.raises(config_lib.ConfigError, match="value_head"):
        overrides.override(Config(), ["value_head=softmax"])
    wdl = overrides.override(Config(), ["value_head=wdl"])
    assert wdl.value_head == "wdl" and Config().value_head == "tanh"  # the papers' tanh by default
    with pytest.raises(checkpoint.CheckpointError, match="value_head: saved 'tanh' vs requested 'wdl'"):
        checkpoint.check_compatible(Config(), wdl, "checkpoint 10")


def test_value_head_filters_widen_its_convolution_and_the_hidden_layers_input():
    # The default is AGZ's head: 1×1 conv 4 → 1 filter, its 3·3·1 = 9 outputs into the 8 hidden units.
    default, wide = tiny_head_params(), tiny_head_params(value_head_filters=3)
    # the key's default is the papers' network, value for value
    chex.assert_trees_all_equal(default, tiny_head_params(value_head_filters=1))
    assert (default["Conv_2"]["kernel"].shape, default["Dense_1"]["kernel"].shape) == ((1, 1, 4, 1), (9, 8))
    # 3 filters: kernel 1×1×4×3, the BN's scale and bias 3 each, the hidden layer reads 3·3·3 = 27 inputs
    assert (wide["Conv_2"]["kernel"].shape, wide["BatchNorm_2"]["scale"].shape) == ((1, 1, 4, 3), (3,))
    assert wide["Dense_1"]["kernel"].shape == (27, 8)
    # parameters: +4·2 (kernel) +2·2 (BN scale and bias) +9·2·8 (hidden kernel rows) = 8 + 4 + 144 = 156
    count = lambda params: sum(leaf.size for leaf in jax.tree.leaves(params))
    assert count(wide) - count(default) == 156
