"""Supervised learning of the policy network p_σ from expert moves (Silver et al., Nature 2016, Methods, "Supervised
learning of policy networks"): maximise log p_σ(a | s) of the expert's move a by SGD without momentum, step size
α = 0.003 halved every 80 million of the 340 million steps, each position augmented by one of the 8 reflections and
rotations of the board. Held-out move-prediction accuracy is the paper's measure (57.0 % with 48 planes, 55.7 % with
the board and move history alone, on KGS 6–9 dan games).

What is scaled to 2 CPU cores, and how (all in `SLConfig`, each a command-line option of `az-jax alphago sl`):
- `steps`: as many as the budget allows; α is halved every steps · 80 / 340 steps, the paper's ratio.
- `batch_size`: the paper's m = 16 keeps a CPU busy poorly; the default is 64 with α scaled by 64 / 16 (the usual
  linear rule for SGD), i.e. 0.012. `--batch-size 16 --learning-rate 0.003` is the paper's setting.
- `filters`, `layers`: the paper's 192 and 13 are the defaults; CPU presets use fewer.

Program shape: one jitted step, data-parallel over the mesh (`az_jax.core.devices.sharded`): each device computes the
features of its share of the batch (az_jax.alphago.features) from the compact positions, applies its own random
symmetry per position, and the gradients are averaged over devices. Features are never stored: a data set of
positions is ~2 bytes per point, its 48 planes would be 48.
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from az_jax.alphago import checkpoints, stage_loop
from az_jax.alphago import features as features_lib
from az_jax.alphago.dataset import Positions
from az_jax.alphago.networks import PolicyNetwork
from az_jax.alphago.position import Position
from az_jax.core import devices
from envs import symmetries

PAPER_HALVING_FRACTION = 80 / 340  # α halved every 80 M of 340 M steps


class SLError(RuntimeError):
    """A run directory that does not fit the command (another config, damaged checkpoint)."""


@dataclasses.dataclass(frozen=True)
class SLConfig:
    size: int  # board size N (9 or 19)
    filters: int = 192  # k
    layers: int = 13
    planes: int = 48  # 4, 12, 20 or 48: the first planes of Extended Data Table 2
    batch_size: int = 64
    learning_rate: float = 0.012  # α (the paper's 0.003 at m = 16, scaled to m = 64)
    steps: int = 10_000
    halve_every: int = 0  # 0: steps · 80 / 340 (the paper's ratio)
    symmetries: bool = True  # augment each position with one of the 8 symmetries
    eval_every: int = 500
    checkpoint_every: int = 1000
    seed: int = 0

    def __post_init__(self):
        checks = {
            "size": self.size in (9, 19),
            "filters": self.filters >= 1,
            "layers": self.layers >= 2,
            "planes": self.planes in features_lib.PLANE_COUNTS and self.planes != features_lib.NUM_VALUE_PLANES,
            "batch_size": self.batch_size >= 1,
            "learning_rate": self.learning_rate > 0 and math.isfinite(self.learning_rate),
            "steps": self.steps >= 1,
            "halve_every": self.halve_every >= 0,
            "eval_every": self.eval_every >= 1,
            "checkpoint_every": self.checkpoint_every >= 1,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            k = bad[0]
            raise ValueError(f"SLConfig: invalid {k}={getattr(self, k)!r}")

    @property
    def game(self) -> str:
        return f"go_{self.size}x{self.size}"

    @property
    def halving_steps(self) -> int:
        return self.halve_every or max(1, round(self.steps * PAPER_HALVING_FRACTION))


@dataclasses.dataclass(frozen=True)
class SLState:
    params: dict
    opt_state: optax.OptState
    step: jax.Array  # [] int32


jax.tree_util.register_dataclass(SLState, data_fields=["params", "opt_state", "step"], meta_fields=[])


def network(config: SLConfig) -> PolicyNetwork:
    return PolicyNetwork(layers=config.layers, filters=config.filters)


def optimizer_schedule(config: SLConfig) -> optax.Schedule:
    return optax.exponential_decay(config.learning_rate, config.halving_steps, 0.5, staircase=True)


def optimizer(config: SLConfig) -> optax.GradientTransformation:
    """Plain SGD (no momentum, as the paper), α halved every `halving_steps`."""
    return optax.sgd(optimizer_schedule(config))


def init_state(config: SLConfig) -> SLState:
    n = config.size
    params = network(config).init(jax.random.key(config.seed), jnp.zeros((1, n, n, config.planes)))["params"]
    return SLState(params=params, opt_state=optimizer(config).init(params), step=jnp.int32(0))


def planes_of(config: SLConfig, position: Position) -> jax.Array:
    """[B, N, N, planes] float32 feature planes of a batch of positions."""
    return features_lib.features(position, config.planes).astype(jnp.float32)


def loss_and_accuracy(params, config: SLConfig, planes: jax.Array, action: jax.Array, empty: jax.Array):
    """Mean −log p_σ(a|s) and top-1 accuracy; the prediction is the most probable empty point."""
    logits = cast(jax.Array, network(config).apply({"params": params}, planes))  # [B, N²]
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, action).mean()
    guess = jnp.argmax(jnp.where(empty, logits, -jnp.inf), axis=-1)
    return loss, (guess == action).mean()


def make_train_step(config: SLConfig, mesh: Mesh) -> Callable:
    """(state, key, position [B, ...], action [B]) -> (state, metrics); the batch is split over the mesh's devices."""
    tx = optimizer(config)

    def step(state: SLState, key: jax.Array, position: Position, action: jax.Array):
        key = devices.device_key(jax.random.fold_in(key, state.step))
        planes = planes_of(config, position)
        empty = position.board == 0
        if config.symmetries:
            sym_key, _ = jax.random.split(key)
            sym = symmetries.random_symmetry(config.game, sym_key, planes.shape[0])
            planes = symmetries.transform_observation(config.game, sym, planes)
            action = symmetries.transform_action(config.game, sym, action)
            n = config.size
            empty = symmetries.transform_observation(config.game, sym, empty.reshape(-1, n, n, 1)).reshape(-1, n * n)
        grad_fn = jax.value_and_grad(loss_and_accuracy, has_aux=True)
        (loss, accuracy), grads = grad_fn(state.params, config, planes, action, empty)
        grads = jax.lax.pmean(grads, devices.DEVICE_AXIS)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics = jax.lax.pmean({"loss": loss, "accuracy": accuracy}, devices.DEVICE_AXIS)
        return SLState(params=params, opt_state=opt_state, step=state.step + 1), metrics

    batch = P(devices.DEVICE_AXIS)
    return devices.sharded(step, mesh, in_specs=(P(), P(), batch, batch), out_specs=(P(), P()), donate_argnums=0)


