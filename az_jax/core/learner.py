"""Loss, optimizer, stepped learning-rate schedule and one data-parallel gradient step (AlphaGo Zero, Silver et al.,
Nature 2017, Methods, "Optimisation").

    l = (z − v)² − πᵀ log p + c‖θ‖²

plus, with KataGo's auxiliary targets (Wu, "Accelerating Self-Play Learning in Go", 2019, section "Auxiliary Ownership
and Score Targets"), w_o times the ownership cross-entropy averaged over the board's points and w_s times the squared
error of the scaled score margin (Config.aux_ownership_weight, aux_score_weight). With a win/draw/loss value head
(Config.value_head = "wdl") the (z − v)² term is the cross-entropy of its three logits to z as a distribution.

Illegal actions are masked before the softmax, so p and the target π live on the same legal set. Batch norm uses the
batch statistics (synchronised across devices through `axis_name`) while learning; acting uses the running averages.
"""

import functools
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from az_jax.core import replay as replay_lib
from az_jax.core.config import Config
from az_jax.core.search import mask_logits

# (variables, observation [n, ...]) -> ((logits [n, A], value [n]), {"batch_stats": new statistics}); with the
# auxiliary heads the outputs are (logits, value, ownership logits [n, H·W] or None, score [n] or None, win/draw/loss
# logits [n, 3] or None)
LearnApplyFn = Callable[[dict, jax.Array], tuple[tuple, dict]]


def learning_apply(network: nn.Module, aux: bool = False) -> LearnApplyFn:
    """The network as the learner runs it: batch statistics, and the running averages returned as an update; with
    `aux` its auxiliary heads' outputs too (networks.AlphaZeroNet)."""
    if aux:
        return functools.partial(network.apply, train=True, aux=True, mutable=["batch_stats"])  # type: ignore[return-value]
    return functools.partial(network.apply, train=True, mutable=["batch_stats"])  # type: ignore[return-value]


def make_schedule(learning_rates: Sequence[float] | jax.Array, boundaries: Sequence[int]) -> optax.Schedule:
    """Stepped: learning_rates[0] until boundaries[0] steps, then learning_rates[1], … (AlphaGo Zero, Methods,
    "Optimisation"). The values may be data (a [K] array, traced inside a population's program); the boundaries are
    static."""
    values = [optax.constant_schedule(learning_rates[i]) for i in range(len(boundaries) + 1)]
    return optax.join_schedules(values, [int(b) for b in boundaries])


def make_optimizer(
    config: Config, learning_rates: Sequence[float] | jax.Array | None = None
) -> optax.GradientTransformation:
    """SGD with momentum over the stepped schedule of `learning_rates` (default: the config's)."""
    values = config.learning_rates if learning_rates is None else learning_rates
    return optax.sgd(learning_rate=make_schedule(values, config.lr_boundaries), momentum=config.momentum)


def step_count(opt_state) -> jax.Array:
    """[] int32: the gradient steps taken so far, as the optimizer's schedule counts them."""
    return optax.tree_utils.tree_get(opt_state, "count")


def current_learning_rate(
    config: Config, opt_state, learning_rates: Sequence[float] | jax.Array | None = None
) -> jax.Array:
    """The learning rate the next gradient step will use (the schedule at the optimizer's step count)."""
    values = config.learning_rates if learning_rates is None else learning_rates
    return make_schedule(values, config.lr_boundaries)(step_count(opt_state))


def value_target_mix(config: Config, opt_state) -> float | jax.Array:
    """λ of the value target (1 − λ)·z + λ·v_search for the next gradient step: `value_target_mix`, or from the first
    rate step on (the optimizer's count at lr_boundaries[0]) `value_target_mix_after_rate_step` where that is set."""
    if config.value_target_mix_after_rate_step in (-1.0, config.value_target_mix):  # one λ throughout
        return config.value_target_mix
    after_step = step_count(opt_state) >= config.lr_boundaries[0]
    return jnp.where(after_step, config.value_target_mix_after_rate_step, config.value_target_mix).astype(jnp.float32)


