"""Training of AlphaGo's linear pattern policies, the rollout policy p_π (rollout_policy.py) and the tree policy p_τ
(tree_policy.py), through the stages' one loop (stage_loop.py): the log-likelihood of the expert moves maximised by
SGD from zero weights (Silver et al., Nature 2016, Methods, "Rollout policy").

A run directory, as p_σ's and v_θ's:

    RUN_DIR/config.json      the TrainConfig and the data path; a resumed run must bring the same config
    RUN_DIR/vocabulary.npz   the policy with its vocabularies and zero weights, in the family's own file format;
                             written once, before the first step
    RUN_DIR/metrics.jsonl    a line each `eval_every` steps: the training loss and accuracy since the last line (the
                             minibatches'), the held-out accuracy, positions per second
    RUN_DIR/checkpoints/     the weights and step (orbax); the loop's resume, divergence stop and damaged-checkpoint
                             handling

    policy, report = train(TrainConfig(steps=6000), train_set, test_set, "runs/p_pi", rollout_policy.ROLLOUT)
    rollout_policy.save("rollout.npz", policy, report)

Memory holds the features of at most `buffer` positions (~12 KB each on 19×19; the sets may be memory maps,
dataset.load_split): the vocabularies come from one pass over the training rows, `buffer` positions at a time,
keeping only the expert moves' codes. Each step then draws its minibatch from every training row (stage_loop: step
t's rows from np.random.default_rng([seed, t])). A set of at most `buffer` positions is *resident*: its active
features are computed once and held on the device, where each step gathers its minibatch (p_π's: ~1.7 KB a 9×9
position, ~7.6 KB a 19×19 one); a larger set's minibatches are gathered on the host and their features computed in the
jitted step. Both take the same steps on the same features.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from az_jax.alphago import checkpoints, stage_loop
from az_jax.alphago.dataset import Positions
from az_jax.alphago.position import Position
from az_jax.alphago.rollout_policy import ROLLOUT, Family, encode_all
from az_jax.runtime.files import read_jsonl

VOCABULARY_FILE = "vocabulary.npz"
WHAT = "a pattern policy run"


class PatternTrainingError(RuntimeError):
    """A run directory that does not fit the command (another config, a damaged file), or a diverged run."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    steps: int = 2000
    batch_size: int = 256
    learning_rate: float = 1.0  # on the mean log-likelihood of a batch; features are sparse, so a large step
    min_count: int = 2  # a pattern enters a vocabulary when seen this often as an expert move's pattern
    max_train: int = 0  # 0: every training position; else a random subsample of this many
    max_test: int = 0
    seed: int = 0
    buffer: int = 65_536  # positions encoded at once for the vocabularies (~12 KB each on 19×19, 0.8 GB)
    eval_every: int = 1000
    checkpoint_every: int = 1000

    def __post_init__(self):
        checks = {
            "steps": self.steps >= 1,
            "batch_size": self.batch_size >= 1,
            "learning_rate": self.learning_rate > 0 and math.isfinite(self.learning_rate),
            "min_count": self.min_count >= 1,
            "max_train": self.max_train >= 0,
            "max_test": self.max_test >= 0,
            "buffer": self.buffer >= 1,
            "eval_every": self.eval_every >= 1,
            "checkpoint_every": self.checkpoint_every >= 1,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"TrainConfig: invalid {bad[0]}={getattr(self, bad[0])!r}")


@dataclasses.dataclass(frozen=True)
class PatternState:
    params: jax.Array  # [F] float32: the policy's weights
    opt_state: optax.OptState
    step: jax.Array  # [] int32


jax.tree_util.register_dataclass(PatternState, data_fields=["params", "opt_state", "step"], meta_fields=[])


def optimizer(config: TrainConfig) -> optax.GradientTransformation:
    return optax.sgd(config.learning_rate)  # plain SGD at a constant step, as the rollout policy's training


def loss_and_accuracy(
    weights: jax.Array, idx: Any, actions: jax.Array, family: Family
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Mean −log p(a | s) of the expert moves `actions` [B] that the features call legal, the share of all that the
    argmax predicts, and the share called illegal. A move the features' rules refuse (a suicide, which some rule sets
    allow; features.py does not check superko, so nothing else) has p = 0: it is left out of the loss, which it would
    make infinite, and counted."""
    scores = family.scores(weights, idx)
    log_p = jnp.take_along_axis(jax.nn.log_softmax(scores, -1), actions[:, None], -1)[:, 0]
    legal = jnp.isfinite(log_p)
    loss = -jnp.where(legal, log_p, 0.0).sum() / jnp.maximum(legal.sum(), 1)
    return loss, ((jnp.argmax(scores, -1) == actions).mean(), 1.0 - legal.mean())


def _sgd(state: PatternState, idx: Any, action: jax.Array, family: Family, config: TrainConfig):
    """One SGD step on a minibatch's active features `idx` [B, P, ...] and expert moves `action` [B]."""
    grad_fn = jax.value_and_grad(loss_and_accuracy, has_aux=True)
    (loss, (accuracy, illegal)), grads = grad_fn(state.params, idx, action, family)
    updates, opt_state = optimizer(config).update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": loss, "accuracy": accuracy, "illegal": illegal}
    return PatternState(params=params, opt_state=opt_state, step=state.step + 1), metrics