def ensemble_probabilities(config: SLConfig, params, planes: jax.Array) -> jax.Array:
    """[B, N²] p_σ averaged over the board's 8 symmetries: each position seen under each symmetry, the output mapped
    back (Silver et al. 2016, Extended Data Table 3's second column: the network's output over the 8 rotations and
    reflections of the input)."""
    n2 = config.size * config.size
    b = planes.shape[0]
    total = jnp.zeros((b, n2), jnp.float32)
    for s in range(symmetries.num_symmetries(config.game)):
        sym = jnp.full((b,), s, jnp.int32)
        logits = cast(
            jax.Array,
            network(config).apply({"params": params}, symmetries.transform_observation(config.game, sym, planes)),
        )
        padded = jnp.concatenate([logits.astype(jnp.float32), jnp.zeros((b, 1), jnp.float32)], axis=-1)  # + pass
        total = total + jax.nn.softmax(symmetries.inverse_policy(config.game, sym, padded)[:, :n2], axis=-1)
    return total / symmetries.num_symmetries(config.game)


def make_eval_step(config: SLConfig, mesh: Mesh, ensemble: bool = False) -> Callable:
    """(params, position [B, ...], action [B], weight [B]) -> (Σ loss·w, Σ correct·w) over the batch (no symmetry),
    and with `ensemble` Σ correct·w of the 8-symmetry mean (`ensemble_probabilities`) third."""

    def step(params, position: Position, action: jax.Array, weight: jax.Array):
        planes = planes_of(config, position)
        logits = cast(jax.Array, network(config).apply({"params": params}, planes))
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, action)
        empty = position.board == 0
        guess = jnp.argmax(jnp.where(empty, logits, -jnp.inf), axis=-1)
        sums = [(loss * weight).sum(), ((guess == action) * weight).sum()]
        if ensemble:
            mean = ensemble_probabilities(config, params, planes)
            sums.append(((jnp.argmax(jnp.where(empty, mean, -jnp.inf), axis=-1) == action) * weight).sum())
        return jax.lax.psum(jnp.stack(sums), devices.DEVICE_AXIS)

    batch = P(devices.DEVICE_AXIS)
    return devices.sharded(step, mesh, in_specs=(P(), batch, batch, batch), out_specs=P())


