"""A population of M runs of one config trained in ONE compiled program: `jax.vmap` over the training iteration.

Members differ by seed (network initialisation, games, every key of the run) and, optionally, by the values of the
stepped learning-rate schedule. Both are passed to the program as data (arrays with a leading member axis), not as
Python constants, so one compilation serves every member. Everything else (game, network shapes, search, batch
sizes, the schedule's boundaries) is the config's and is shared.

Layout: a 2-D mesh with axes ("m", "d"). Members are split over "m" (no communication between them); each member's
games and replay rows are split over "d" exactly as az_jax.iteration splits one run's. Inside the one
`jax.shard_map`, each device `vmap`s the per-device iteration body of az_jax.iteration.Trainer over its members, so
member i's result is the run `Trainer(member_config(config, members[i]))` makes on a mesh of "d" devices
(tests/test_population.py checks this, and that members with different seeds differ). The network alone may run once
per member instead of batched (`network_batching="loop"`, the default on CPU: see `member_looped`); then a member's
result is that run's bit for bit on CPU.

    members = [Member(seed=s) for s in range(8)]                       # or Member(seed=0, learning_rates=(0.05,))
    trainer = PopulationTrainer.create(config, members)                # all devices; members spread over them
    state = trainer.init_state()                                       # TrainState, every leaf [M, ...]
    state, metrics = trainer.iteration(state)                          # metrics: {name: [M]}
"""
import dataclasses
import functools
import json
import math
import os
import time
from typing import Any, Callable, Literal, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import custom_batching
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from az_jax import checkpoint as ckpt
from az_jax import config as config_lib
from az_jax.iteration import DEVICE_AXIS, Trainer, TrainState, state_partition_specs

MEMBER_AXIS = "m"


@dataclasses.dataclass(frozen=True)
class Member:
    """One member's hyperparameters. `learning_rates`: the schedule's values (as many as the config's, whose
    lr_boundaries are shared); None means the config's own."""
    seed: int
    learning_rates: tuple[float, ...] | None = None


def member_config(config: config_lib.Config, member: Member) -> config_lib.Config:
    """The config member `member` trains with: what `az-jax train` would be given to train it alone."""
    lrs = config.learning_rates if member.learning_rates is None else tuple(float(x) for x in member.learning_rates)
    return dataclasses.replace(config, seed=int(member.seed), learning_rates=lrs)


def stepped_schedule(init_value: jax.Array, scales: jax.Array, boundaries: Sequence[int]) -> optax.Schedule:
    """optax.piecewise_constant_schedule with its values as data: init_value [] and scales [K-1] (value i+1 / value i)
    may be traced, the boundaries are static. Written as optax writes it, so it gives the same float32 values."""
    def schedule(count):
        value = init_value
        for i, boundary in enumerate(boundaries):
            indicator = jnp.maximum(0.0, jnp.sign(boundary - count))    # 1 before the boundary, 0 from it on
            value = value * indicator + (1 - indicator) * scales[i] * value
        return value
    return schedule


def _schedule_data(config: config_lib.Config, members: Sequence[Member]) -> dict:
    """Per-member schedule arrays: lr_init [M] and lr_scales [M, K-1], float32 (scales from float64 ratios, as the
    Python floats optax.piecewise_constant_schedule multiplies by)."""
    values = [member_config(config, m).learning_rates for m in members]
    return {"lr_init": np.asarray([v[0] for v in values], np.float32),
            "lr_scales": np.asarray([[v[i + 1] / v[i] for i in range(len(v) - 1)] for v in values],
                                    np.float32).reshape(len(members), len(config.lr_boundaries))}


# --- the network under the member vmap ------------------------------------------------------------------------------
NetworkBatching = Literal["vmap", "loop"]


