"""Reinforcement learning of the policy network p_ρ by policy gradient (Silver et al., Nature 2016, Methods, "Policy
network: reinforcement learning"; REINFORCE: Williams 1992).

The paper's procedure: p_ρ has p_σ's architecture and starts at ρ = σ. Each iteration plays a mini-batch of n games
in parallel between the current p_ρ and an opponent p_ρ⁻ drawn uniformly from a pool of earlier iterations (at first
σ alone); every 500 iterations the current ρ joins the pool. The reward is 0 until the end, z = ±1 from the final
outcome for the player to move, and ρ follows

    Δρ = (α / n) Σ_i Σ_t ∂ log p_ρ(a_t^i | s_t^i) / ∂ρ · (z_t^i − b(s_t^i))

over the learner's own moves. Paper scale: 10,000 mini-batches of n = 128 games. Its result: sampling each move from
p_ρ, the RL network won more than 80 % of games against p_σ (also sampled).

What the paper leaves open, and what is chosen here:
- The step size α is not given. Plain SGD (no momentum, as the SL stage) on the paper's normalisation (summed over a
  game's moves, averaged over the n games), α = 1e-4 by default. Measured on the 9×9 p_σ (k = 32, 8 layers, 48
  planes; 16 games of p_σ against itself, ~40 learner moves a game): the gradient's norm is ~90 against the
  parameters' ~15, and one step's mean KL(p_σ || p_ρ) over the games' positions is 0.35 at α = 1e-3 (the chosen
  moves of won and lost games alike become less likely: too large; three such steps took p_ρ to 1 win in 16 against
  p_σ), 0.03 at 3e-4 and 0.004 at 1e-4, where won moves gain and lost moves lose probability as they should. With
  n = 128 the gradient's noise is smaller; 19×19 games are ~4 times longer, so the sum is larger. Not tuned further.
- The baseline b: 0, the paper's first pass. `reinforce_grads` takes a baseline array [K, n] (e.g. v_θ of the
  recorded positions, the paper's second pass), but `train` always passes none.
- The sampling distribution and its log-probability: moves are sampled at temperature 1 from p_ρ restricted to the
  sensible points (legal and not filling an own eye, `policy_player.sensible_moves`), the player passes when none is
  left, and log p_ρ(a|s) in the update is that same renormalised distribution (the policy that actually played), so
  a forced pass and a position with one sensible point give no gradient.
- Colours: in each device's share of the batch the first half of the games has p_ρ as Black, the second as White
  (`Games.learner_black`), so p_ρ plays Black in exactly half the games.
- A game ends when pgx says so: two passes in a row, a positional-superko repetition (the mover loses), or
  `max_moves` plies, after which pgx scores the board (Tromp-Taylor area, komi 7.5; pgx's own cap is 2 · N²).
- Evaluation (`win_rate`, `eval_every`): p_ρ against p_σ, both sampling at temperature 1, as the paper's comparison.

Program shape: all n games of an iteration are one jitted `lax.while_loop` over plies (`play_games`), split over the
devices of the mesh (`az_jax.core.devices.sharded`), until every game has ended. At each ply the features of all games
are computed once (`sensible_moves`); the learner's half of the batch (the Black games at even plies, the White ones at
odd plies) goes through p_ρ and the other half through p_ρ⁻. The learner's inputs are kept for the update as 0/1 `bool`
planes, [K, n, N, N, planes] with K = ⌈max_moves / 2⌉ learner moves per game: for 9×9, 48 planes, n = 128, 81 · 128 ·
81 · 48 bytes = 40 MB (160 MB as float32); for 19×19 361 · 128 · 361 · 48 = 0.8 GB. The update (`reinforce_grads`)
goes over the K rows of n positions in a loop that adds up each row's gradient, so its activations are one row's.

A run directory: config.json (the RLConfig, the SL run and step it started from, the network's SLConfig), metrics.jsonl
(one line per iteration), checkpoints/ (orbax: the training state and the opponent pool as one stacked pytree).

    config = RLConfig(games=128, iterations=10_000)
    train(config, "runs/alphago/sl9", "runs/alphago/rl9")
    sl_config, params, step = restore_params("runs/alphago/rl9")     # p_ρ, as supervised.restore_params gives p_σ
"""

