"""Training the value network v_θ (Silver et al., Nature 2016, Methods, "Reinforcement learning of value networks"),
and Fig. 2b's comparison of position evaluators by move number.

v_θ(s) regresses the outcome z (±1 for the player to move at s) by SGD on mini-batches of m positions:
Δθ = (α / m) Σ_k (z^k − v_θ(s^k)) ∂v_θ(s^k)/∂θ, which is plain SGD on the loss ½ · mean_k (z^k − v_θ(s^k))² (what
`loss` minimises). The reported `train_mse` / `test_mse` are mean (z − v)², without the ½. (Fig. 2b of the paper
starts near 0.5 at the first moves, where no evaluator can know the winner and v ≈ 0 gives mean (z − v)² ≈ 1: the
paper's "MSE" is most likely the ½ · mean of its loss; halve ours before comparing with 0.226 / 0.234.)

What is the paper's and what is chosen here (all in `ValueConfig`, each meant as an option of the CLI stage):
- m = 32 (the paper's mini-batch) is the default `batch_size`; the paper does not give α for v_θ: the default is
  the SL network's α = 0.003, halved like SLConfig's (every steps · 80 / 340 steps unless `halve_every`).
- The paper trained 50 million mini-batches in a week on 50 GPUs; `steps` is whatever the budget allows.
- Network: `networks.ValueNetwork` (49 planes: the 48 of the policy network and the player's colour), `filters` k
  and `layers` (the paper's 192 and 13), `hidden` = 256. `planes` may be 48 (no colour plane) or fewer for
  ablations.
- Augmentation: one of the 8 symmetries per position (the value is invariant, so only the planes are transformed).

Run directory (as supervised.py's): config.json, metrics.jsonl (step, learning rate, train MSE since the last line,
held-out MSE, positions per second), checkpoints/ (orbax). `train` resumes from the latest checkpoint;
`restore_params(run_dir, step)` gives (config, params, step).

Fig. 2b at small scale:
    values = predict(config, params, positions.position)                    # v_θ of stored positions
    table = mse_by_move(value_fn(config, params), positions.position, positions.outcome, positions.move_number,
                        bins=[1, 11, 21, 41, 61, 81, 102])
    states = value_data.replay_states(positions.moves, 9)                    # pgx states of the same positions
    table = mse_by_move(rollout_evaluator(sampling_policy(sl_config, sl_params), key, k=16), states, ...)
`rollout_values(policy_apply, states, key, k)` plays each state to the end k times with any policy
`(states, key) -> actions` (p_σ / p_ρ sampling now, the rollout policy p_π later) and averages z.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pgx
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from jax.tree_util import Partial

from az_jax.alphago import checkpoints, stage_loop, value_data
from az_jax.alphago import features as features_lib
from az_jax.alphago.networks import PolicyNetwork, ValueNetwork
from az_jax.alphago.policy_player import policy_actions
from az_jax.alphago.position import Position
from az_jax.core import devices
from az_jax.core.rows import where_rows
from envs import symmetries

PAPER_HALVING_FRACTION = 80 / 340  # as the SL network: α halved every 80 M of 340 M steps


class ValueRunError(RuntimeError):
    """A value-network run directory that does not fit the command (missing, another config, damaged checkpoint)."""


@dataclasses.dataclass(frozen=True)
class ValueConfig:
    size: int  # board size N (9 or 19)
    filters: int = 192  # k
    layers: int = 13  # convolutional layers (then the 256-unit and the tanh layers)
    hidden: int = 256
    planes: int = features_lib.NUM_VALUE_PLANES  # 49: the policy's 48 and the player's colour
    batch_size: int = 32  # m (the paper's)
    learning_rate: float = 0.003  # α (not given for v_θ: the SL network's)
    steps: int = 10_000
    halve_every: int = 0  # 0: steps · 80 / 340
    symmetries: bool = True  # augment each position with one of the 8 symmetries
    eval_every: int = 500
    checkpoint_every: int = 1000
    seed: int = 0

    def __post_init__(self):
        checks = {
            "size": self.size in (9, 19),
            "filters": self.filters >= 1,
            "layers": self.layers >= 2,
            "hidden": self.hidden >= 1,
            "planes": self.planes in features_lib.PLANE_COUNTS,
            "batch_size": self.batch_size >= 1,
            "learning_rate": self.learning_rate > 0 and math.isfinite(self.learning_rate),
            "steps": self.steps >= 1,
            "halve_every": self.halve_every >= 0,
            "symmetries": isinstance(self.symmetries, bool),
            "eval_every": self.eval_every >= 1,
            "checkpoint_every": self.checkpoint_every >= 1,
            "seed": 0 <= self.seed < 2**31,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            k = bad[0]
            raise ValueError(f"ValueConfig: invalid {k}={getattr(self, k)!r}")

    @property
    def game(self) -> str:
        return f"go_{self.size}x{self.size}"

    @property
    def halving_steps(self) -> int:
        return self.halve_every or max(1, round(self.steps * PAPER_HALVING_FRACTION))


class Labelled(Protocol):
    """Positions with outcomes: value_store.ValuePositions, or dataset.Positions (every position of expert games,
    the paper's over-fitting KGS comparison)."""

    @property
    def position(self) -> Position: ...  # numpy leaves [M, ...]

    @property
    def outcome(self) -> np.ndarray: ...  # [M] ±1 (0: unknown) for the player to move


@dataclasses.dataclass(frozen=True)
class ValueState:
    params: dict
    opt_state: optax.OptState
    step: jax.Array  # [] int32


jax.tree_util.register_dataclass(ValueState, data_fields=["params", "opt_state", "step"], meta_fields=[])


def network(config: ValueConfig) -> ValueNetwork:
    return ValueNetwork(layers=config.layers, filters=config.filters, hidden=config.hidden)


def optimizer_schedule(config: ValueConfig) -> optax.Schedule:
    return optax.exponential_decay(config.learning_rate, config.halving_steps, 0.5, staircase=True)


@functools.cache
def _init(config: ValueConfig) -> Callable:
    return jax.jit(network(config).init)  # one compiled program, not one dispatch per initialiser


def init_state(config: ValueConfig) -> ValueState:
    n = config.size
    params = _init(config)(jax.random.key(config.seed), jnp.zeros((1, n, n, config.planes)))["params"]
    return ValueState(params=params, opt_state=optax.sgd(optimizer_schedule(config)).init(params), step=jnp.int32(0))


def planes_of(config: ValueConfig, position: Position) -> jax.Array:
    """[B, N, N, planes] float32 input planes of a batch of positions."""
    return features_lib.features(position, config.planes).astype(jnp.float32)


def values_of(config: ValueConfig, params, position: Position) -> jax.Array:
    """[B] v_θ(s) in [−1, 1] for the player to move (jit-able)."""
    return cast(jax.Array, network(config).apply({"params": params}, planes_of(config, position)))


def loss(params, config: ValueConfig, planes: jax.Array, z: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(½ · mean (z − v)², whose gradient step is the paper's update; mean (z − v)², the reported MSE)."""
    v = cast(jax.Array, network(config).apply({"params": params}, planes))
    mse = jnp.mean(jnp.square(z - v))
    return 0.5 * mse, mse


@functools.cache
def make_train_step(config: ValueConfig, mesh: Mesh) -> Callable:
    """(state, key, position [B, ...], z [B]) -> (state, mse); the batch is split over the mesh's devices."""
    tx = optax.sgd(optimizer_schedule(config))

    def step(state: ValueState, key: jax.Array, position: Position, z: jax.Array):
        key = devices.device_key(jax.random.fold_in(key, state.step))
        planes = planes_of(config, position)
        if config.symmetries:
            sym = symmetries.random_symmetry(config.game, key, planes.shape[0])
            planes = symmetries.transform_observation(config.game, sym, planes)
        (_, mse), grads = jax.value_and_grad(loss, has_aux=True)(state.params, config, planes, z)
        grads = jax.lax.pmean(grads, devices.DEVICE_AXIS)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return ValueState(params=params, opt_state=opt_state, step=state.step + 1), jax.lax.pmean(
            mse, devices.DEVICE_AXIS
        )

    batch = P(devices.DEVICE_AXIS)
    return devices.sharded(step, mesh, in_specs=(P(), P(), batch, batch), out_specs=(P(), P()), donate_argnums=0)


@functools.cache
def _eval_step(config: ValueConfig, mesh: Mesh) -> Callable:
    """(params, position [B, ...], z [B], weight [B]) -> (Σ (z − v)² · w, Σ v · w) over the batch (no symmetry)."""

    def step(params, position: Position, z: jax.Array, weight: jax.Array):
        v = values_of(config, params, position)
        return jax.lax.psum(jnp.stack([(jnp.square(z - v) * weight).sum(), (v * weight).sum()]), devices.DEVICE_AXIS)

    batch = P(devices.DEVICE_AXIS)
    return devices.sharded(step, mesh, in_specs=(P(), batch, batch, batch), out_specs=P())


@functools.cache
def _predict_step(config: ValueConfig) -> Callable:
    return jax.jit(functools.partial(values_of, config))


def _take(position: Position, index: np.ndarray) -> Position:
    return jax.tree.map(lambda x: x[index], position)


def predict(config: ValueConfig, params, position: Position, batch_size: int = 512) -> np.ndarray:
    """[M] v_θ of M positions (numpy leaves), in batches of `batch_size` (the last one padded)."""
    count = int(position.board.shape[0])
    step = _predict_step(config)
    out = []
    for start in range(0, count, batch_size):
        index = np.minimum(np.arange(start, start + batch_size), count - 1)
        out.append(np.asarray(step(params, _take(position, index)))[: count - start])
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def value_fn(config: ValueConfig, params) -> Callable[[Position], np.ndarray]:
    """positions -> v_θ [M] (an evaluator for mse_by_move)."""
    return lambda position: predict(config, params, position)


def evaluate(config: ValueConfig, params, data: Labelled, mesh: Mesh | None = None, batch_size: int = 512) -> float:
    """Mean (z − v_θ(s))² over every position of `data`."""
    mesh = mesh or devices.make_mesh()
    step = _eval_step(config, mesh)
    params = jax.device_put(params, devices.shardings(mesh, P()))
    count = len(data.outcome)
    batch_size = -(-batch_size // mesh.size) * mesh.size
    total = 0.0
    for start in range(0, count, batch_size):
        index = np.arange(start, start + batch_size)
        weight = (index < count).astype(np.float32)
        index = np.minimum(index, count - 1)
        z = np.asarray(data.outcome[index], np.float32)
        total += float(step(params, _take(data.position, index), z, weight)[0])
    return total / count


# -- a run directory: config.json, metrics.jsonl, checkpoints/ (orbax) ----------------------------------------------


RUN = checkpoints.RunFiles(ValueConfig, ValueRunError, "a value-network run", init_state)
read_config = RUN.read_config  # (run_dir) -> the ValueConfig it was trained with
restore_params = RUN.restore_params  # (run_dir, step=None) -> (config, params, step) of its latest or given checkpoint


def train(
    config: ValueConfig,
    train_data: Labelled,
    test_data: Labelled,
    run_dir: str,
    data_path: str = "",
    mesh: Mesh | None = None,
    log: Callable[[dict], None] = print,
) -> dict:
    """Trains (or resumes) v_θ in `run_dir` for config.steps steps through the stages' loop (stage_loop.py: resume
    from the newest intact checkpoint, divergence stop, reproducible minibatches); returns the last metrics. Each
    eval_every steps (and at the end) a line of metrics.jsonl: step, learning rate, train MSE (mean over the steps
    since the last line, on augmented positions, and how many steps that is), held-out MSE, positions per second."""
    mesh = mesh or devices.make_mesh()
    if config.batch_size % mesh.size:
        raise ValueRunError(f"batch size {config.batch_size} is not a multiple of the {mesh.size} devices")
    if len(train_data.outcome) == 0 or len(test_data.outcome) == 0:
        raise ValueRunError("the training and held-out sets must both hold positions")
    for name, data in (("training", train_data), ("held-out", test_data)):
        if data.position.board.shape[-1] != config.size**2:
            raise ValueRunError(f"the {name} positions are not {config.size}x{config.size}")
    RUN.write_config(run_dir, config, data_path)
    schedule = optimizer_schedule(config)
    batch_sharding = devices.shardings(mesh, P(devices.DEVICE_AXIS))
    outcome = np.asarray(train_data.outcome, np.float32)  # z as float32, 4 bytes a position
    mse_step = make_train_step(config, mesh)

    def train_step(state: ValueState, key: jax.Array, position: Position, z: jax.Array) -> tuple[ValueState, dict]:
        state, mse = mse_step(state, key, position, z)
        return state, {"loss": mse}

    def line(params, step: int, pending: list[dict], seconds: float) -> dict:
        return {
            "step": step,
            "learning_rate": float(schedule(step - 1)),
            "train_mse": float(np.mean([float(m["loss"]) for m in pending])),
            "averaged_steps": len(pending),  # train_mse's steps: fewer after a resume
            "test_mse": evaluate(config, params, test_data, mesh),
            "test_positions": len(test_data.outcome),
            "positions_per_second": len(pending) * config.batch_size / seconds,
        }

    stage = stage_loop.Stage(
        what="a value-network run",
        error=ValueRunError,
        steps=config.steps,
        eval_every=config.eval_every,
        checkpoint_every=config.checkpoint_every,
        seed=config.seed,
        rows=len(outcome),
        batch_size=config.batch_size,
        init_state=lambda: init_state(config),
        place=lambda state: jax.device_put(state, devices.shardings(mesh, P())),
        train_step=train_step,
        batch=stage_loop.minibatches((train_data.position, outcome), batch_sharding),
        line=line,
    )
    return stage_loop.train(stage, run_dir, log)


# -- Fig. 2b: evaluators' MSE by move number --------------------------------------------------------------------------


def mse_by_move(
    value_fn: Callable[[Any], Any],
    positions: Any,
    outcomes: np.ndarray,
    move_numbers: np.ndarray,
    bins: Sequence[int],
    batch_size: int = 256,
) -> list[dict]:
    """Mean (z − value)² of an evaluator per move-number bin: bin i holds the positions with bins[i] <= move number <
    bins[i + 1]. `value_fn` maps a batch of `positions` (any pytree with leading axis M: Positions for v_θ, pgx
    states for rollouts) to [batch] values for the player to move; it is called on slices of exactly `batch_size`
    positions that fall in some bin (the last one padded with repeats, whose values are dropped). Rows: {"from",
    "to" (inclusive), "positions", "mse" (None when empty)}."""
    edges = np.asarray(bins)
    if edges.ndim != 1 or len(edges) < 2 or np.any(np.diff(edges) <= 0):
        raise ValueError(f"bins must be at least 2 increasing edges, got {list(bins)}")
    moves = np.asarray(move_numbers)
    outcomes = np.asarray(outcomes, np.float64)
    which = np.searchsorted(edges, moves, side="right") - 1  # bin of each position, −1 or len − 1 outside
    inside = np.flatnonzero((which >= 0) & (which < len(edges) - 1))
    errors = np.zeros(len(moves))
    for start in range(0, len(inside), batch_size):
        index = inside[start : start + batch_size]
        padded = np.resize(index, batch_size)  # the last slice padded (repeating it): one shape, one compile
        values = np.asarray(value_fn(jax.tree.map(lambda x, padded=padded: x[padded], positions)), np.float64)
        errors[index] = np.square(outcomes[index] - values[: len(index)])
    rows = []
    for i in range(len(edges) - 1):
        members = inside[which[inside] == i]
        rows.append(
            {
                "from": int(edges[i]),
                "to": int(edges[i + 1]) - 1,
                "positions": len(members),
                "mse": float(errors[members].mean()) if len(members) else None,
            }
        )
    return rows


def _as_partial(policy_apply: Callable) -> Partial:
    return policy_apply if isinstance(policy_apply, Partial) else Partial(policy_apply)


@functools.cache
def _sample_fn(layers: int, filters: int, planes: int, temperature: float) -> Callable:
    net = PolicyNetwork(layers=layers, filters=filters)
    return lambda params, states, key: policy_actions(net, planes, params, states, key, temperature)


def sampling_policy(config, params, temperature: float = 1.0) -> Partial:
    """`(states, key) -> actions` sampling a policy network (p_σ or p_ρ: a config with layers, filters, planes) over
    the sensible points, a pass when none is left. A jax Partial: the weights are its leaves, so rollout_values
    compiles once per network shape, not per checkpoint."""
    return Partial(_sample_fn(int(config.layers), int(config.filters), int(config.planes), float(temperature)), params)


@functools.partial(jax.jit, static_argnums=(3,))
def _rollout_values(policy: Partial, states: pgx.State, key: jax.Array, k: int) -> jax.Array:
    b = states.current_player.shape[0]
    size = round(states._x.board.shape[-1] ** 0.5)
    game = pgx.make(f"go_{size}x{size}")._game  # type: ignore[arg-type, attr-defined]
    tiled = jax.tree.map(lambda x: jnp.concatenate([x] * k), states)  # [k · B]: copy j of state i at j · B + i
    order, x = tiled._player_order, tiled._x
    mover = x.color  # z is for the colour to move at the given state

    def body(c):
        t, x = c
        over = jax.vmap(game.is_terminal)(x)
        action = policy(value_data.env_state(x, order), jax.random.fold_in(key, t))
        return t + 1, where_rows(~over, jax.vmap(game.step)(x, action), x)

    _, x = jax.lax.while_loop(lambda c: ~jnp.all(jax.vmap(game.is_terminal)(c[1])), body, (jnp.int32(0), x))
    z = jnp.take_along_axis(jax.vmap(game.rewards)(x), mover[:, None], axis=1)[:, 0]  # rewards by colour
    return z.reshape(k, b).mean(axis=0)


def rollout_values(policy_apply: Callable, states: pgx.State, key: jax.Array, k: int) -> jax.Array:
    """[B] the mean outcome z, for the player to move at each of the pgx Go env states [B], of k games played from it
    to the end by `policy_apply(states, key) -> actions` (a Monte Carlo evaluation, Fig. 2b's rollouts). A policy that
    is a jax Partial (sampling_policy) is traced with its leaves as arguments; any other callable is static (one
    compile per function object)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return _rollout_values(_as_partial(policy_apply), states, key, k)


def rollout_evaluator(policy_apply: Callable, key: jax.Array, k: int) -> Callable[[pgx.State], np.ndarray]:
    """states -> rollout values [B] for mse_by_move; each call uses its own key, fold_in(key, call number)."""
    calls = itertools.count()
    return lambda states: np.asarray(rollout_values(policy_apply, states, jax.random.fold_in(key, next(calls)), k))
