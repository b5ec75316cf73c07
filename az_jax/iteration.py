"""The training state and ONE jitted, data-parallel training iteration: S self-play plies + G gradient steps.

Device boundary (the only one): `jax.shard_map` over a 1-D mesh with axis "d" (`DEVICE_AXIS`). Inside it:
  * params, batch stats, optimizer state, key and counters are replicated (identical on every device);
  * the B self-play games and the replay buffer are split over devices along their leading axis;
  * each device folds the iteration's keys with its index, so devices play different games;
  * gradients and batch-norm statistics are averaged across devices with collectives.
Nothing inside talks to the host; the returned metrics are the only transfer.
"""
import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pgx
from flax import struct
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from az_jax import gating as gating_lib
from az_jax import learner
from az_jax import networks
from az_jax import replay as replay_lib
from az_jax import resign as resign_lib
from az_jax import selfplay
from az_jax.config import Config
from envs import make_env

DEVICE_AXIS = "d"


@struct.dataclass
class TrainState:
    params: Any                      # network parameters (replicated)
    batch_stats: Any                 # batch-norm running averages (replicated)
    opt_state: Any                   # SGD-momentum state incl. the schedule's step count (replicated)
    games: selfplay.SelfPlayState    # [B, ...] games in progress (sharded over devices)
    replay: replay_lib.ReplayBuffer  # [N, ...] replay buffer (sharded over devices)
    key: jax.Array                   # [2] uint32 raw key data of the run's key (replicated)
    iteration: jax.Array             # [] int32 iterations completed (replicated)
    best: gating_lib.BestPlayer | None = None       # AlphaGo Zero gating: the self-play weights (replicated)
    resign: resign_lib.ResignState | None = None    # AlphaGo Zero resignation: v_resign and its counts (replicated)


def state_partition_specs() -> TrainState:
    """PartitionSpec prefix tree of TrainState: what is replicated and what is split over the device axis. (`best`
    and `resign` are None when their switch is off; a prefix leaf over None covers nothing.)"""
    return TrainState(params=P(), batch_stats=P(), opt_state=P(), games=P(DEVICE_AXIS), replay=P(DEVICE_AXIS),
                      key=P(), iteration=P(), best=P(), resign=P())


def make_mesh(devices=None) -> Mesh:
    devices = jax.devices() if devices is None else devices
    return Mesh(np.asarray(devices), (DEVICE_AXIS,))