import dataclasses
import functools
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any, cast

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pgx
import pgx.go
from flax import struct
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from az_jax.alphago import checkpoints, stage_loop, supervised
from az_jax.alphago.policy_player import sensible_moves
from az_jax.alphago.supervised import SLConfig
from az_jax.core import devices
from az_jax.runtime import files
from az_jax.runtime.metrics import truncate_metrics

KOMI = 7.5  # pgx's (pgx.make("go_9x9") and "go_19x19")
STAGE = "rl_policy"  # config.json's "stage": marks an RL run directory
_UNSENSIBLE = -1e9  # logit of a point that is not sensible in the update (finite: a row with none stays finite)
# Fields that may differ when a run is resumed: they change neither the games nor the updates.
_RESUMABLE = ("iterations", "checkpoint_every", "eval_every", "eval_games")


class RLError(supervised.SLError):
    """A run directory that does not fit the command (another config, another SL run, a damaged checkpoint). A kind of
    SLError, so code that loads a policy network's run catches both."""


@dataclasses.dataclass(frozen=True)
class RLConfig:
    games: int = 128  # n, games per iteration; even: p_ρ is Black in one half, White in the other
    iterations: int = 10_000
    learning_rate: float = 1e-4  # α of plain SGD (not in the paper: see the module docstring)
    pool_every: int = 500  # the current ρ joins the opponent pool after every this many iterations
    max_moves: int = 0  # plies before pgx ends and scores a game; 0: pgx's own cap, 2 · N²
    seed: int = 0
    checkpoint_every: int = 100
    eval_every: int = 100  # iterations between evaluations against p_σ (and at the end)
    eval_games: int = 128  # games of p_ρ against p_σ per evaluation; 0: none

    def __post_init__(self):
        checks = {
            "games": self.games >= 2 and self.games % 2 == 0,
            "iterations": self.iterations >= 1,
            "learning_rate": self.learning_rate > 0 and math.isfinite(self.learning_rate),
            "pool_every": self.pool_every >= 1,
            "max_moves": self.max_moves >= 0,
            "checkpoint_every": self.checkpoint_every >= 1,
            "eval_every": self.eval_every >= 1,
            "eval_games": self.eval_games >= 0 and self.eval_games % 2 == 0,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            k = bad[0]
            raise ValueError(f"RLConfig: invalid {k}={getattr(self, k)!r}")

    def plies(self, size: int) -> int:
        """The cap on plies per game on a size × size board."""
        return self.max_moves or 2 * size * size


@struct.dataclass
class Games:
    """A mini-batch of played games; row k of the [K, n] arrays is each game's k-th learner move (ply 2k of a game
    where the learner is Black, ply 2k + 1 where it is White), K = ⌈plies / 2⌉."""

    planes: chex.Array  # [K, n, N, N, planes] bool: the learner's input at its move
    sensible: chex.Array  # [K, n, N²] bool: the points it could choose from
    action: chex.Array  # [K, n] int32: the point it chose (N² for a pass)
    mask: chex.Array  # [K, n] bool: a move it chose (the game was running and a point was sensible)
    moves: chex.Array  # [T, n] int32: every ply's action, both players (T = plies; after the end: undefined)
    outcome: chex.Array  # [n] float32: z = ±1 for the learner (the same at each of its moves)
    learner_black: chex.Array  # [n] bool
    length: chex.Array  # [n] int32: plies played (passes included)


@dataclasses.dataclass(frozen=True)
class RLState:
    params: dict
    opt_state: optax.OptState
    iteration: jax.Array  # [] int32


jax.tree_util.register_dataclass(RLState, data_fields=["params", "opt_state", "iteration"], meta_fields=[])


@functools.cache
def go_env(size: int, plies: int) -> pgx.go.Go:
    """pgx Go of pgx.make's rules (komi 7.5) that ends and scores a game after `plies` plies."""
    return pgx.go.Go(size=size, komi=KOMI, max_terminal_steps=plies)


# -- playing a mini-batch ----------------------------------------------------------------------------------------------


def _play(
    network: nn.Module,
    num_planes: int,
    size: int,
    games: int,
    plies: int,
    learner,
    opponent,
    key: jax.Array,
) -> Games:
    """`games` games, learner vs opponent, on this device (the first half with the learner as Black)."""
    env = go_env(size, plies)
    p, h, rows = size * size, games // 2, (plies + 1) // 2
    init_key, play_key = jax.random.split(key)
    state = jax.vmap(env.init)(jax.random.split(init_key, games))
    step = jax.vmap(env.step)
    learner_black = jnp.arange(games) < h
    buffers = (
        jnp.zeros((rows, games, size, size, num_planes), bool),
        jnp.zeros((rows, games, p), bool),
        jnp.full((rows, games), p, jnp.int32),
        jnp.zeros((rows, games), bool),
        jnp.full((plies, games), p, jnp.int32),
    )

    def body(carry):
        t, state, rewards, buffers = carry
        planes, sensible = sensible_moves(state)
        x = planes[..., :num_planes]
        lo = (t % 2) * h  # the learner's games at this ply: its Black games at even plies, its White ones at odd
        mine = jax.lax.dynamic_slice_in_dim(x, lo, h)
        theirs = jax.lax.dynamic_slice_in_dim(x, h - lo, h)
        logits = jnp.zeros((games, p), jnp.float32)
        learner_logits = cast(jax.Array, network.apply({"params": learner}, mine))
        opponent_logits = cast(jax.Array, network.apply({"params": opponent}, theirs))
        logits = jax.lax.dynamic_update_slice_in_dim(logits, learner_logits, lo, 0)
        logits = jax.lax.dynamic_update_slice_in_dim(logits, opponent_logits, h - lo, 0)
        point = jax.random.categorical(jax.random.fold_in(play_key, t), jnp.where(sensible, logits, -jnp.inf))
        chose = sensible.any(axis=-1)
        action = jnp.where(chose, point, p).astype(jnp.int32)
        all_planes, all_sensible, all_action, all_mask, moves = buffers
        row, running = t // 2, ~state.terminated

        def put(buffer, value):
            value = jax.lax.dynamic_slice_in_dim(value, lo, h)[None]
            return jax.lax.dynamic_update_slice(buffer, value, (row, lo) + (0,) * (buffer.ndim - 2))

        buffers = (
            put(all_planes, x.astype(bool)),
            put(all_sensible, sensible),
            put(all_action, action),
            put(all_mask, running & chose),
            jax.lax.dynamic_update_slice(moves, action[None], (t, 0)),
        )
        state = step(state, action)
        return t + 1, state, rewards + state.rewards, buffers

    def cond(carry):
        t, state, _, _ = carry
        return (t < plies) & ~state.terminated.all()

    carry = (jnp.int32(0), state, jnp.zeros((games, 2), jnp.float32), buffers)
    _, state, rewards, buffers = jax.lax.while_loop(cond, body, carry)
    # pgx's rewards are per player id; the player id of Black (colour 0) is _player_order[0].
    black = jnp.take_along_axis(rewards, state._player_order[:, :1], axis=1)[:, 0]
    outcome = jnp.where(learner_black, black, -black)
    length = state._x.step_count
    planes, sensible, action, mask, moves = buffers
    return Games(planes, sensible, action, mask, moves, outcome, learner_black, length)


_GAMES_AXIS_1 = P(None, devices.DEVICE_AXIS)
_GAMES_SPECS = Games(
    planes=_GAMES_AXIS_1,
    sensible=_GAMES_AXIS_1,
    action=_GAMES_AXIS_1,
    mask=_GAMES_AXIS_1,
    moves=_GAMES_AXIS_1,
    outcome=P(devices.DEVICE_AXIS),
    learner_black=P(devices.DEVICE_AXIS),
    length=P(devices.DEVICE_AXIS),
)


@functools.cache
def _play_program(network: nn.Module, num_planes: int, size: int, games: int, plies: int, mesh: Mesh) -> Callable:
    if games % (2 * mesh.size):
        raise ValueError(f"{games} games do not split into an even number on each of the {mesh.size} devices")

    def play(learner, opponent, key):
        key = devices.device_key(key)
        return _play(network, num_planes, size, games // mesh.size, plies, learner, opponent, key)

    return devices.sharded(play, mesh, in_specs=(P(), P(), P()), out_specs=_GAMES_SPECS)


def play_games(
    network: nn.Module,
    num_planes: int,
    learner,
    opponent,
    key: jax.Array,
    *,
    size: int,
    games: int,
    plies: int = 0,
    mesh: Mesh | None = None,
) -> Games:
    """`games` games of Go, learner (params of `network`) against opponent, both sampling at temperature 1 from
    their sensible points, in one compiled call; `plies` caps each game (0: 2 · N²). The games are split over the
    mesh's devices, each device's first half with the learner as Black."""
    mesh = mesh or devices.make_mesh()
    learner, opponent = jax.device_put((learner, opponent), devices.shardings(mesh, P()))
    return _play_program(network, num_planes, size, games, plies or 2 * size * size, mesh)(learner, opponent, key)


def win_rate(
    network: nn.Module,
    num_planes: int,
    params_a,
    params_b,
    games: int,
    key: jax.Array,
    size: int,
    *,
    plies: int = 0,
    mesh: Mesh | None = None,
) -> float:
    """a's score against b (wins / games; pgx's komi 7.5 leaves no draws) over `games` games, each side sampling at
    temperature 1, a playing Black in half the games and White in the other half. The games are `play_games`'s (the
    same compiled program as training's when the number of games is the same; the recorded planes go unused)."""
    games_played = play_games(
        network, num_planes, params_a, params_b, key, size=size, games=games, plies=plies, mesh=mesh
    )
    return float(np.mean(np.asarray(games_played.outcome) > 0))


# -- the REINFORCE update ----------------------------------------------------------------------------------------------


def log_probability(network: nn.Module, params, planes: jax.Array, sensible: jax.Array, action: jax.Array) -> jax.Array:
    """[B] log p(a|s) under the distribution the player sampled from: the network's softmax renormalised over the
    sensible points. planes [B, N, N, C] (any 0/1 dtype), sensible [B, N²], action [B] (a pass: any value)."""
    logits = cast(jax.Array, network.apply({"params": params}, planes.astype(jnp.float32)))
    log_p = jax.nn.log_softmax(jnp.where(sensible, logits, _UNSENSIBLE), axis=-1)
    return jnp.take_along_axis(log_p, jnp.minimum(action, logits.shape[-1] - 1)[:, None], axis=-1)[:, 0]


def reinforce_grads(network: nn.Module, params, games: Games, baseline: jax.Array | None = None):
    """(loss, gradient) of the REINFORCE loss −(1/n) Σ_i Σ_t log p_ρ(a_t^i|s_t^i) · (z^i − b_t^i) over the learner's
    moves (`games.mask`), so an SGD step of α is the paper's Δρ. baseline: [K, n] or None (b = 0). The K rows of n
    positions are visited one at a time (a loop that adds up their gradients, up to the longest game's rows)."""
    n = games.outcome.shape[0]
    advantage = games.outcome[None, :] - (0.0 if baseline is None else baseline)  # [K, n]

    def row_loss(params, k):
        log_p = log_probability(network, params, games.planes[k], games.sensible[k], games.action[k])
        return -jnp.sum(jnp.where(games.mask[k], log_p * advantage[k], 0.0)) / n

    def add_row(k, totals):
        loss, grads = jax.value_and_grad(row_loss)(params, k)
        return totals[0] + loss, jax.tree.map(jnp.add, totals[1], grads)

    rows = (jnp.max(games.length) + 1) // 2
    zero = (jnp.float32(0), jax.tree.map(jnp.zeros_like, params))
    return jax.lax.fori_loop(0, rows, add_row, zero)


def optimizer(config: RLConfig) -> optax.GradientTransformation:
    """Plain SGD (no momentum, as the SL stage), constant α."""
    return optax.sgd(config.learning_rate)


@functools.cache
def _update_program(network: nn.Module, learning_rate: float, mesh: Mesh) -> Callable:
    """(state, games) -> (state, metrics): one REINFORCE step, each device's gradient over its own games, averaged."""
    tx = optax.sgd(learning_rate)

    def update(state: RLState, games: Games):
        loss, grads = reinforce_grads(network, state.params, games)
        grads = jax.lax.pmean(grads, devices.DEVICE_AXIS)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics = {
            "loss": loss,
            "win_rate": jnp.mean(games.outcome > 0),
            "mean_length": jnp.mean(games.length.astype(jnp.float32)),
            "learner_moves": jnp.sum(games.mask) / games.outcome.shape[0],
        }
        metrics = jax.lax.pmean(metrics, devices.DEVICE_AXIS)
        return RLState(params=params, opt_state=opt_state, iteration=state.iteration + 1), metrics

    return devices.sharded(update, mesh, in_specs=(P(), _GAMES_SPECS), out_specs=(P(), P()), donate_argnums=0)


def update(state: RLState, games: Games, network: nn.Module, learning_rate: float, mesh: Mesh | None = None):
    """(state, metrics) after one REINFORCE step of plain SGD with step size `learning_rate` on `games` (whose games
    axis the mesh's devices split; each device's gradient over its games, averaged: the mean over all n games)."""
    return _update_program(network, learning_rate, mesh or devices.make_mesh())(state, games)


# -- the opponent pool -------------------------------------------------------------------------------------------------


def pool_size(config: RLConfig, iteration: int) -> int:
    """Members of the opponent pool after `iteration` iterations: σ, then ρ after each pool_every iterations."""
    return 1 + iteration // config.pool_every


def pick_opponent(config: RLConfig, iteration: int, members: int) -> int:
    """The pool member (uniformly at random, reproducibly from the seed and the iteration) iteration i plays against:
    0 is σ, j is ρ after j · pool_every iterations."""
    return int(np.random.default_rng([config.seed, iteration]).integers(members))


def member(pool, index: int):
    """The params of pool member `index` of a stacked pool [M, ...]."""
    return jax.tree.map(lambda x: x[index], pool)


# -- a run directory: config.json, metrics.jsonl, checkpoints/ (orbax) -------------------------------------------------


_manager = checkpoints.manager


def is_run(run_dir: str) -> bool:
    """Whether `run_dir` holds an RL policy run (its config.json says so)."""
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(saved, dict) and saved.get("stage") == STAGE


def read_config(run_dir: str) -> tuple[RLConfig, SLConfig, dict]:
    """(RLConfig, the network's SLConfig, {"sl_run": path, "sl_step": step}) of an RL run directory."""
    path = os.path.join(run_dir, "config.json")
    try:
        with open(path) as f:
            saved = json.load(f)
        if saved.get("stage") != STAGE:
            raise ValueError("not an RL policy run")
        sl = {"sl_run": str(saved["sl_run"]), "sl_step": int(saved["sl_step"])}
        return RLConfig(**saved["rl"]), SLConfig(**saved["network"]), sl
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise RLError(f"{run_dir} is not an RL policy run (config.json: {e})") from None


def _write_config(run_dir: str, config: RLConfig, sl_config: SLConfig, sl_run: str, sl_step: int) -> None:
    wanted = {
        "stage": STAGE,
        "rl": dataclasses.asdict(config),
        "sl_run": os.path.abspath(sl_run),
        "sl_step": sl_step,
        "network": dataclasses.asdict(sl_config),
    }
    path = os.path.join(run_dir, "config.json")
    if os.path.exists(path):
        saved_config, saved_network, saved_sl = read_config(run_dir)
        ours, theirs = dataclasses.asdict(config), dataclasses.asdict(saved_config)
        changed = sorted(k for k in ours if k not in _RESUMABLE and ours[k] != theirs[k])
        changed += ["network"] if saved_network != sl_config else []
        changed += [k for k in ("sl_run", "sl_step") if saved_sl[k] != wanted[k]]
        if changed:
            raise RLError(
                f"{run_dir} holds an RL run with another config ({', '.join(changed)} differ): "
                "use another run directory to start a new run"
            )
        if ours == theirs:
            return
    os.makedirs(run_dir, exist_ok=True)
    with files.replaced_whole(path) as f:
        json.dump(wanted, f, indent=1)


def _abstract(config: RLConfig, sl_config: SLConfig, iteration: int) -> dict:
    """The shapes of a checkpoint at `iteration`: {"state": RLState, "pool": params stacked [M, ...]}."""

    def tree():
        n = sl_config.size
        params = supervised.network(sl_config).init(jax.random.key(0), jnp.zeros((1, n, n, sl_config.planes)))
        params = params["params"]
        state = RLState(params=params, opt_state=optimizer(config).init(params), iteration=jnp.int32(0))
        pool = jax.tree.map(lambda x: jnp.zeros((pool_size(config, iteration), *x.shape), x.dtype), params)
        return {"state": state, "pool": pool}

    # restored onto this process's first device whatever mesh wrote it (the caller places it on its own mesh)
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), jax.eval_shape(tree))


