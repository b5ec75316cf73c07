"""The learner: l = (z − v)² − πᵀ log p + c‖θ‖² checked by hand, the stepped learning-rate schedule, momentum, and a
tiny overfitting run with a real threshold."""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from az_jax.core import learner, replay
from az_jax.core.config import Config

from conftest import random_batch, tiny_network, tiny_variables


class FixedOutputNet:
    """Stands in for the learning network: returns fixed (logits, value) whatever the parameters, with the batch
    statistics as an update, like `learner.learning_apply(network)` does."""

    def __init__(self, logits, value):
        self.logits, self.value = jnp.float32(logits), jnp.float32(value)

    def __call__(self, variables, observation):
        assert observation.shape[0] == self.logits.shape[0]
        return (self.logits, self.value), {"batch_stats": variables["batch_stats"]}


LN2, LN3, LN5 = math.log(2.0), math.log(3.0), math.log(5.0)
HAND_BATCH = replay.Batch(
    observation=jnp.zeros((2, 1)),
    policy=jnp.float32([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]),  # π
    legal=jnp.bool_([[True, True, False], [True, True, True]]),
    outcome=jnp.float32([-1.0, 1.0]),
)  # z
HAND_NET = FixedOutputNet(logits=[[0.0, 0.0, LN2], [0.0, LN3, 0.0]], value=[0.5, -0.25])


def test_loss_matches_hand_computation():
    params = {"w": jnp.float32([1.0, 2.0])}
    loss, (batch_stats, metrics) = learner.loss_fn(params, {"mean": jnp.zeros(1)}, HAND_NET, HAND_BATCH, 1e-4)
    # Policy, row 0: action 2 is illegal, so its logit ln 2 is masked out and p = softmax([0, 0]) = [1/2, 1/2] over
    #   the legal actions; π = [1, 0, 0] -> −ln(1/2) = ln 2 ≈ 0.693147.
    # Policy, row 1: all legal, p = [1, 3, 1] / 5; π = [1/2, 1/2, 0] -> −(½ ln(1/5) + ½ ln(3/5)) = ln 5 − ½ ln 3
    #   ≈ 1.609438 − 0.549306 = 1.060132.
    policy = (LN2 + (LN5 - 0.5 * LN3)) / 2  # mean ≈ 0.876640
    # Value: row 0 (z − v)² = (−1 − 0.5)² = 2.25; row 1 (1 − (−0.25))² = 1.5625 -> mean 1.90625.
    value = (2.25 + 1.5625) / 2
    # L2: c·Σθ² = 1e-4 · (1² + 2²) = 5e-4.
    l2 = 5e-4
    np.testing.assert_allclose(metrics["policy_loss"], policy, rtol=1e-6)
    np.testing.assert_allclose(metrics["value_loss"], value, rtol=1e-6)
    np.testing.assert_allclose(metrics["l2"], l2, rtol=1e-6)
    np.testing.assert_allclose(loss, value + policy + l2, rtol=1e-6)  # ≈ 2.783390
    np.testing.assert_allclose(loss, 2.783390, rtol=1e-6)
    np.testing.assert_array_equal(batch_stats["mean"], 0.0)


def test_loss_gradient_of_the_l2_term():
    # The fixed network ignores θ, so ∂l/∂θ is the L2 term's alone: ∂(c Σθ²)/∂θ = 2cθ = 2e-4 · [1, 2] = [2e-4, 4e-4].
    params = {"w": jnp.float32([1.0, 2.0])}
    grads, _ = jax.grad(learner.loss_fn, has_aux=True)(params, {}, HAND_NET, HAND_BATCH, 1e-4)
    np.testing.assert_allclose(grads["w"], [2e-4, 4e-4], rtol=1e-6)


def _updates(config, num_steps):
    """The SGD updates for gradient 1 at step counts 0..num_steps-1 of make_optimizer(config)."""
    optimizer = learner.make_optimizer(config)
    params = jnp.zeros(())
    state = optimizer.init(params)
    out = []
    for _ in range(num_steps):
        updates, state = optimizer.update(jnp.ones(()), state, params)
        out.append(float(updates))
    return out


def test_stepped_learning_rate_schedule():
    config = dataclasses.replace(Config(), learning_rates=(0.2, 0.02, 0.002), lr_boundaries=(2, 4), momentum=0.0)
    # learning_rates[i] applies from step lr_boundaries[i-1] on: steps 0, 1 -> 0.2; 2, 3 -> 0.02; 4 -> 0.002.
    # Plain SGD with gradient 1: update = −lr.
    np.testing.assert_allclose(_updates(config, 5), [-0.2, -0.2, -0.02, -0.02, -0.002], rtol=1e-5)


def test_momentum_is_applied():
    config = dataclasses.replace(Config(), learning_rates=(0.2,), lr_boundaries=(), momentum=0.9)
    # Heavy ball with gradient 1: m1 = 1, m2 = 1 + 0.9·1 = 1.9, m3 = 1 + 0.9·1.9 = 2.71; update = −0.2·m.
    np.testing.assert_allclose(_updates(config, 3), [-0.2, -0.38, -0.542], rtol=1e-5)


def test_train_step_overfits_a_tiny_batch():
    # 16 random tic-tac-toe-shaped positions, each with a one-hot π on a random legal move and a random z = ±1, so a
    # perfect fit has loss ≈ 0 (plus L2). At the start the loss is ≈ (z − v)² ≈ 1 plus −log p ≈ ln(#legal) ≈ 1.7.
    # 30 SGD steps of the tiny real network must bring it under 0.25 (it reaches ≈ 0.02).
    batch = random_batch(np.random.default_rng(0), n=16, num_actions=9, one_hot_policy=True)
    network = tiny_network(9)
    variables = tiny_variables(network, batch.observation.astype(jnp.float32))
    config = dataclasses.replace(Config(), learning_rates=(0.1,), lr_boundaries=(), momentum=0.9)
    optimizer = learner.make_optimizer(config)

    step = jax.jit(
        functools.partial(
            learner.train_step,
            apply_fn=learner.learning_apply(network),
            optimizer=optimizer,
            weight_decay=1e-4,
            axis_name=None,
        )
    )
    params, batch_stats = variables["params"], variables["batch_stats"]
    opt_state = optimizer.init(params)
    losses = []
    for _ in range(30):
        params, batch_stats, opt_state, metrics = step(params, batch_stats, opt_state, batch)
        losses.append(float(metrics["loss"]))
    losses = np.array(losses)
    assert np.isfinite(losses).all()
    assert losses[0] > 2.0 and losses[-1] < 0.25, losses
