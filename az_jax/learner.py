"""Loss, optimizer, stepped learning-rate schedule and one data-parallel gradient step (AlphaGo Zero, Silver et al.,
Nature 2017, Methods, "Optimisation").

    l = (z − v)² − πᵀ log p + c‖θ‖²

Illegal actions are masked before the softmax, so p and the target π live on the same legal set. Batch norm uses the
batch statistics (synchronised across devices through `axis_name`) while learning; acting uses the running averages.
"""
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from az_jax import replay as replay_lib
from az_jax.search import mask_logits


def make_schedule(config) -> optax.Schedule:
    """Piecewise constant: learning_rates[0] until lr_boundaries[0] steps, then learning_rates[1], …"""
    values = config.learning_rates
    scales = {int(b): values[i + 1] / values[i] for i, b in enumerate(config.lr_boundaries)}
    return optax.piecewise_constant_schedule(values[0], scales)


def make_optimizer(config) -> optax.GradientTransformation:
    """SGD with momentum over the stepped schedule."""
    return optax.sgd(learning_rate=make_schedule(config), momentum=config.momentum)


def current_learning_rate(config, opt_state) -> jax.Array:
    """The learning rate the next gradient step will use (the schedule at the optimizer's step count)."""
    return make_schedule(config)(optax.tree_utils.tree_get(opt_state, "count"))


def loss_fn(params, batch_stats, network: nn.Module, batch: replay_lib.Batch, weight_decay: float):
    """Returns (loss, (new batch_stats, metrics)). Batch arrays are [n, ...]."""
    (logits, value), updates = network.apply({"params": params, "batch_stats": batch_stats}, batch.observation,
                                             train=True, mutable=["batch_stats"])
    log_p = jax.nn.log_softmax(mask_logits(logits, batch.legal))                            # [n, A]
    policy_loss = -jnp.sum(jnp.where(batch.legal, batch.policy * log_p, 0.0), axis=-1).mean()
    value_loss = jnp.mean((batch.outcome - value) ** 2)
    l2 = weight_decay * sum(jnp.sum(jnp.square(p)) for p in jax.tree.leaves(params))
    loss = value_loss + policy_loss + l2
    metrics = {"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss, "l2": l2}
    return loss, (updates["batch_stats"], metrics)


def train_step(params, batch_stats, opt_state, batch: replay_lib.Batch, *, network: nn.Module,
               optimizer: optax.GradientTransformation, weight_decay: float, axis_name: str | None):
    """One SGD step on this device's share of the global batch; gradients averaged over `axis_name`.

    Returns (params, batch_stats, opt_state, metrics), identical on every device.

    Inside `jax.shard_map` this must run with `check_vma=False` (as az_jax.iteration does): there the gradient of
    the replicated parameters is this device's own, and `pmean` averages it. With `check_vma=True` autodiff already
    sums gradients of replicated values over the axis, and the `pmean` would leave D× the mean."""
    grads, (batch_stats, metrics) = jax.grad(loss_fn, has_aux=True)(params, batch_stats, network, batch,
                                                                    weight_decay)
    if axis_name is not None:
        grads = jax.lax.pmean(grads, axis_name)
        metrics = jax.lax.pmean(metrics, axis_name)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), batch_stats, opt_state, metrics