@functools.partial(jax.jit, static_argnames=("family", "config"), donate_argnums=1)
def _train_step(policy: Any, state: PatternState, position: Position, action: jax.Array, family: Family, config):
    """A step on a minibatch of positions [B]: their features computed here and looked up in `policy`'s
    vocabularies (its weights are `state.params`)."""
    return _sgd(state, family.indices(policy, family.encode(position)), action, family, config)


@functools.partial(jax.jit, static_argnames=("family", "config"), donate_argnums=0)
def _resident_step(state: PatternState, every_idx: Any, every_action: jax.Array, rows: jax.Array, family, config):
    """A step on the minibatch at `rows` [B] of a set whose active features `every_idx` [M, P, ...] and expert moves
    `every_action` [M] are held on the device: gathered here."""
    idx = jax.tree.map(lambda x: x[rows], every_idx)
    return _sgd(state, idx, every_action[rows], family, config)


@functools.partial(jax.jit, static_argnames="family")
def _correct(policy: Any, position: Position, action: jax.Array, weight: jax.Array, family: Family) -> jax.Array:
    scores = family.scores(policy.weights, family.indices(policy, family.encode(position)))
    return ((jnp.argmax(scores, -1) == action) * weight).sum()


def held_out_accuracy(policy: Any, family: Family, positions: Positions, rows: np.ndarray, chunk: int = 512) -> float:
    """Share of the positions at `rows` whose expert move is the policy's argmax, `chunk` positions at a time (the
    last padded, so one program is compiled)."""
    counts = []  # on the device, read back once (a count up to 2^24 is exact in float32)
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        padded = np.concatenate([part, np.repeat(part[-1:], chunk - len(part))])
        taken = positions.take(padded)
        weight = (np.arange(chunk) < len(part)).astype(np.float32)
        counts.append(_correct(policy, taken.position, taken.action, weight, family))
    return float(sum(jax.device_get(counts))) / max(len(rows), 1)


def _rows(m: int, limit: int, rng: np.random.Generator) -> np.ndarray:
    """The rows used of a set of m, sorted: all, or a random `limit` of them when 0 < limit < m."""
    return np.sort(rng.permutation(m)[:limit]) if 0 < limit < m else np.arange(m)


def _expert(encoded: Any, actions: np.ndarray) -> Any:
    """The features of the expert moves only: every leaf [M, P, ...] gathered at `actions` [M] to [M, 1, ...], so a
    family's `init` reads them at action 0 (a few bytes a position instead of ~12 KB)."""
    rows = np.arange(len(actions))
    return jax.tree.map(lambda x: np.asarray(x)[rows, actions][:, None], encoded)


