"""A population of M runs of one config trained in ONE compiled program: `jax.vmap` over the training iteration.

Members differ by seed (network initialisation, games, every key of the run) and, optionally, by the values of the
stepped learning-rate schedule. Both are passed to the program as data (arrays with a leading member axis), not as
Python constants, so one compilation serves every member. Everything else (game, network shapes, search, batch
sizes, the schedule's boundaries) is the config's and is shared.

Layout: a 2-D mesh with axes ("m", "d"). Members are split over "m" (no communication between them); each member's
games and replay rows are split over "d" exactly as one run's are. Inside the one sharded program
(az_jax/core/devices.py), each device `vmap`s `az_jax.core.iteration.iteration` over its members, so member i's result
is the run `Trainer(member_config(config, members[i]), mesh)` (az_jax/runtime/trainer.py) makes on a mesh of "d" devices
(tests/test_population.py checks this, and that members with different seeds differ). The network alone may run once
per member instead of batched (`network_batching="loop"`, the default on CPU: see `member_looped`); then a member's
result is that run's bit for bit on CPU.

    members = [Member(seed=s) for s in range(8)]                       # or Member(seed=0, learning_rates=(0.05,))
    trainer = PopulationTrainer.create(config, members)                # all devices; members spread over them
    state = trainer.init_state()                                       # TrainState, every leaf [M, ...]
    state, metrics = trainer.iterate(state)                            # metrics: {name: [M]}
"""

import dataclasses
import functools
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import custom_batching
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from az_jax.core import config as config_lib
from az_jax.core import devices as devices_lib
from az_jax.core import iteration as iteration_lib
from az_jax.core.devices import DEVICE_AXIS, sharded
from az_jax.core.iteration import Setup, TrainState, state_partition_specs
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.loop import DivergenceError, write_config

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


def _member_data(config: config_lib.Config, members: Sequence[Member]) -> dict:
    """seed [M] int32 and learning_rates [M, K] float32: the members' per-run numbers, passed to the program as
    data."""
    return {
        "seed": np.asarray([m.seed for m in members], np.int32),
        "learning_rates": np.asarray([member_config(config, m).learning_rates for m in members], np.float32),
    }


# --- the network under the member vmap ------------------------------------------------------------------------------
NetworkBatching = Literal["vmap", "loop"]


def _loop_rule(fn):
    """A custom_vmap rule that runs `fn` once per member (an unrolled loop) and stacks the results."""

    def rule(axis_size, in_batched, *args):
        args = tuple(
            jax.tree.map(lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x))), a, ab)
            for a, ab in zip(args, in_batched)
        )
        outs = [fn(*jax.tree.map(lambda x, i=i: x[i], args)) for i in range(axis_size)]
        out = jax.tree.map(lambda *xs: jnp.stack(xs), *outs)
        return out, jax.tree.map(lambda _: True, out)

    return rule


def member_looped(fn: Callable) -> Callable:
    """`fn(variables, observation)` that, under `jax.vmap` over members, runs once per member instead of batched,
    with reverse-mode autodiff (a custom_vjp whose backward pass recomputes the forward pass, also per member).

    Why: vmapping a network over its parameters turns each convolution into a grouped convolution, which XLA:CPU runs
    slower than the members' convolutions one after another (experiments/performance/README.md §7). Only the network is
    looped; the search, the games and the optimizer stay vmapped."""
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


def member_setup(setup: Setup, network_batching: NetworkBatching) -> Setup:
    """The run's Setup as a member sees it under the population's vmap: with "loop" both network functions run
    once per member (`member_looped`)."""
    if network_batching == "vmap":
        return setup
    return dataclasses.replace(
        setup, apply_fn=member_looped(setup.apply_fn), learn_apply=member_looped(setup.learn_apply)
    )