def _restore(manager: ocp.CheckpointManager, run_dir: str, config: RLConfig, sl_config: SLConfig, step: int) -> dict:
    return checkpoints.restore(manager, run_dir, step, _abstract(config, sl_config, step), RLError)


def restore_params(run_dir: str, step: int | None = None) -> tuple[SLConfig, dict, int]:
    """(the network's SLConfig, p_ρ's params, iteration) of an RL run's latest (or given) checkpoint: the contract of
    supervised.restore_params, so a p_ρ loads wherever a p_σ does."""
    config, sl_config, _ = read_config(run_dir)
    manager = _manager(run_dir)
    step = checkpoints.step_or_latest(manager, run_dir, step, RLError)
    return sl_config, _restore(manager, run_dir, config, sl_config, step)["state"].params, step


def restore_policy(run_dir: str, step: int | None = None) -> tuple[SLConfig, dict, int]:
    """A policy network's (config, params, step) from an RL run (p_ρ) or an SL run (p_σ), whichever `run_dir` is."""
    return (restore_params if is_run(run_dir) else supervised.restore_params)(run_dir, step)


def restore_pool(run_dir: str, step: int | None = None) -> Any:
    """The opponent pool (params stacked [M, ...]: σ, then ρ every pool_every iterations) of an RL run's checkpoint."""
    config, sl_config, _ = read_config(run_dir)
    manager = _manager(run_dir)
    step = checkpoints.step_or_latest(manager, run_dir, step, RLError)
    return _restore(manager, run_dir, config, sl_config, step)["pool"]