def loss_fn(
    params,
    batch_stats,
    apply_fn: LearnApplyFn,
    batch: replay_lib.Batch,
    weight_decay: float,
    ownership_weight: float = 0.0,
    score_weight: float = 0.0,
):
    """Returns (loss, (new batch_stats, metrics)). Batch arrays are [n, ...]. With `ownership_weight` or
    `score_weight` > 0, `apply_fn` returns the auxiliary heads (learning_apply(network, aux=True)), the batch carries
    their targets, and the metrics add the unweighted "ownership_loss" and "score_loss" of the terms that are on.
    With a win/draw/loss value head (its logits the outputs' fifth) the value loss is wdl_loss, else the squared
    error; with `batch.value_weight` (Config.mask_random_opening_values) the mean over the positions of weight 1."""
    outputs, updates = apply_fn({"params": params, "batch_stats": batch_stats}, batch.observation)
    logits, value = outputs[:2]
    log_p = jax.nn.log_softmax(mask_logits(logits, batch.legal))  # [n, A]
    policy_loss = -jnp.sum(jnp.where(batch.legal, batch.policy * log_p, 0.0), axis=-1).mean()
    wdl = outputs[4] if len(outputs) > 4 else None  # the win/draw/loss head's logits [n, 3] (Config.value_head)
    errors = (batch.outcome - value) ** 2 if wdl is None else wdl_loss(wdl, batch.outcome)  # [n]
    value_loss = weighted_mean(errors, batch.value_weight)
    l2 = weight_decay * sum(jnp.sum(jnp.square(p)) for p in jax.tree.leaves(params))
    loss = value_loss + policy_loss + l2
    metrics = {"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss, "l2": l2}
    if ownership_weight or score_weight:
        ownership_loss, score_loss = aux_losses(outputs[2], outputs[3], batch, ownership_weight, score_weight)
        loss = loss + ownership_weight * ownership_loss + score_weight * score_loss
        metrics["loss"] = loss
        metrics.update({"ownership_loss": ownership_loss} if ownership_weight else {})
        metrics.update({"score_loss": score_loss} if score_weight else {})
    return loss, (updates["batch_stats"], metrics)


def wdl_target(outcome: jax.Array) -> jax.Array:
    """[n] value targets t ∈ [−1, 1] → [n, 3] distributions over the mover's (win, draw, loss) whose mean value
    P(win) − P(loss) is t: (max(t, 0), 1 − |t|, max(−t, 0)), so z = 1 / 0 / −1 is one class and a mixed target lies
    between the two nearest (MuZero's projection onto a categorical support, Schrittwieser et al. 2020, Appendix F)."""
    return jnp.stack([jnp.maximum(outcome, 0.0), 1.0 - jnp.abs(outcome), jnp.maximum(-outcome, 0.0)], axis=-1)


def wdl_loss(logits: jax.Array, outcome: jax.Array) -> jax.Array:
    """[n] the cross-entropy of each position's win/draw/loss logits [n, 3] to wdl_target(outcome [n])."""
    return optax.softmax_cross_entropy(logits, wdl_target(outcome))


def weighted_mean(x: jax.Array, weight: jax.Array | None) -> jax.Array:
    """[] the mean of x [n]; with `weight` [n] Σ weight·x / Σ weight, 0 when every weight is 0."""
    if weight is None:
        return x.mean()
    return jnp.sum(weight * x) / jnp.maximum(jnp.sum(weight), 1.0)


def aux_losses(
    ownership_logit: jax.Array | None,
    score: jax.Array | None,
    batch: replay_lib.Batch,
    ownership_weight: float,
    score_weight: float,
) -> tuple[jax.Array, jax.Array]:
    """KataGo's auxiliary losses (Wu 2019, "Auxiliary Ownership and Score Targets"), unweighted, each 0 when its
    weight is 0:

    ownership: −mean over points of [(1 + o)/2 · log((1 + ô)/2) + (1 − o)/2 · log((1 − ô)/2)], ô = tanh(logit), so
    (1 ± ô)/2 = sigmoid(±2·logit) (computed as log_sigmoid, stable where ô → ±1); KataGo sums over the b² points with
    weight 1.5/b², i.e. weight 1.5 on this mean. Its minimum is 0 where o = ±1 and log 2 where o = 0 (a neutral point).
    score: (ŝ − margin / (H·W))², the margin in points scaled by the board's points.
    Each is a mean over the batch's positions; where `batch.aux_weight` is given (resignation on), over the positions
    whose game was scored (weight 1), 0 when none was: a resigned game has no final position to learn from."""
    zero = jnp.float32(0.0)
    ownership_loss = score_loss = zero
    weight = batch.aux_weight  # [n] or None
    mean = lambda x: weighted_mean(x, weight)
    if ownership_weight:
        assert ownership_logit is not None and batch.ownership is not None
        target = (1.0 + batch.ownership) / 2.0  # [n, H·W] probability the mover owns the point
        mine, theirs = jax.nn.log_sigmoid(2.0 * ownership_logit), jax.nn.log_sigmoid(-2.0 * ownership_logit)
        ownership_loss = mean(-(target * mine + (1.0 - target) * theirs).mean(axis=-1))
    if score_weight:
        assert score is not None and batch.score is not None
        points = batch.observation.shape[1] * batch.observation.shape[2]
        score_loss = mean((score - batch.score / points) ** 2)
    return ownership_loss, score_loss


def train_step(
    params,
    batch_stats,
    opt_state,
    batch: replay_lib.Batch,
    *,
    apply_fn: LearnApplyFn,
    optimizer: optax.GradientTransformation,
    weight_decay: float,
    axis_name: str | None,
    ownership_weight: float = 0.0,
    score_weight: float = 0.0,
    micro_batches: int = 1,
):
    """One SGD step on this device's share of the global batch; gradients averaged over `axis_name`. With
    `micro_batches` k > 1 the share is learned in k equal parts one after the other and their gradients averaged
    before the one update (`accumulate`): the learner's activations are those of one part.

    Returns (params, batch_stats, opt_state, metrics), identical on every device; the metrics are loss_fn's and
    "grad_norm", the global norm of the averaged gradient. Inside a sharded program this relies on
    az_jax/core/devices.py's `check_vma=False` (the gradient of replicated parameters is this device's own, and `pmean`
    averages it)."""
    grad_fn = functools.partial(
        gradient,
        apply_fn=apply_fn,
        weight_decay=weight_decay,
        ownership_weight=ownership_weight,
        score_weight=score_weight,
    )
    if micro_batches == 1:
        grads, (batch_stats, metrics) = grad_fn(params, batch_stats, batch)
    else:
        grads, (batch_stats, metrics) = accumulate(grad_fn, params, batch_stats, batch, micro_batches)
    if axis_name is not None:
        grads = jax.lax.pmean(grads, axis_name)
        metrics = jax.lax.pmean(metrics, axis_name)
    metrics = {**metrics, "grad_norm": optax.tree.norm(grads)}
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), batch_stats, opt_state, metrics