def make_population_mesh(num_members: int, devices=None, member_shards: int | None = None) -> Mesh:
    """A ("m", "d") mesh over `devices` (default all). `member_shards` devices groups split the members (default
    gcd(members, devices): members spread over devices as far as they divide); each group splits its members' games."""
    devices = np.asarray(jax.devices() if devices is None else devices)
    shards = math.gcd(num_members, devices.size) if member_shards is None else member_shards
    if shards <= 0 or devices.size % shards or num_members % shards:
        raise config_lib.ConfigError(
            f"member_shards={shards} must divide both the {num_members} members and the {devices.size} devices"
        )
    return Mesh(devices.reshape(shards, devices.size // shards), (MEMBER_AXIS, DEVICE_AXIS))


def population_partition_specs() -> TrainState:
    """Trainer's specs with the member axis in front: P() -> P("m"), P("d") -> P("m", "d")."""
    return jax.tree.map(lambda spec: P(MEMBER_AXIS, *spec), state_partition_specs(), is_leaf=lambda x: isinstance(x, P))


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
    def create(
        cls,
        config: config_lib.Config,
        members: Sequence[Member],
        devices=None,
        member_shards: int | None = None,
        network_batching: NetworkBatching | None = None,
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
    def setup(self) -> Setup:
        return member_setup(iteration_lib.make_setup(self.config), self.network_batching)

    @functools.cached_property
    def shardings(self) -> TrainState:
        return devices_lib.shardings(self.mesh, population_partition_specs())

    @functools.cached_property
    def member_data(self) -> dict:
        """seed [M] int32, learning_rates [M, K]: the members' per-run numbers, split over "m"."""
        return jax.device_put(_member_data(self.config, self.members), NamedSharding(self.mesh, P(MEMBER_AXIS)))

    # --- state -----------------------------------------------------------------------------------------------------
    def init_state(self) -> TrainState:
        """Every member's initial TrainState (from its seed), stacked: every leaf [M, ...], created on the mesh."""
        setup = self.setup  # built outside the trace: pgx imports a game's module on first use, and its class
        # defaults (arrays) made under a trace would leak as tracers
        init = jax.vmap(lambda data: iteration_lib.init_state(setup, data["seed"]))
        return jax.jit(init, out_shardings=self.shardings)(self.member_data)

    def member_state(self, state: TrainState, index: int) -> TrainState:
        """Member `index`'s TrainState on the host (NumPy leaves), as a run of it alone would hold it."""
        return jax.tree.map(lambda x: np.asarray(jax.device_get(x[index])), state)

    # --- the iteration ---------------------------------------------------------------------------------------------
    def _local_iteration(self, state: TrainState, data: dict) -> tuple[TrainState, dict]:
        """One device's members (leading axis M / member_shards), each with its B/D games and N/D replay rows."""
        one_member = lambda member_state, member_data: iteration_lib.iteration(
            self.setup, member_state, member_data["learning_rates"]
        )
        return jax.vmap(one_member)(state, data)

    @functools.cached_property
    def iterate(self):
        """state -> (state, metrics {name: [M]}): one iteration of every member, one jitted program. The input
        state's buffers are donated."""
        specs = population_partition_specs()
        _ = self.setup  # built outside the trace (see init_state)
        step = sharded(
            self._local_iteration, self.mesh, (specs, P(MEMBER_AXIS)), (specs, P(MEMBER_AXIS)), donate_argnums=0
        )
        return lambda state: step(state, self.member_data)


# --- the host loop -------------------------------------------------------------------------------------------------
ProgressFn = Callable[[int, list[dict]], None]


def save_members(trainer: PopulationTrainer, state: TrainState, run_dir: str) -> list[str]:
    """Writes each member as an ordinary run dir `run_dir/member_<i>` (config.json + an orbax checkpoint), so
    `az_jax.load_agent`, `az-jax eval` and `az-jax train` (to go on training it alone) work on it. Returns the dirs."""
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


def train_population(
    config: config_lib.Config,
    members: Sequence[Member],
    *,
    run_dir: str | None = None,
    devices=None,
    member_shards: int | None = None,
    network_batching: NetworkBatching | None = None,
    progress_fn: ProgressFn | None = None,
) -> tuple[PopulationTrainer, TrainState]:
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
            json.dump(
                {"config": json.loads(config.to_json()), "members": [dataclasses.asdict(m) for m in trainer.members]},
                f,
                indent=2,
            )
        log = open(os.path.join(run_dir, "members.jsonl"), "a")
    try:
        for it in range(config.num_iterations):
            t0 = time.perf_counter()
            state, metrics = trainer.iterate(state)
            metrics = jax.device_get(metrics)
            seconds = time.perf_counter() - t0
            diverged = [i for i, finite in enumerate(metrics["train/finite"]) if finite != 1.0]
            if diverged:  # as a run alone would stop (az_jax/runtime/loop.py); nothing of this iteration is written
                raise DivergenceError(
                    f"population members {diverged} diverged at iteration {it + 1} (loss or gradient norm not finite): "
                    f"lower their learning rates"
                )
            total = trainer.num_members * config.positions_per_iteration / seconds
            per_member = [
                {
                    **{k: float(v[i]) for k, v in metrics.items()},
                    "perf/iteration_seconds": seconds,
                    "perf/population_positions_per_second": total,
                }
                for i in range(trainer.num_members)
            ]
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