def build_vocabularies(
    family: Family, positions: Positions, rows: np.ndarray, config: TrainConfig
) -> tuple[Any, dict[str, int]]:
    """The policy with the vocabularies of the expert moves at `rows` and zero weights, from one pass over them,
    `config.buffer` positions at a time; and the report's vocabulary sizes and buffer count."""
    chunks = np.array_split(rows, max(1, -(-len(rows) // config.buffer)))
    experts = []
    for chunk in chunks:
        part = positions.take(chunk)
        experts.append(_expert(encode_all(part.position, family=family), part.action))
    expert = jax.tree.map(lambda *xs: np.concatenate(xs), *experts)
    policy, sizes = family.init(expert, np.zeros(len(rows), np.int32), config.min_count)
    return policy, {**sizes, "buffers": len(chunks)}


def _vocabularies(
    run_dir: str, family: Family, positions: Positions, rows: np.ndarray, config: TrainConfig
) -> tuple[Any, dict[str, int]]:
    """RUN_DIR/vocabulary.npz's policy and sizes, built and written (atomically) when the run has none yet."""
    path = os.path.join(run_dir, VOCABULARY_FILE)
    if not os.path.exists(path):
        policy, sizes = build_vocabularies(family, positions, rows, config)
        family.save(path, policy, sizes)
        return policy, sizes
    try:
        policy = family.load(path)
        with np.load(path, allow_pickle=False) as f:
            sizes = json.loads(str(f["report"]))
    except Exception as e:  # the family's one-line error, or a report that is not JSON
        raise PatternTrainingError(f"{run_dir}: {VOCABULARY_FILE} cannot be read ({e})") from None
    return policy, sizes


def train(
    config: TrainConfig,
    train_positions: Positions,
    test_positions: Positions,
    run_dir: str,
    family: Family = ROLLOUT,
    data_path: str = "",
    log: Callable[[dict], None] = print,
) -> tuple[Any, dict[str, Any]]:
    """Trains (or resumes) the pattern policy of `family` (p_π: rollout_policy.ROLLOUT, p_τ: tree_policy.TREE) in
    `run_dir` to config.steps steps; returns the trained policy and a report: positions used, vocabulary sizes,
    buffers, the last line's training loss and accuracy, held-out accuracy, seconds (vocabularies, training)."""
    if len(train_positions) == 0 or len(test_positions) == 0:
        raise PatternTrainingError("the training and held-out sets must both hold positions")
    checkpoints.write_config(run_dir, config, data_path, PatternTrainingError, WHAT)
    rng = np.random.default_rng(config.seed)
    train_rows = _rows(len(train_positions), config.max_train, rng)
    test_rows = _rows(len(test_positions), config.max_test, rng)
    start = time.perf_counter()
    initial, sizes = _vocabularies(run_dir, family, train_positions, train_rows, config)
    vocabularies_at = time.perf_counter()

    def init_state() -> PatternState:
        return PatternState(initial.weights, optimizer(config).init(initial.weights), jnp.int32(0))

    def line(params: jax.Array, step: int, pending: list[dict], seconds: float) -> dict:
        means = np.mean([[float(m[k]) for k in ("loss", "accuracy", "illegal")] for m in pending], axis=0)
        policy = initial.replace(weights=params)
        return {
            "step": step,
            "train_loss": float(means[0]),
            "train_accuracy": float(means[1]),
            "illegal_expert_moves": float(means[2]),  # the share the loss left out (loss_and_accuracy)
            "test_accuracy": held_out_accuracy(policy, family, test_positions, test_rows),
            "positions_per_second": len(pending) * min(config.batch_size, len(train_rows)) / seconds,
        }

    train_step: Callable[..., tuple[PatternState, dict]]
    batch: Callable[[np.ndarray], tuple]
    resident = len(train_rows) <= config.buffer
    if resident:  # the set's active features computed once and held on the device; minibatches gathered there
        part = train_positions.take(train_rows)
        every_idx = jax.jit(family.indices)(initial, encode_all(part.position, family=family))
        every_action = jax.device_put(part.action)
        train_step = lambda state, key, rows: _resident_step(  # noqa: E731
            state, every_idx, every_action, rows, family, config
        )
        batch = lambda rows: (jax.device_put(rows.astype(np.int32)),)  # noqa: E731
    else:  # each minibatch's features computed in its step
        train_step = lambda state, key, position, action: _train_step(  # noqa: E731
            initial, state, position, action, family, config
        )

        def batch(rows: np.ndarray) -> tuple[Position, jax.Array]:
            taken = train_positions.take(train_rows[rows])
            return jax.device_put(taken.position), jax.device_put(taken.action)

    stage = stage_loop.Stage(
        what=WHAT,
        error=PatternTrainingError,
        steps=config.steps,
        eval_every=config.eval_every,
        checkpoint_every=config.checkpoint_every,
        seed=config.seed,
        rows=len(train_rows),
        batch_size=min(config.batch_size, len(train_rows)),
        init_state=init_state,
        place=jax.device_put,
        train_step=train_step,
        batch=batch,
        line=line,
    )
    # {}: the run was already done, and its last line is the file's
    last = stage_loop.train(stage, run_dir, log) or read_jsonl(os.path.join(run_dir, "metrics.jsonl"))[-1]
    manager = checkpoints.manager(run_dir)
    step = checkpoints.step_or_latest(manager, run_dir, None, PatternTrainingError)
    weights = checkpoints.restore_state(manager, run_dir, step, init_state(), PatternTrainingError).params
    policy = initial.replace(weights=jnp.asarray(weights))
    report = {
        "train_positions": len(train_rows),
        "test_positions": len(test_rows),
        **sizes,
        "num_features": int(initial.weights.shape[0]),
        "steps": config.steps,
        "batch_size": stage.batch_size,
        "learning_rate": config.learning_rate,
        "resident": resident,
        "final_loss": round(last["train_loss"], 4),
        "train_accuracy": round(last["train_accuracy"], 4),
        "test_accuracy": round(last["test_accuracy"], 4),
        "seconds_vocabularies": round(vocabularies_at - start, 1),
        "seconds_training": round(time.perf_counter() - vocabularies_at, 1),
    }
    return policy, report