@dataclasses.dataclass(frozen=True)
class Trainer:
    """Everything static about a run: config, game, network, optimizer and mesh. Builds and runs iterations."""
    config: Config
    mesh: Mesh

    @functools.cached_property
    def env(self) -> pgx.Env:
        return make_env(self.config.game)[0]

    @functools.cached_property
    def network(self):
        """The network for learning: batch-norm statistics synchronised over the device axis."""
        return networks.make_network(self.config, self.env.num_actions, axis_name=DEVICE_AXIS)

    @functools.cached_property
    def acting_network(self):
        return networks.make_network(self.config, self.env.num_actions)

    def apply_fn(self, variables, observation):
        """Acting: running batch-norm averages. (variables, obs [B, ...]) -> (logits [B, A], value [B])."""
        return self.acting_network.apply(variables, observation, train=False)

    @functools.cached_property
    def optimizer(self) -> optax.GradientTransformation:
        return learner.make_optimizer(self.config)

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @functools.cached_property
    def shardings(self) -> TrainState:
        return jax.tree.map(lambda spec: NamedSharding(self.mesh, spec), state_partition_specs(),
                            is_leaf=lambda x: isinstance(x, P))

    # --- state ---------------------------------------------------------------------------------------------------
    def init_variables(self, rng_key: jax.Array) -> dict:
        obs = jnp.zeros((1, *self.env.observation_shape), jnp.float32)
        return self.acting_network.init(rng_key, obs, train=False)

    def init_state(self) -> TrainState:
        """The initial TrainState from config.seed, created on the mesh: each device computes only its own shards.

        Built inside jit with out_shardings rather than built on one device and `device_put`: with several processes
        the mesh has devices no single process can write to, and the replay buffer may not fit on one device."""
        # Build the env outside the trace: pgx creates module-level arrays when a game module is first imported.
        assert self.env is not None
        return self._init_state_jit()

    @functools.cached_property
    def _init_state_jit(self):
        return jax.jit(self._initial_state, out_shardings=self.shardings)

    def _initial_state(self, seed=None) -> TrainState:
        """`seed` (an int, or a traced int32 scalar) replaces config.seed: az_jax/apps/population.py vmaps this over the
        seeds of a population's members."""
        cfg = self.config
        root = jax.random.key(cfg.seed if seed is None else seed)
        net_key, games_key, run_key = jax.random.split(root, 3)
        variables = self.init_variables(net_key)
        obs_dtype = self.env.init(jax.random.key(0)).observation.dtype
        state = TrainState(
            params=variables["params"], batch_stats=variables["batch_stats"],
            opt_state=self.optimizer.init(variables["params"]),
            games=selfplay.init(self.env, games_key, cfg.selfplay_batch_size,
                                cfg.resign_disabled_fraction if cfg.resign else None),
            replay=replay_lib.init(cfg.replay_capacity, self.env.observation_shape, obs_dtype, self.env.num_actions,
                                  keep_search_value=cfg.value_target_mix > 0),
            key=jax.random.key_data(run_key), iteration=jnp.int32(0),
            # the first best player is the initial network (a copy: jit returns distinct buffers)
            best=gating_lib.BestPlayer(params=variables["params"], batch_stats=variables["batch_stats"],
                                       iteration=jnp.int32(0)) if cfg.gating else None,
            resign=resign_lib.init_state(cfg.v_resign_init) if cfg.resign else None)
        return state

    def abstract_state(self) -> TrainState:
        """Shapes, dtypes and shardings of the TrainState, without allocating it (for checkpoint restore)."""
        # Build the env outside the trace: pgx creates module-level arrays when a game module is first imported.
        assert self.env is not None
        shapes = jax.eval_shape(self.init_state)
        with_sharding = lambda sharding, subtree: jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), subtree)
        return jax.tree.map(with_sharding, self.shardings, shapes, is_leaf=lambda x: isinstance(x, NamedSharding))

    # --- the iteration ---------------------------------------------------------------------------------------------
    def _local_selfplay(self, state: TrainState, selfplay_key: jax.Array):
        """Self-play on one device's shard: S plies of its B/D games, written into its N/D replay rows. With gating
        the best player's weights play, else the latest."""
        variables = ({"params": state.params, "batch_stats": state.batch_stats} if state.best is None
                     else state.best.variables)
        return selfplay.play(
            self.env, self.apply_fn, selfplay.SelfPlayParams.from_config(self.config), variables, state.games,
            state.replay, selfplay_key, first_ply=state.iteration * self.config.selfplay_steps,
            num_plies=self.config.selfplay_steps, v_resign=None if state.resign is None else state.resign.v_resign)

    def _local_learn(self, params, batch_stats, opt_state, buffer: replay_lib.ReplayBuffer, learn_key: jax.Array):
        """G gradient steps on minibatches sampled from every device's replay shard, once enough outcomes exist."""
        cfg = self.config
        local_done = buffer.done.sum()
        ready = ((jax.lax.psum(local_done, DEVICE_AXIS) >= max(cfg.min_replay_size, 1))
                 & (jax.lax.pmin(local_done, DEVICE_AXIS) > 0))
        step = functools.partial(learner.train_step, network=self.network, optimizer=self.optimizer,
                                 weight_decay=cfg.weight_decay, axis_name=DEVICE_AXIS)
        local_batch = cfg.batch_size // self.num_devices
        zeros = {"loss": jnp.float32(0), "policy_loss": jnp.float32(0), "value_loss": jnp.float32(0),
                 "l2": jnp.float32(0)}

        def learn(carry, key):
            # The step always runs and `ready` selects its result: a lax.cond would put the network's backward
            # pass in a nested computation, which XLA:CPU runs ~25x slower (experiments/PERFORMANCE.md).
            batch = replay_lib.sample(buffer, key, local_batch,
                                      symmetry_game=cfg.game if cfg.augment_symmetries else None,
                                      value_target_mix=cfg.value_target_mix)
            new = step(*carry, batch)
            carry, metrics = jax.tree.map(lambda n, o: jnp.where(ready, n, o), (new[:3], new[3]), (carry, zeros))
            return carry, metrics

        # A rolled loop on every backend: on CPU the network's convolutions use az_jax/conv.py's gradient, without
        # which XLA:CPU ran the backward pass ~12-25x slower inside a loop and the steps had to be unrolled (each
        # unrolled step cost ~2 s of compile; experiments/PERFORMANCE.md §1, §4).
        (params, batch_stats, opt_state), metrics = jax.lax.scan(
            learn, (params, batch_stats, opt_state), jax.random.split(learn_key, cfg.train_steps_per_iteration))
        return params, batch_stats, opt_state, ready, jax.tree.map(jnp.mean, metrics)

    def _local_iteration(self, state: TrainState) -> tuple[TrainState, dict]:
        """Runs on one device's shard. Shapes here are per device: B/D games, N/D buffer rows."""
        cfg = self.config
        device = jax.lax.axis_index(DEVICE_AXIS)
        run_key, selfplay_key, learn_key = jax.random.split(jax.random.wrap_key_data(state.key), 3)
        games, buffer, sp = self._local_selfplay(state, jax.random.fold_in(selfplay_key, device))
        params, batch_stats, opt_state, ready, lm = self._local_learn(
            state.params, state.batch_stats, state.opt_state, buffer, jax.random.fold_in(learn_key, device))

        sp = jax.tree.map(lambda x: jax.lax.psum(x, DEVICE_AXIS), sp)
        games_done = jnp.maximum(sp["games"], 1)
        steps = cfg.train_steps_per_iteration
        metrics = {
            "selfplay/games_finished": sp["games"],
            "selfplay/mean_game_length": sp["game_length"] / games_done,
            "selfplay/decisive_fraction": sp["decisive"] / games_done,
            "selfplay/positions": jnp.int32(cfg.positions_per_iteration),
            "replay/positions_with_outcome": jax.lax.psum(buffer.done.sum(), DEVICE_AXIS),
            "train/steps": jnp.where(ready, steps, 0),
            "train/positions_trained_per_generated": jnp.where(ready, steps * cfg.batch_size, 0)
            / cfg.positions_per_iteration,
            "train/learning_rate": learner.current_learning_rate(cfg, opt_state),
            **{f"train/{k}": v for k, v in lm.items()},
        }
        resign = state.resign
        if resign is not None:  # v_resign is re-set on device from the played-out games of every device
            resign, resign_metrics = resign_lib.update(resign, sp["resign_counts"],
                                                       target=cfg.resign_target_false_positive,
                                                       calibration_games=cfg.resign_calibration_games)
            metrics.update(resign_metrics, **{"resign/resigned_fraction": sp["resigned"] / games_done})
        new_state = TrainState(params=params, batch_stats=batch_stats, opt_state=opt_state, games=games,
                               replay=buffer, key=jax.random.key_data(run_key), iteration=state.iteration + 1,
                               best=state.best, resign=resign)
        return new_state, metrics

    def _shard(self, fn, in_specs, out_specs, donate_argnums=()):
        # check_vma=False: mctx's internal while_loops are not written for shard_map's varying-axis types. The
        # replicated outputs are made identical by construction (pmean'd gradients, synchronised batch norm);
        # learner.train_step's pmean relies on this mode (see its docstring).
        # Explicit output shardings: without them a 1-device mesh returns single-device arrays, and the next call,
        # whose inputs are those outputs, is a new jit signature (a retrace) although it compiles nothing new.
        out_shardings = jax.tree.map(lambda spec: NamedSharding(self.mesh, spec), out_specs,
                                     is_leaf=lambda x: isinstance(x, P))
        return jax.jit(jax.shard_map(fn, mesh=self.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False),
                       out_shardings=out_shardings, donate_argnums=donate_argnums)

    @functools.cached_property
    def selfplay_only(self):
        """(state, key) -> (games, replay, summed metrics): the self-play half alone, for benchmarks."""
        def fn(state, key):
            games, buffer, sp = self._local_selfplay(state, jax.random.fold_in(key, jax.lax.axis_index(DEVICE_AXIS)))
            return games, buffer, jax.tree.map(lambda x: jax.lax.psum(x, DEVICE_AXIS), sp)
        specs = state_partition_specs()
        return self._shard(fn, (specs, P()), (specs.games, specs.replay, P()))

    @functools.cached_property
    def learn_only(self):
        """(state, key) -> (params, batch_stats, opt_state, ready, metrics): the G gradient steps alone."""
        def fn(state, key):
            key = jax.random.fold_in(key, jax.lax.axis_index(DEVICE_AXIS))
            return self._local_learn(state.params, state.batch_stats, state.opt_state, state.replay, key)
        return self._shard(fn, (state_partition_specs(), P()), (P(), P(), P(), P(), P()))

    @functools.cached_property
    def gate(self):
        """(params, batch_stats, best, iteration, key) -> (best, metrics): one gating match of the latest weights
        (`params`, `batch_stats` of iteration `iteration`) against `best`, split over the mesh (az_jax/gating.py).
        The input `best` is donated."""
        from az_jax.agent import greedy_search
        from az_jax.evaluation.evaluate import default_opening_plies
        from envs import get_game
        cfg = self.config
        sims = cfg.gating_simulations or cfg.num_simulations
        player_fn = lambda variables: lambda states, key: greedy_search(self.apply_fn, self.env, cfg, variables, key,
                                                                         states, sims)[0]

        def fn(params, batch_stats, best, iteration, key):
            key = jax.random.fold_in(key, jax.lax.axis_index(DEVICE_AXIS))
            return gating_lib.gate(
                self.env, player_fn, {"params": params, "batch_stats": batch_stats}, best, iteration, key,
                num_games=cfg.gating_games // self.num_devices, max_length=get_game(cfg.game).max_length,
                opening_plies=default_opening_plies(cfg.game), threshold=cfg.gating_threshold, axis_name=DEVICE_AXIS)
        return self._shard(fn, (P(), P(), P(), P(), P()), (P(), P()), donate_argnums=2)

    @functools.cached_property
    def iteration(self):
        """state -> (state, metrics): one jitted, data-parallel iteration. The input state's buffers are donated."""
        specs = state_partition_specs()
        return self._shard(self._local_iteration, (specs,), (specs, P()), donate_argnums=0)