def train(
    config: RLConfig,
    sl_run_dir: str,
    run_dir: str,
    *,
    sl_step: int | None = None,
    mesh: Mesh | None = None,
    log: Callable[[dict], None] = print,
) -> dict:
    """Trains (or resumes) p_ρ in `run_dir` from the SL run's checkpoint `sl_step` (default: its latest; on a resume,
    the one the run started from) for config.iterations iterations; returns the last metrics line. metrics.jsonl has
    a line per iteration: the iteration, the opponent's pool index and the pool's size, the learner's win rate over
    the iteration's games, the mean game length in plies, the learner's moves per game, the loss, games per second;
    every eval_every iterations (and at the end) also win_rate_vs_sl over eval_games games against p_σ."""
    mesh = mesh or devices.make_mesh()
    for name, count in (("games", config.games), ("eval_games", config.eval_games)):
        if count % (2 * mesh.size):
            raise RLError(f"{name} = {count} is not a multiple of 2 × the {mesh.size} devices")
    if sl_step is None and os.path.exists(os.path.join(run_dir, "config.json")):
        sl_step = read_config(run_dir)[2]["sl_step"]
    sl_config, sigma, sl_step = supervised.restore_params(sl_run_dir, sl_step)
    _write_config(run_dir, config, sl_config, sl_run_dir, sl_step)
    network, num_planes, size = supervised.network(sl_config), sl_config.planes, sl_config.size
    plies = config.plies(size)
    replicated = devices.shardings(mesh, P())
    sigma = jax.device_put(sigma, replicated)
    manager = _manager(run_dir)
    restored = stage_loop.restore_intact(  # the newest intact checkpoint; damaged ones moved aside
        manager,
        lambda at: _restore(manager, run_dir, config, sl_config, at),
        lambda r: r["state"].params,
        RLError,
        log,
    )
    if restored is None:
        params = jax.tree.map(jnp.copy, sigma)  # a copy: the update donates the state, σ stays for the pool and eval
        state = RLState(params=params, opt_state=optimizer(config).init(params), iteration=jnp.int32(0))
        pool = jax.tree.map(lambda x: x[None], sigma)
    else:
        state, pool = restored["state"], restored["pool"]
    state, pool = jax.device_put((state, pool), replicated)
    iteration = int(state.iteration)
    play = _play_program(network, num_planes, size, config.games, plies, mesh)
    step = _update_program(network, config.learning_rate, mesh)
    key = jax.random.key(config.seed)
    metrics_path = os.path.join(run_dir, "metrics.jsonl")
    truncate_metrics(metrics_path, iteration)  # lines after the checkpoint resumed from are written again
    last_saved = manager.latest_step()
    last: dict = {}
    try:
        while iteration < config.iterations:
            tick = time.perf_counter()
            members = pool_size(config, iteration)
            opponent = pick_opponent(config, iteration, members)
            play_key, eval_key = jax.random.split(jax.random.fold_in(key, iteration))
            games = play(state.params, member(pool, opponent), play_key)
            state, metrics = step(state, games)
            metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
            seconds = time.perf_counter() - tick
            iteration += 1
            save_due = iteration % config.checkpoint_every == 0 or iteration == config.iterations
            # a non-finite loss (or, before a save, weights) stops the run before this iteration is logged or saved
            stage_loop.check_finite(
                RLError, "iteration", iteration, [metrics["loss"]], state.params if save_due else {}, last_saved
            )
            if iteration % config.pool_every == 0:
                pool = jax.tree.map(lambda p, x: jnp.concatenate([p, x[None]]), pool, state.params)
            last = {
                "iteration": iteration,
                "opponent": opponent,
                "pool_size": pool_size(config, iteration),
                **metrics,
                "games_per_second": config.games / seconds,
            }
            if config.eval_games and (iteration % config.eval_every == 0 or iteration == config.iterations):
                last["win_rate_vs_sl"] = win_rate(
                    network, num_planes, state.params, sigma, config.eval_games, eval_key, size, plies=plies, mesh=mesh
                )
            files.append_jsonl(metrics_path, last)
            log(last)
            if save_due:
                manager.save(iteration, args=ocp.args.StandardSave({"state": state, "pool": pool}))
                last_saved = iteration
    finally:  # a diverged or interrupted run keeps the checkpoints it started writing
        manager.wait_until_finished()
    return last