def _take(data: Positions, index: np.ndarray) -> tuple[Position, np.ndarray]:
    position = jax.tree.map(lambda x: x[index], data.position)
    return position, data.action[index]


def evaluate(
    config: SLConfig, mesh: Mesh, params, data: Positions, batch_size: int = 512, ensemble: bool = False
) -> dict:
    """Held-out mean log-likelihood loss and move-prediction accuracy over every position of `data`; with
    `ensemble` also the accuracy of p_σ averaged over the 8 symmetries ("test_accuracy_8sym", 9× the work)."""
    eval_step = _eval_step(config, mesh, ensemble)
    params = jax.device_put(params, devices.shardings(mesh, P()))
    count = len(data.action)
    batch_size = -(-batch_size // mesh.size) * mesh.size
    totals = np.zeros(3 if ensemble else 2)
    for start in range(0, count, batch_size):
        index = np.arange(start, start + batch_size)
        weight = (index < count).astype(np.float32)
        position, action = _take(data, np.minimum(index, count - 1))
        totals += np.asarray(eval_step(params, position, action, weight))
    report = {"test_loss": float(totals[0] / count), "test_accuracy": float(totals[1] / count), "test_positions": count}
    if ensemble:
        report["test_accuracy_8sym"] = float(totals[2] / count)
    return report


@functools.cache
def _eval_step(config: SLConfig, mesh: Mesh, ensemble: bool = False) -> Callable:
    return make_eval_step(config, mesh, ensemble)


# -- a run directory: config.json, metrics.jsonl, checkpoints/ (orbax) ----------------------------------------------


RUN = checkpoints.RunFiles(SLConfig, SLError, "an SL policy run", init_state)
read_config = RUN.read_config  # (run_dir) -> the SLConfig it was trained with
restore_params = RUN.restore_params  # (run_dir, step=None) -> (config, params, step) of its latest or given checkpoint


def train(
    config: SLConfig,
    train_data: Positions,
    test_data: Positions,
    run_dir: str,
    data_path: str = "",
    mesh: Mesh | None = None,
    log: Callable[[dict], None] = print,
) -> dict:
    """Trains (or resumes) p_σ in `run_dir` for config.steps steps through the stages' loop (stage_loop.py: resume
    from the newest intact checkpoint, divergence stop, reproducible minibatches); returns the last metrics. Each
    eval_every steps a line of metrics.jsonl: step, learning rate, train loss/accuracy (running mean since the last
    line), held-out loss/accuracy, positions per second."""
    mesh = mesh or devices.make_mesh()
    if config.batch_size % mesh.size:
        raise SLError(f"batch size {config.batch_size} is not a multiple of the {mesh.size} devices")
    if len(train_data.action) == 0 or len(test_data.action) == 0:
        raise SLError("the training and held-out sets must both hold positions")
    RUN.write_config(run_dir, config, data_path)
    schedule = optimizer_schedule(config)
    batch_sharding = devices.shardings(mesh, P(devices.DEVICE_AXIS))

    def line(params, step: int, pending: list[dict], seconds: float) -> dict:
        sums = np.sum([[float(m["loss"]), float(m["accuracy"])] for m in pending], axis=0)
        return {
            "step": step,
            "learning_rate": float(schedule(step - 1)),
            "train_loss": float(sums[0] / len(pending)),
            "train_accuracy": float(sums[1] / len(pending)),
            # the last line also scores the 8-symmetry ensemble (Extended Data Table 3's second column)
            **evaluate(config, mesh, params, test_data, ensemble=step == config.steps),
            "positions_per_second": len(pending) * config.batch_size / seconds,
        }

    stage = stage_loop.Stage(
        what="an SL policy run",
        error=SLError,
        steps=config.steps,
        eval_every=config.eval_every,
        checkpoint_every=config.checkpoint_every,
        seed=config.seed,
        rows=len(train_data.action),
        batch_size=config.batch_size,
        init_state=lambda: init_state(config),
        place=lambda state: jax.device_put(state, devices.shardings(mesh, P())),
        train_step=make_train_step(config, mesh),
        batch=stage_loop.minibatches((train_data.position, train_data.action), batch_sharding),
        line=line,
    )
    return stage_loop.train(stage, run_dir, log)