def gradient(
    params,
    batch_stats,
    batch: replay_lib.Batch,
    *,
    apply_fn: LearnApplyFn,
    weight_decay: float,
    ownership_weight: float = 0.0,
    score_weight: float = 0.0,
):
    """(gradient of loss_fn in params, (new batch_stats, metrics)) on one batch."""
    return jax.grad(loss_fn, has_aux=True)(
        params, batch_stats, apply_fn, batch, weight_decay, ownership_weight, score_weight
    )


def accumulate(grad_fn: Callable, params, batch_stats, batch: replay_lib.Batch, micro_batches: int):
    """`grad_fn(params, batch_stats, part)`'s outputs averaged over `micro_batches` equal consecutive parts of `batch`
    [n, ...], computed one part after another (a scan), so only one part's activations are alive at a time.

    Every loss term is a mean over positions (or, the L2 term, the same for every part), so the mean of the parts'
    gradients is the gradient of the whole batch's loss — except through batch norm, whose statistics are each
    part's own (synchronised across devices), not the whole batch's. The running averages are the mean of those each
    part would leave from the same start: for the means exactly the one-batch update (the mean of equal parts' means
    is the batch's mean), for the variances the mean of the parts' variances."""
    parts = jax.tree.map(lambda x: x.reshape((micro_batches, x.shape[0] // micro_batches) + x.shape[1:]), batch)

    def add(total, part):
        out = grad_fn(params, batch_stats, part)
        return jax.tree.map(jnp.add, total, out), None

    zeros = jax.tree.map(
        lambda x: jnp.zeros(x.shape, x.dtype),
        jax.eval_shape(grad_fn, params, batch_stats, jax.tree.map(lambda x: x[0], parts)),
    )
    total, _ = jax.lax.scan(add, zeros, parts)
    return jax.tree.map(lambda x: x / micro_batches, total)


def all_finite(tree) -> jax.Array:
    """[] bool: no NaN or ±inf in any floating-point leaf of `tree` (integer leaves, e.g. step counts, are skipped)."""
    checks = [jnp.isfinite(x).all() for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return jnp.stack(checks).all() if checks else jnp.bool_(True)
