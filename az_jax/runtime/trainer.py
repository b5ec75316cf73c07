"""One run's compiled programs on a device mesh: the initial state, the iteration, gating, matches against baselines.

A thin composition of the pure functions of az_jax/core/iteration.py with the device boundary of az_jax/core/devices.py;
the host loop (az_jax/runtime/loop.py) calls these programs, and checkpoints (az_jax/runtime/checkpoint.py) restore into
`abstract_state()`.
"""

import dataclasses
import functools

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from az_jax.core import arena
from az_jax.core import iteration as iteration_lib
from az_jax.core.config import Config
from az_jax.core.devices import DEVICE_AXIS, device_key, sharded, shardings
from az_jax.core.iteration import TrainState


@dataclasses.dataclass(frozen=True, eq=False)
class Trainer:
    """Everything static about a run (config, mesh, and the Setup made from the config) and its programs."""

    config: Config
    mesh: Mesh
    setup: iteration_lib.Setup = dataclasses.field(init=False)

    def __post_init__(self):
        platform = self.mesh.devices.flat[0].platform  # compile-only TPU/GPU devices too (az-jax preflight)
        object.__setattr__(self, "setup", iteration_lib.make_setup(self.config, platform))

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @functools.cached_property
    def shardings(self) -> TrainState:
        return shardings(self.mesh, iteration_lib.state_partition_specs())

    # --- state -----------------------------------------------------------------------------------------------------
    def init_state(self) -> TrainState:
        """The initial TrainState from config.seed, created on the mesh: each device computes only its own shards.

        Built inside jit with out_shardings rather than built on one device and `device_put`: with several processes
        the mesh has devices no single process can write to, and the replay buffer may not fit on one device."""
        return self._init_state()

    @functools.cached_property
    def _init_state(self):
        return jax.jit(
            functools.partial(iteration_lib.init_state, self.setup, self.config.seed), out_shardings=self.shardings
        )

    def abstract_state(self) -> TrainState:
        """Shapes, dtypes and shardings of the TrainState, without allocating it (for checkpoint restore)."""
        shapes = jax.eval_shape(self.init_state)
        with_sharding = lambda sharding, subtree: jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), subtree
        )
        return jax.tree.map(with_sharding, self.shardings, shapes, is_leaf=lambda x: isinstance(x, NamedSharding))

    # --- programs --------------------------------------------------------------------------------------------------
    @functools.cached_property
    def iterate(self):
        """state -> (state, metrics): one jitted, data-parallel iteration. The input state's buffers are donated."""
        specs = iteration_lib.state_partition_specs()
        return sharded(
            functools.partial(iteration_lib.iteration, self.setup), self.mesh, (specs,), (specs, P()), donate_argnums=0
        )

    @functools.cached_property
    def selfplay(self):
        """(state, key) -> (games, replay, summed metrics): the self-play half of the iteration alone (benchmarks,
        and the preflight's account of where the iteration's memory goes)."""

        def local(state, key):
            games, buffer, metrics = iteration_lib.selfplay(self.setup, state, device_key(key))
            return games, buffer, jax.tree.map(lambda x: jax.lax.psum(x, DEVICE_AXIS), metrics)

        specs = iteration_lib.state_partition_specs()
        return sharded(local, self.mesh, (specs, P()), (specs.games, specs.replay, P()))

    @functools.cached_property
    def learn(self):
        """(state, key) -> (params, batch_stats, opt_state, ready, metrics): the iteration's G gradient steps alone."""

        def local(state, key):
            return iteration_lib.learn(
                self.setup, state.params, state.batch_stats, state.opt_state, state.replay, device_key(key)
            )

        return sharded(local, self.mesh, (iteration_lib.state_partition_specs(), P()), (P(), P(), P(), P(), P()))

    @functools.cached_property
    def gate(self):
        """(params, batch_stats, best, iteration, key) -> (best, metrics): one gating match of the latest weights
        (`params`, `batch_stats` of iteration `iteration`) against `best`, split over the mesh (az_jax/core/gating.py).
        The input `best` is donated."""
        return sharded(
            functools.partial(iteration_lib.gate, self.setup),
            self.mesh,
            (P(), P(), P(), P(), P()),
            (P(), P()),
            donate_argnums=2,
        )

    def position_moves(self, num_simulations: int):
        """(variables, states, key) -> (raw moves [P], search moves [P]) on positions `states` [P, ...] sharded over
        the mesh (P divisible by its size): the network's raw policy and its greedy search (solver benchmarks)."""
        fn = functools.partial(iteration_lib.position_moves, self.setup, num_simulations=num_simulations)
        return sharded(fn, self.mesh, (P(), P(DEVICE_AXIS), P()), (P(DEVICE_AXIS), P(DEVICE_AXIS)))

    def match(self, opponent: arena.PlayerFn, num_games: int, num_simulations: int):
        """(variables, key) -> results [num_games]: the network against `opponent` (uniform random, rollout MCTS,
        another run's network), games split over the mesh, random openings paired with colours swapped."""
        fn = functools.partial(
            iteration_lib.match, self.setup, opponent=opponent, num_games=num_games, num_simulations=num_simulations
        )
        return sharded(fn, self.mesh, (P(), P()), P(DEVICE_AXIS))