def _loop_rule(fn):
    """A custom_vmap rule that runs `fn` once per member (an unrolled loop) and stacks the results."""
    def rule(axis_size, in_batched, *args):
        args = [jax.tree.map(lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x))), a, ab)
                for a, ab in zip(args, in_batched)]
        outs = [fn(*jax.tree.map(lambda x: x[i], args)) for i in range(axis_size)]
        out = jax.tree.map(lambda *xs: jnp.stack(xs), *outs)
        return out, jax.tree.map(lambda _: True, out)
    return rule


def member_looped(fn: Callable) -> Callable:
    """`fn(variables, observation)` that, under `jax.vmap` over members, runs once per member instead of batched,
    with reverse-mode autodiff (a custom_vjp whose backward pass recomputes the forward pass, also per member).

    Why: vmapping a network over its parameters turns each convolution into a grouped convolution, which XLA:CPU runs
    2-4x slower than the members' convolutions one after another (measured on the connect_four small network, 8
    members × 64 positions on one core: forward 99 ms batched vs 46 ms looped, gradient 478 ms vs 126 ms). Only the
    network is looped; the search, the games and the optimizer stay vmapped."""
    forward = custom_batching.custom_vmap(fn)
    forward.def_vmap(_loop_rule(fn))

    def vjp(variables, observation, cotangent):
        return jax.vjp(fn, variables, observation)[1](cotangent)

    backward = custom_batching.custom_vmap(vjp)
    backward.def_vmap(_loop_rule(vjp))

    @jax.custom_vjp
    def looped(variables, observation):
        return forward(variables, observation)

    looped.defvjp(lambda v, o: (forward(v, o), (v, o)), lambda res, ct: backward(*res, ct))
    return looped


@dataclasses.dataclass(frozen=True)
class _LoopedNetwork:
    """Stands in for the learning network in learner.train_step: `apply` (train=True, mutable batch stats) per
    member under the population's vmap."""
    network: Any

    def apply(self, variables, observation, *, train: bool, mutable):
        return member_looped(functools.partial(self.network.apply, train=train, mutable=mutable))(variables,
                                                                                                  observation)


@dataclasses.dataclass(frozen=True, eq=False)
class _MemberTrainer(Trainer):
    """Trainer of one member, built inside the traced population program: its optimizer's schedule reads traced
    values. Only `_initial_state` and `_local_iteration` are used (the mesh gives the size of the "d" axis)."""
    lr_init: Any = None        # [] float32
    lr_scales: Any = None      # [K-1] float32
    network_batching: NetworkBatching = "vmap"

    @functools.cached_property
    def network(self):
        base = Trainer.network.func(self)      # the Trainer's learning network (not cached under its name here)
        return _LoopedNetwork(base) if self.network_batching == "loop" else base

    def apply_fn(self, variables, observation):
        if self.network_batching == "loop":
            return member_looped(super().apply_fn)(variables, observation)
        return super().apply_fn(variables, observation)

    def schedule(self, count: jax.Array) -> jax.Array:
        return stepped_schedule(self.lr_init, self.lr_scales, self.config.lr_boundaries)(count)

    @functools.cached_property
    def optimizer(self) -> optax.GradientTransformation:
        # As learner.make_optimizer, with the schedule's values as data.
        return optax.sgd(learning_rate=self.schedule, momentum=self.config.momentum)


