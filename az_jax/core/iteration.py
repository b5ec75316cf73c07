"""The training state and the training iteration as pure functions: S self-play plies, then G gradient steps.

    setup = make_setup(config)                       # the static parts: game, network, self-play settings
    state = init_state(setup, seed)                  # the whole run's TrainState (global shapes)
    state, metrics = iteration(setup, state)         # ONE device's shard, inside devices.sharded

`iteration` and its halves (`selfplay`, `learn`) and `gate` are written for one device's shard and run inside
`az_jax.core.devices.sharded` over the axis DEVICE_AXIS; the programs that compose them are az_jax/runtime/trainer.py
(one run), az_jax/apps/population.py (`jax.vmap` over members) and az_jax/apps/bench.py (each half timed alone). Per-run
numbers that a population varies (the seed, the schedule's learning rates) are arguments, so they may be data.

Inside the boundary: params, batch stats, optimizer state, key and counters are replicated (identical on every
device); the B self-play games and the N replay rows are split over devices along their leading axis; each device
folds the iteration's keys with its index, so devices play different games; gradients and batch-norm statistics are
averaged across devices with collectives. Nothing here talks to the host; the returned metrics are the only transfer.
"""

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
import pgx
from flax import struct
from jax.sharding import PartitionSpec as P

from az_jax.core import arena, learner, networks
from az_jax.core import gating as gating_lib
from az_jax.core import reanalyse as reanalyse_lib
from az_jax.core import replay as replay_lib
from az_jax.core import resign as resign_lib
from az_jax.core import search as search_lib
from az_jax.core import selfplay as selfplay_lib
from az_jax.core.config import Config, keeps_search_value
from az_jax.core.devices import DEVICE_AXIS, device_key, first_index
from envs import get_game, make_env

# A flax variable collection: {module name: {…: array}} nested as the network's modules are
Variables = Mapping[str, Any]


@struct.dataclass
class TrainState:
    params: Variables  # network parameters (replicated)
    batch_stats: Variables  # batch-norm running averages (replicated)
    opt_state: optax.OptState  # SGD-momentum state incl. the schedule's step count (replicated)
    games: selfplay_lib.SelfPlayState  # [B, ...] games in progress (sharded over devices)
    replay: replay_lib.ReplayBuffer  # [N, ...] replay buffer (sharded over devices)
    key: jax.Array  # [2] uint32 raw key data of the run's key (replicated)
    iteration: jax.Array  # [] int32 iterations completed (replicated)
    best: gating_lib.BestPlayer | None = None  # AlphaGo Zero gating: the self-play weights (replicated)
    resign: resign_lib.ResignState | None = None  # AlphaGo Zero resignation: v_resign and its counts (replicated)