def make_population_mesh(num_members: int, devices=None, member_shards: int | None = None) -> Mesh:
    """A ("m", "d") mesh over `devices` (default all). `member_shards` devices groups split the members (default
    gcd(members, devices): members spread over devices as far as they divide); each group splits its members' games."""
    devices = np.asarray(jax.devices() if devices is None else devices)
    shards = math.gcd(num_members, devices.size) if member_shards is None else member_shards
    if shards <= 0 or devices.size % shards or num_members % shards:
        raise config_lib.ConfigError(f"member_shards={shards} must divide both the {num_members} members and the "
                                     f"{devices.size} devices")
    return Mesh(devices.reshape(shards, devices.size // shards), (MEMBER_AXIS, DEVICE_AXIS))


def population_partition_specs() -> TrainState:
    """Trainer's specs with the member axis in front: P() -> P("m"), P("d") -> P("m", "d")."""
    return jax.tree.map(lambda spec: P(MEMBER_AXIS, *spec), state_partition_specs(),
                        is_leaf=lambda x: isinstance(x, P))


@dataclasses.dataclass(frozen=True, eq=False)
class PopulationTrainer:
    """Everything static about a population: the shared config, the members, the ("m", "d") mesh, and how the
    network meets the member axis ("vmap": batched like everything else; "loop": once per member, see
    `member_looped`)."""
    config: config_lib.Config
    members: tuple[Member, ...]
    mesh: Mesh
    network_batching: NetworkBatching = "vmap"

    @classmethod
    def create(cls, config: config_lib.Config, members: Sequence[Member], devices=None,
               member_shards: int | None = None, network_batching: NetworkBatching | None = None
               ) -> "PopulationTrainer":
        """Checks every member's config (ConfigError names the bad one) and builds the mesh. `network_batching`
        defaults to "loop" on CPU (grouped convolutions are slow there) and "vmap" on GPU/TPU (not measured here)."""
        members = tuple(members)
        if not members:
            raise config_lib.ConfigError("a population needs at least one member")
        mesh = make_population_mesh(len(members), devices, member_shards)
        for i, member in enumerate(members):
            try:
                member_config(config, member).validate(mesh.shape[DEVICE_AXIS])
            except config_lib.ConfigError as e:
                raise config_lib.ConfigError(f"population member {i} ({member}): {e}") from None
        if network_batching is None:
            network_batching = "loop" if mesh.devices.flat[0].platform == "cpu" else "vmap"
        if network_batching not in ("vmap", "loop"):
            raise config_lib.ConfigError(f"network_batching must be vmap or loop, got {network_batching!r}")
        return cls(config, members, mesh, network_batching)

    @property
    def num_members(self) -> int:
        return len(self.members)

    @functools.cached_property
    def _member_mesh(self) -> Mesh:
        """The 1-D mesh of one member group; inside the program only its size (the "d" axis) is used."""
        return Mesh(self.mesh.devices[0], (DEVICE_AXIS,))

    def _member(self, data: dict) -> _MemberTrainer:
        return _MemberTrainer(self.config, self._member_mesh, lr_init=data["lr_init"], lr_scales=data["lr_scales"],
                              network_batching=self.network_batching)

    @functools.cached_property
    def shardings(self) -> TrainState:
        return jax.tree.map(lambda spec: NamedSharding(self.mesh, spec), population_partition_specs(),
                            is_leaf=lambda x: isinstance(x, P))

    @functools.cached_property
    def member_data(self) -> dict:
        """seed [M] int32, lr_init [M], lr_scales [M, K-1]: the members' hyperparameters, split over "m"."""
        data = {"seed": np.asarray([m.seed for m in self.members], np.int32), **_schedule_data(self.config,
                                                                                                self.members)}
        return jax.device_put(data, NamedSharding(self.mesh, P(MEMBER_AXIS)))

    # --- state -----------------------------------------------------------------------------------------------------
    def init_state(self) -> TrainState:
        """Every member's initial TrainState (from its seed), stacked: every leaf [M, ...], created on the mesh."""
        assert self._member(self.member_data).env is not None  # pgx builds module-level arrays on first import
        init = jax.vmap(lambda data: self._member(data)._initial_state(data["seed"]))
        return jax.jit(init, out_shardings=self.shardings)(self.member_data)

    def member_state(self, state: TrainState, index: int) -> TrainState:
        """Member `index`'s TrainState on the host (NumPy leaves), as a run of it alone would hold it."""
        return jax.tree.map(lambda x: np.asarray(jax.device_get(x[index])), state)

    # --- the iteration ---------------------------------------------------------------------------------------------
    def _local_iteration(self, state: TrainState, data: dict) -> tuple[TrainState, dict]:
        """One device's members (leading axis M / member_shards), each with its B/D games and N/D replay rows."""
        def one_member(member_state, member_data):
            member = self._member(member_data)
            new_state, metrics = member._local_iteration(member_state)
            count = optax.tree_utils.tree_get(new_state.opt_state, "count")
            return new_state, {**metrics, "train/learning_rate": member.schedule(count)}
        return jax.vmap(one_member)(state, data)

    @functools.cached_property
    def iteration(self):
        """state -> (state, metrics {name: [M]}): one iteration of every member, one jitted program. The input
        state's buffers are donated."""
        specs = population_partition_specs()
        # check_vma=False as in az_jax.iteration (mctx's loops; learner.train_step's pmean relies on it).
        body = jax.shard_map(self._local_iteration, mesh=self.mesh, in_specs=(specs, P(MEMBER_AXIS)),
                             out_specs=(specs, P(MEMBER_AXIS)), check_vma=False)
        step = jax.jit(body, donate_argnums=0)
        return lambda state: step(state, self.member_data)


# --- the host loop -------------------------------------------------------------------------------------------------
ProgressFn = Callable[[int, list[dict]], None]


def save_members(trainer: PopulationTrainer, state: TrainState, run_dir: str) -> list[str]:
    """Writes each member as an ordinary run dir `run_dir/member_<i>` (config.json + an orbax checkpoint), so
    `az_jax.load_agent`, `az-jax eval` and `az-jax train` (to go on training it alone) work on it. Returns the dirs."""
    from az_jax.loop import write_config
    dirs = []
    for i, member in enumerate(trainer.members):
        member_dir = os.path.join(run_dir, f"member_{i}")
        config = member_config(trainer.config, member)
        write_config(config, member_dir)
        manager = ckpt.make_manager(member_dir, keep=config.keep_checkpoints)
        ckpt.save(manager, trainer.member_state(state, i), config)
        manager.wait_until_finished()
        dirs.append(member_dir)
    return dirs


def train_population(config: config_lib.Config, members: Sequence[Member], *, run_dir: str | None = None,
                     devices=None, member_shards: int | None = None, network_batching: NetworkBatching | None = None,
                     progress_fn: ProgressFn | None = None) -> tuple[PopulationTrainer, TrainState]:
    """Trains every member for config.num_iterations iterations in one program (no evaluation, no resume).

    `progress_fn(iteration, [metrics of member i])` after every iteration; each member's metrics also carry
    perf/iteration_seconds (the whole population's) and perf/population_positions_per_second (all members). With
    `run_dir`: `population.json` (the members), `members.jsonl` (one line per member per iteration) and each member's
    final state as a run dir (save_members)."""
    trainer = PopulationTrainer.create(config, members, devices, member_shards, network_batching)
    state = trainer.init_state()
    log = None
    if run_dir is not None:
        os.makedirs(run_dir, exist_ok=True)
        with open(os.path.join(run_dir, "population.json"), "w") as f:
            json.dump({"config": json.loads(config.to_json()),
                       "members": [dataclasses.asdict(m) for m in trainer.members]}, f, indent=2)
        log = open(os.path.join(run_dir, "members.jsonl"), "a")
    try:
        for it in range(config.num_iterations):
            t0 = time.perf_counter()
            state, metrics = trainer.iteration(state)
            metrics = jax.device_get(metrics)
            seconds = time.perf_counter() - t0
            total = trainer.num_members * config.positions_per_iteration / seconds
            per_member = [{**{k: float(v[i]) for k, v in metrics.items()}, "perf/iteration_seconds": seconds,
                           "perf/population_positions_per_second": total} for i in range(trainer.num_members)]
            if log is not None:
                for i, m in enumerate(per_member):
                    log.write(json.dumps({"iteration": it + 1, "member": i, **m}) + "\n")
                log.flush()
            if progress_fn is not None:
                progress_fn(it + 1, per_member)
    finally:
        if log is not None:
            log.close()
    if run_dir is not None:
        save_members(trainer, state, run_dir)
    return trainer, state