def state_partition_specs() -> TrainState:
    """PartitionSpec prefix tree of TrainState: what is replicated and what is split over the device axis. (`best`
    and `resign` are None when their switch is off; a prefix leaf over None covers nothing.)"""
    replicated: Any = P()  # a PartitionSpec leaf where TrainState has a subtree (or an array)
    split: Any = P(DEVICE_AXIS)
    return TrainState(
        params=replicated,
        batch_stats=replicated,
        opt_state=replicated,
        games=split,
        replay=split,
        key=replicated,
        iteration=replicated,
        best=replicated,
        resign=replicated,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class Setup:
    """The static parts of a run, made once from its Config by `make_setup`. The network enters the iteration only
    through `apply_fn` and `learn_apply`, so a program may wrap them (the population runs them once per member)."""

    config: Config
    env: pgx.Env
    network: nn.Module  # the acting network; its `init` makes the variables
    apply_fn: search_lib.ApplyFn  # acting: running batch-norm averages
    learn_apply: learner.LearnApplyFn  # learning: batch statistics synchronised over DEVICE_AXIS
    selfplay: selfplay_lib.SelfPlayConfig  # self-play's search and move settings

    @functools.cached_property
    def play_apply(self) -> search_lib.ApplyFn:
        """The network of greedy play outside self-play (evaluation, gating, Agent, the engines): `apply_fn`, or with
        `eval_symmetry_ensemble` its average over the game's symmetries (search_lib.symmetry_ensemble). Made once per
        Setup, so every program that closes over it sees the same function."""
        if self.config.eval_symmetry_ensemble:
            return search_lib.symmetry_ensemble(self.apply_fn, self.config.game)
        return self.apply_fn

    def play_search(self, num_simulations: int) -> search_lib.SearchConfig:
        """The search of greedy play (gating, evaluation) at `num_simulations`."""
        return search_lib.SearchConfig.for_play(self.config, num_simulations)


def make_setup(config: Config, platform: str | None = None) -> Setup:
    """Builds the game (outside any trace: pgx creates module-level arrays when a game is first imported) and the
    network functions, for devices of `platform` (default: JAX's default backend)."""
    env = make_env(config.game)[0]
    network = networks.make_network(config, env.num_actions, platform=platform)
    learning = networks.make_network(config, env.num_actions, axis_name=DEVICE_AXIS, platform=platform)
    return Setup(
        config=config,
        env=env,
        network=network,
        apply_fn=lambda variables, obs: network.apply(variables, obs, train=False),  # type: ignore[arg-type,return-value]
        learn_apply=learner.learning_apply(learning, aux=config.aux_targets or config.wdl_value),
        selfplay=selfplay_lib.SelfPlayConfig.from_config(config),
    )


# --- state -----------------------------------------------------------------------------------------------------------
def init_variables(setup: Setup, rng_key: jax.Array) -> dict:
    """{'params', 'batch_stats'} of a fresh network; the key is consumed."""
    obs = jnp.zeros((1, *setup.env.observation_shape), jnp.float32)
    return setup.network.init(rng_key, obs, train=False)  # type: ignore[return-value]


def init_state(setup: Setup, seed: int | jax.Array) -> TrainState:
    """The initial TrainState of a run with `seed` (an int, or a traced int32 scalar), global shapes."""
    cfg = setup.config
    net_key, games_key, run_key = jax.random.split(jax.random.key(seed), 3)
    variables = init_variables(setup, net_key)
    obs_dtype = setup.env.init(jax.random.key(0)).observation.dtype
    return TrainState(
        params=variables["params"],
        batch_stats=variables["batch_stats"],
        opt_state=learner.make_optimizer(cfg).init(variables["params"]),
        games=selfplay_lib.init(
            setup.env,
            games_key,
            cfg.selfplay_batch_size,
            cfg.resign_disabled_fraction if cfg.resign else None,
            forking=cfg.fork_fraction > 0,
        ),
        replay=replay_lib.init(
            cfg.replay_capacity,
            setup.env.observation_shape,
            obs_dtype,
            setup.env.num_actions,
            keep_search_value=keeps_search_value(cfg),
            keep_ownership=cfg.aux_ownership_weight > 0,
            keep_score=cfg.aux_score_weight > 0,
            policy_entries=(get_game(cfg.game).max_legal_actions or 0) if cfg.compact_replay else 0,
            keep_scored=cfg.resign and cfg.aux_targets,
            state_example=setup.env.init(jax.random.key(0)) if cfg.reanalyse_batches else None,
            keep_value_known=cfg.mask_random_opening_values,
        ),
        key=jax.random.key_data(run_key),
        iteration=jnp.int32(0),
        # the first best player is the initial network (a copy: jit returns distinct buffers)
        best=gating_lib.BestPlayer(
            params=variables["params"], batch_stats=variables["batch_stats"], iteration=jnp.int32(0)
        )
        if cfg.gating
        else None,
        resign=resign_lib.init_state(cfg.v_resign_init) if cfg.resign else None,
    )


# --- one device's shard of the iteration ----------------------------------------------------------------------------
def selfplay(
    setup: Setup, state: TrainState, rng_key: jax.Array
) -> tuple[selfplay_lib.SelfPlayState, replay_lib.ReplayBuffer, dict]:
    """S plies of this device's B/D games, written into its N/D replay rows; the key (already this device's) is
    consumed. With gating the best player's weights play, else the latest. Metrics are this device's sums."""
    variables = (
        {"params": state.params, "batch_stats": state.batch_stats} if state.best is None else state.best.variables
    )
    return selfplay_lib.play(
        setup.env,
        setup.apply_fn,
        variables,
        setup.selfplay,
        state.games,
        state.replay,
        rng_key,
        first_ply=state.iteration * setup.selfplay.num_plies,
        v_resign=None if state.resign is None else state.resign.v_resign,
        optimizer_step=learner.step_count(state.opt_state),
    )


def reanalyse(
    setup: Setup, params, batch_stats, buffer: replay_lib.ReplayBuffer, rng_key: jax.Array
) -> tuple[replay_lib.ReplayBuffer, dict]:
    """Reanalyse on this device's replay shard: k × B/D of its trainable rows searched again by the latest weights
    (with gating too: MuZero Reanalyse's latest network), in groups of self-play's size; the key (already this
    device's) is consumed. Metrics are this device's sums."""
    cfg = setup.config
    local_games = cfg.selfplay_batch_size // jax.lax.axis_size(DEVICE_AXIS)
    group = cfg.search_batch_size if 0 < cfg.search_batch_size < local_games else local_games
    num_positions = cfg.reanalyse_batches * local_games
    return reanalyse_lib.reanalyse(
        setup.env,
        setup.apply_fn,
        {"params": params, "batch_stats": batch_stats},
        setup.selfplay.search,
        buffer,
        rng_key,
        num_positions=num_positions,
        chunks=num_positions // group,
    )


def learn(
    setup: Setup,
    params,
    batch_stats,
    opt_state,
    buffer: replay_lib.ReplayBuffer,
    rng_key: jax.Array,
    learning_rates: jax.Array | None = None,
):
    """G gradient steps on minibatches sampled from every device's replay shard, once enough outcomes exist; the key
    (already this device's) is consumed. `learning_rates` ([K], may be data) replace the config's schedule values.
    Returns (params, batch_stats, opt_state, ready [] bool, metrics): the steps' mean loss terms and gradient norm,
    and "finite", 1.0 when every step's loss and gradient norm and the resulting params, batch statistics and
    optimizer state are finite, else 0.0 (the host loop stops on 0.0: az_jax/runtime/loop.py)."""
    cfg = setup.config
    local_done = buffer.done.sum()
    ready = (jax.lax.psum(local_done, DEVICE_AXIS) >= max(cfg.min_replay_size, 1)) & (
        jax.lax.pmin(local_done, DEVICE_AXIS) > 0
    )
    optimizer = learner.make_optimizer(cfg, learning_rates)
    local_batch = cfg.batch_size // jax.lax.axis_size(DEVICE_AXIS)
    # the metrics of a step that does not run (not `ready`)
    terms: tuple[str, ...] = ("loss", "policy_loss", "value_loss", "l2", "grad_norm")
    terms += ("ownership_loss",) * (cfg.aux_ownership_weight > 0) + ("score_loss",) * (cfg.aux_score_weight > 0)
    idle = {**dict.fromkeys(terms, jnp.float32(0)), "finite": True}

    def step(carry, key):
        # The step always runs and `ready` selects its result: a lax.cond would put the network's backward pass in a
        # nested computation, which XLA:CPU runs far slower (experiments/performance/README.md).
        params, batch_stats, opt_state = carry
        batch = replay_lib.sample(
            buffer,
            key,
            local_batch,
            symmetry_game=cfg.game if cfg.augment_symmetries else None,
            value_target_mix=learner.value_target_mix(cfg, opt_state),
        )
        *new, metrics = learner.train_step(
            params,
            batch_stats,
            opt_state,
            batch,
            apply_fn=setup.learn_apply,
            optimizer=optimizer,
            weight_decay=cfg.weight_decay,
            axis_name=DEVICE_AXIS,
            ownership_weight=cfg.aux_ownership_weight,
            score_weight=cfg.aux_score_weight,
            micro_batches=cfg.micro_batches,
        )
        metrics["finite"] = jnp.isfinite(metrics["loss"]) & jnp.isfinite(metrics["grad_norm"])
        return jax.tree.map(lambda n, o: jnp.where(ready, n, o), (tuple(new), metrics), (carry, idle))

    (params, batch_stats, opt_state), metrics = jax.lax.scan(
        step, (params, batch_stats, opt_state), jax.random.split(rng_key, cfg.train_steps_per_iteration)
    )
    finite = metrics.pop("finite").all() & learner.all_finite((params, batch_stats, opt_state))
    metrics = {**jax.tree.map(jnp.mean, metrics), "finite": finite.astype(jnp.float32)}
    return params, batch_stats, opt_state, ready, metrics


def iteration(setup: Setup, state: TrainState, learning_rates: jax.Array | None = None) -> tuple[TrainState, dict]:
    """One iteration on this device's shard (B/D games, N/D buffer rows): self-play, then learning; returns the new
    state and the iteration's metrics (summed or averaged over devices, identical on every device)."""
    cfg = setup.config
    run_key, selfplay_key, learn_key = jax.random.split(jax.random.wrap_key_data(state.key), 3)
    games, buffer, sp = selfplay(setup, state, device_key(selfplay_key))
    reanalysed: dict[str, jax.Array] = {}
    if cfg.reanalyse_batches:  # a key of its own only with the switch on: off, the iteration is the program it was
        learn_key, reanalyse_key = jax.random.split(learn_key)
        buffer, reanalysed = reanalyse(setup, state.params, state.batch_stats, buffer, device_key(reanalyse_key))
    params, batch_stats, opt_state, ready, lm = learn(
        setup, state.params, state.batch_stats, state.opt_state, buffer, device_key(learn_key), learning_rates
    )
    sp = jax.tree.map(lambda x: jax.lax.psum(x, DEVICE_AXIS), sp)
    games_done = jnp.maximum(sp["games"], 1)
    steps = cfg.train_steps_per_iteration
    num_devices = jax.lax.axis_size(DEVICE_AXIS)
    metrics = {
        "selfplay/games_finished": sp["games"],
        "selfplay/mean_game_length": sp["game_length"] / games_done,
        "selfplay/decisive_fraction": sp["decisive"] / games_done,
        "selfplay/positions": jnp.int32(cfg.positions_per_iteration),
        "replay/positions_with_outcome": jax.lax.psum(buffer.done.sum(), DEVICE_AXIS),
        # plies searched in full, over every device's S plies (playout cap randomization; 1 when off)
        "selfplay/full_search_fraction": sp["full_search_plies"] / (cfg.selfplay_steps * num_devices),
        "train/steps": jnp.where(ready, steps, 0),
        "train/positions_trained_per_generated": jnp.where(ready, steps * cfg.batch_size, 0)
        / cfg.positions_per_iteration,
        "train/learning_rate": learner.current_learning_rate(cfg, opt_state, learning_rates),
        **{f"train/{k}": v for k, v in lm.items()},
    }
    if "forked" in sp:  # game forking: the games that ended whose slot's next game starts from a fork
        metrics["selfplay/forked_fraction"] = sp["forked"] / games_done
    if reanalysed:
        reanalysed = jax.tree.map(lambda x: jax.lax.psum(x, DEVICE_AXIS), reanalysed)
        metrics["reanalyse/positions"] = reanalysed["positions"]
        metrics["reanalyse/policy_change"] = reanalysed["policy_change"] / jnp.maximum(reanalysed["positions"], 1)
    resign = state.resign
    if resign is not None:  # v_resign is re-set on device from the played-out games of every device
        resign, resign_metrics = resign_lib.update(
            resign,
            sp["resign_counts"],
            target=cfg.resign_target_false_positive,
            calibration_games=cfg.resign_calibration_games,
        )
        metrics.update(resign_metrics, **{"resign/resigned_fraction": sp["resigned"] / games_done})
    new_state = TrainState(
        params=params,
        batch_stats=batch_stats,
        opt_state=opt_state,
        games=games,
        replay=buffer,
        key=jax.random.key_data(run_key),
        iteration=state.iteration + 1,
        best=state.best,
        resign=resign,
    )
    return new_state, metrics


# --- matches on the training mesh ------------------------------------------------------------------------------------
def greedy_player(setup: Setup, variables: dict, num_simulations: int) -> arena.PlayerFn:
    """(states [B, ...], key) -> actions [B]: the network with `variables` playing greedily by search."""
    search = setup.play_search(num_simulations)
    return lambda states, key: search_lib.greedy_search(setup.play_apply, setup.env, variables, key, states, search)[0]


def gate(
    setup: Setup, params, batch_stats, best: gating_lib.BestPlayer, candidate_iteration: jax.Array, rng_key: jax.Array
) -> tuple[gating_lib.BestPlayer, dict]:
    """This device's share of one gating match (AlphaGo Zero, Methods, "Evaluator"): the latest weights against
    `best`, gating_games split over the devices; the key (replicated) is consumed."""
    cfg = setup.config
    sims = cfg.gating_simulations or cfg.num_simulations
    return gating_lib.gate(
        setup.env,
        lambda variables: greedy_player(setup, variables, sims),
        {"params": params, "batch_stats": batch_stats},
        best,
        candidate_iteration,
        device_key(rng_key),
        num_games=cfg.gating_games // jax.lax.axis_size(DEVICE_AXIS),
        max_length=get_game(cfg.game).max_length,
        opening_plies=get_game(cfg.game).opening_plies,
        threshold=cfg.gating_threshold,
        axis_name=DEVICE_AXIS,
    )


def position_moves(
    setup: Setup, variables: dict, states: pgx.State, rng_key: jax.Array, *, num_simulations: int
) -> tuple[jax.Array, jax.Array]:
    """This device's moves in its share of a set of positions `states` [n, ...]: the raw policy's argmax over legal
    moves and the greedy search's move at `num_simulations`, each [n]. The key (replicated) is consumed."""
    logits = setup.play_apply(variables, states.observation)[0]  # [n, A]
    raw = jnp.argmax(search_lib.mask_logits(logits, states.legal_action_mask), axis=-1)
    return raw, greedy_player(setup, variables, num_simulations)(states, device_key(rng_key))


def match(
    setup: Setup, variables: dict, rng_key: jax.Array, *, opponent: arena.PlayerFn, num_games: int, num_simulations: int
) -> jax.Array:
    """This device's share of a match of the network (greedy search) against `opponent`: `num_games` games in all,
    random openings paired with colours swapped (az_jax/core/arena.py); the key (replicated) is consumed. Returns this
    device's results [num_games / D], the agent's point of view."""
    local_games = num_games // jax.lax.axis_size(DEVICE_AXIS)
    game = get_game(setup.config.game)
    return arena.play_match(
        setup.env,
        greedy_player(setup, variables, num_simulations),
        opponent,
        device_key(rng_key),
        local_games,
        game.max_length,
        first_game=first_index(local_games),
        opening_plies=game.opening_plies,
    )
