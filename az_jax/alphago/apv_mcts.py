"""AlphaGo's search, APV-MCTS (Silver et al., Nature 2016, Methods "Searching with policy and value networks",
Extended Data Table 5), batched across games in JAX on mctx's tree.

    nets = Nets(policy_params, value_params, rollout_policy, policy=PolicyNetwork(...), policy_planes=48,
                value=ValueNetwork(...), value_planes=49)
    out = search(config, nets, states, key)          # mctx.PolicyOutput for pgx Go states [B, ...]
    actions = apv_actions(config, nets, states, key) # [B] the most visited root action
    apply = make_apply(config, sl_config, value_config)   # az_jax/evaluation/players.py's JaxPlayer.apply
    search_fn = make_search(config, sl_config, value_config)  # the same search, its whole mctx.PolicyOutput

The paper's search, and what this module does with each part:

* Selection: a_t = argmax_a Q(s, a) + u(s, a), u(s, a) = c_puct · P(s, a) · sqrt(Σ_b N_r(s, b)) / (1 + N_r(s, a)),
  c_puct = 5, and Q = 0 for an edge never visited (W = N = 0). `paper_action_selection` is exactly this. mctx's
  `muzero_action_selection` with `pb_c_init = c_puct` and a huge `pb_c_base` (pb_c = c_init + log((N + base + 1) /
  base) → c_init) is *not*: it takes sqrt of `tree.node_visits[node]`, which counts the node's own expansion, i.e.
  sqrt(1 + Σ_b N(s, b)); it would also add 1e-7 noise for ties. So the search runs `mctx.search` with our own
  selection function (the same at the root and inside the tree). Q is read from mctx's tree: `Tree.qvalues` is
  reward + discount · children_values, 0 + (−1) · (the mean of the values backed up into the child, from the child's
  mover's view) = the mean from the parent's mover's view: the paper's W/N. At a node with no visit yet every u is 0
  and every Q is 0; the paper leaves that tie open, we take the highest prior (lowest index after that).
* Priors: P(s', ·) = p_σ^β, the SL policy network (stronger than the RL one in search, Methods) with softmax
  temperature β = 0.67, over the sensible points (pgx-legal and not filling an own eye, the sensibleness plane of
  Extended Data Table 2).
* Passes: the policy network has no pass output (its data has none). In the tree, as in the rollouts and in
  policy_player.py, pass is the only move, with prior 1, exactly when no sensible point is left, and is never a move
  while one is. A search never prefers passing over a harmless sensible move, so a game ends once both sides have
  filled every sensible point (captures can reopen some), or at pgx's cap of 2·N² moves; pgx then scores the board by
  Tromp–Taylor area with its komi. A tiny prior on pass at every node was rejected: with Q = 0 for unvisited edges,
  a pass would be tried first in every position whose visited moves all look negative.
* Leaf evaluation: V(s_L) = (1 − λ) v_θ(s_L) + λ z_L, λ = 0.5, z_L the result (±1, from the view of the player to move
  at s_L) of one game played from s_L to its end by the fast rollout policy p_π, sampled over the sensible points,
  passing when none is left (`rollout`, on the lean game of rollout_game.py, which carries its chains from move to
  move: pgx's rules without positional superko, as p_π's legality has none). The rollout runs inside `recurrent_fn` as
  one `lax.while_loop` over the B leaves of the step. λ is static: λ = 0 compiles no rollout, λ = 1 no value network,
  so each arm of the paper's λ ablation (Fig. 4) costs only what it uses. The root is evaluated like a leaf (its value
  enters mctx's root value, not the selection). A terminal leaf is valued by the game's result itself (reward to the
  player who moved, discount 0, as az_jax/core/search.py does): nothing is estimated past the end of the game.
* Statistics: the paper keeps N_v, W_v and N_r, W_r apart because value-network results arrive asynchronously, and
  mixes Q = (1 − λ) W_v/N_v + λ W_r/N_r. Here every simulation's leaf gets v_θ and z in the same step (evaluation is
  synchronous and batched across the B games: one simulation per game per step, all B leaves evaluated together), so
  N_v = N_r = N and (1 − λ) W_v/N + λ W_r/N = Σ V(s_L)/N: mctx's single mean of the mixed leaf values is exactly the
  paper's Q.
* Expansion threshold n_thr (`expansion_threshold`; the paper's 40): the paper adds a node s' = f(s, a) only once
  N_r(s, a) > n_thr, with the tree policy p_τ's priors, and queues s' for p_σ on the GPU, whose priors replace
  p_τ's when they arrive; until then every visit of (s, a) runs another rollout from s'. On one device the queue
  becomes the step (core/virtual_loss.py): a node is made at its first visit, with p_τ's priors, but is a leaf
  (each later visit evaluates it again: a new rollout) until its visits pass n_thr; it is then queued, its p_σ^β
  priors are computed in the next step's evaluation batch and replace p_τ's at the end of that step, so the
  selections of that step already descend below it by p_τ (one step of latency, the time of one GPU batch); the
  policy network runs only in steps whose queue is not empty. n_thr is fixed here (the paper adjusts it to the
  GPUs' rate). `expansion_threshold` = 0 (the default) expands every leaf at once with its p_σ priors and needs no
  p_τ: then a second visit of a leaf descends one ply by p_σ instead of running another rollout from it.
* Virtual loss n_vl = 3 spreads the paper's parallel search threads within one tree. With `leaves` = 1 (the
  default) one tree has one simulation in flight at a time (parallelism is across games) and there is none; with
  `leaves` = K > 1 each step selects K leaves of every tree under virtual loss and evaluates them together
  (az_jax/core/virtual_loss.py), so one game alone fills a batch of K.
* The move played is the most visited root action (ties: the highest prior). Resigning (max_a Q < −0.8) is left to
  the caller: the root Q values are in the returned tree.
* Symmetries (`APVConfig.symmetries`): every network evaluation sees its position under one of the 8 dihedral
  symmetries drawn uniformly (Methods: the "implicit ensemble"), shared by p_σ and v_θ of that position; p_σ's
  logits are mapped back by the inverse symmetry (envs/symmetries.py, as the AlphaZero side does).

The static parts of the networks (modules, plane counts) are pytree metadata of `Nets` and the weights its leaves, so
one compiled search serves every checkpoint of the same shapes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, Protocol, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx
import pgx
from flax import struct

from az_jax.alphago import features as features_lib
from az_jax.alphago import rollout_game, tree_policy
from az_jax.alphago import rollout_policy as rollout_lib
from az_jax.alphago.networks import PolicyNetwork, ValueNetwork
from az_jax.alphago.position import Position, from_pgx
from az_jax.core import search as search_lib
from az_jax.core import virtual_loss
from envs import make_env
from envs import symmetries as symmetries_lib

MASKED = search_lib.MASKED  # the prior logit of a move the tree may not play
# The paper's selection and its choice of move are the search method "alphago" of az_jax/core/search.py (every search
# runs through one function type there); named here too, as the paper's parts of APV-MCTS.
paper_action_selection = search_lib.paper_action_selection
most_visited = search_lib.most_visited


@dataclasses.dataclass(frozen=True)
class APVConfig:
    """One APV-MCTS search (Extended Data Table 5's parameters are the defaults). Hashable: jitted code closes over
    it."""

    simulations: int  # simulations per move (per game)
    c_puct: float = 5.0  # exploration constant
    lam: float = 0.5  # λ: weight of the rollout result z in the leaf value (0: value network only, 1: rollouts only)
    beta: float = 0.67  # softmax temperature of the prior p_σ^β
    rollout_max_moves: int = 0  # a rollout still going after this many moves is scored as it stands; 0: no cap
    rollout_plies_per_loop: int = 1  # plies a rollout plays per iteration of its while loop (rollout_game.play)
    symmetries: bool = True  # each network evaluation sees a random one of the 8 symmetries
    leaves: int = 1  # leaves per tree per step, evaluated together under virtual loss (core/virtual_loss.py); 1: sync
    virtual_loss: float = 3.0  # n_vl: virtual visits, each a loss, on every edge a leaf in flight passed
    expansion_threshold: int = 0  # n_thr: visits before a node is expanded (p_τ's priors until p_σ's); 0: at once

    def __post_init__(self):
        checks = {
            "simulations": isinstance(self.simulations, int) and self.simulations >= 1,
            "c_puct": math.isfinite(self.c_puct) and self.c_puct >= 0,
            "lam": 0.0 <= self.lam <= 1.0,
            "beta": math.isfinite(self.beta) and self.beta > 0,
            "rollout_max_moves": isinstance(self.rollout_max_moves, int) and self.rollout_max_moves >= 0,
            "rollout_plies_per_loop": isinstance(self.rollout_plies_per_loop, int) and self.rollout_plies_per_loop >= 1,
            "leaves": isinstance(self.leaves, int) and self.leaves >= 1 and self.simulations % self.leaves == 0,
            "virtual_loss": math.isfinite(self.virtual_loss) and self.virtual_loss >= 0,
            "expansion_threshold": isinstance(self.expansion_threshold, int) and self.expansion_threshold >= 0,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"APVConfig: invalid {bad[0]}={getattr(self, bad[0])!r}")

    @property
    def uses_value(self) -> bool:
        return self.lam < 1.0

    @property
    def uses_rollouts(self) -> bool:
        return self.lam > 0.0


@struct.dataclass
class Nets:
    """The networks of the search: p_σ (priors), v_θ (leaf values), p_π (rollouts) and p_τ (placeholder priors, with
    an expansion threshold). Weights are leaves; modules and plane counts are static metadata. `value_params`/`value`
    may be None when λ = 1, `rollout` when λ = 0 and `tree` when expansion_threshold = 0."""

    policy_params: Any
    value_params: Any
    rollout: rollout_lib.RolloutPolicy | None
    policy: nn.Module = struct.field(pytree_node=False)  # PolicyNetwork: planes [B, N, N, policy_planes] -> [B, N²]
    policy_planes: int = struct.field(pytree_node=False)  # 4, 12, 20 or 48
    value: nn.Module | None = struct.field(pytree_node=False, default=None)  # ValueNetwork: planes -> [B]
    value_planes: int = struct.field(pytree_node=False, default=features_lib.NUM_VALUE_PLANES)
    tree: Any = None  # tree_policy.TreePolicy p_τ: the placeholder priors when expansion_threshold > 0


def check_nets(config: APVConfig, nets: Nets) -> None:
    """One-line ValueError when `nets` lacks a network `config` needs."""
    if config.uses_value and (nets.value is None or nets.value_params is None):
        raise ValueError(f"APV search with lam={config.lam} needs a value network (lam=1 searches without one)")
    if config.uses_rollouts and nets.rollout is None:
        raise ValueError(f"APV search with lam={config.lam} needs a rollout policy (lam=0 searches without one)")
    if config.expansion_threshold and nets.tree is None:
        raise ValueError(
            f"APV search with expansion_threshold={config.expansion_threshold} needs the tree policy p_tau "
            "(its placeholder priors; 0 expands at once)"
        )
    if nets.policy_planes not in features_lib.PLANE_COUNTS[:4]:
        raise ValueError(f"the policy network's planes must be 4, 12, 20 or 48, not {nets.policy_planes}")
    if config.uses_value and nets.value_planes not in features_lib.PLANE_COUNTS:
        raise ValueError(f"the value network's planes must be 4, 12, 20, 48 or 49, not {nets.value_planes}")


# --- evaluation: priors, value network, rollouts --------------------------------------------------------------------


def _size(states: pgx.State) -> int:
    return int(round(states._x.board.shape[-1] ** 0.5))


@functools.cache
def _env(size: int) -> pgx.Env:
    return make_env(f"go_{size}x{size}")[0]


def own_eyes(board: jax.Array, n: int) -> jax.Array:
    """[..., N²] board (+1 the player to move's stones) -> [..., N²] bool: its own eyes, as the sensibleness plane of
    features.py defines them (orthogonal neighbours own or off the board; opponent diagonals: none on the edge or in
    the corner, at most one elsewhere). Needs no chains, so rollouts use it instead of the 48 planes."""
    lead = board.shape[:-1]
    grid = board.reshape((*lead, n, n)).astype(jnp.int8)
    pad = [(0, 0)] * len(lead) + [(1, 1), (1, 1)]
    padded = jnp.pad(grid, pad, constant_values=features_lib._OFF)

    def at(dr, dc):
        return padded[..., 1 + dr : 1 + dr + n, 1 + dc : 1 + dc + n]

    orth = jnp.stack([at(dr, dc) for dr, dc in features_lib._DIRS], -1)
    diag = jnp.stack([at(dr, dc) for dr, dc in features_lib._DIAGS], -1)
    edge = (diag == features_lib._OFF).any(-1)
    bad = (diag == -1).sum(-1)
    eye = (grid == 0) & ((orth == 1) | (orth == features_lib._OFF)).all(-1) & (bad <= jnp.where(edge, 0, 1))
    return eye.reshape((*lead, n * n))


def rollout(
    policy: rollout_lib.RolloutPolicy,
    states: pgx.State,
    key: jax.Array,
    max_moves: int | jax.Array = 0,
    env: pgx.Env | None = None,
    plies_per_loop: int = 1,
) -> tuple[jax.Array, rollout_game.Lean]:
    """Plays each of the pgx Go states [B, ...] to its end with p_π, sampled over the sensible points (legal for p_π,
    not an own eye), passing when none is left. Returns (z [B] float32: +1 if the player to move in the given state
    won, −1 if it lost; the final states). A state already over gives its own result. With `max_moves` > 0 a game
    still going after that many moves is scored as it stands. `env`: the pgx Go env whose komi and move limit score
    the games (default: the size's standard one). On the lean rollout game (rollout_game.py: chains carried from
    move to move; pgx's rules but positional superko). `plies_per_loop`: rollout_game.play's. The key is consumed."""
    env = env if env is not None else _env(_size(states))
    return rollout_game.play(policy, states, key, env, max_moves, plies_per_loop)


def _planes(nets: Nets, config: APVConfig, position: Position) -> jax.Array:
    """The feature planes both networks need: 49 when the value network takes the colour plane, else 48 (the
    sensibleness plane is always needed)."""
    count = features_lib.NUM_POLICY_PLANES
    if config.uses_value and nets.value_planes == features_lib.NUM_VALUE_PLANES:
        count = features_lib.NUM_VALUE_PLANES
    return features_lib.features(position, count)


def _masked(logits: jax.Array, sensible: jax.Array) -> jax.Array:
    """[B, N²] logits -> [B, N² + 1] prior logits over the sensible points (max 0), MASKED elsewhere; pass alone (0)
    when no point is sensible."""
    none = ~sensible.any(-1, keepdims=True)
    logits = logits - jnp.where(none, 0.0, jnp.max(jnp.where(sensible, logits, -jnp.inf), axis=-1, keepdims=True))
    return jnp.concatenate([jnp.where(sensible, logits, MASKED), jnp.where(none, 0.0, MASKED)], axis=-1)


def _sensible(states: pgx.State, planes: jax.Array) -> jax.Array:
    n, b = _size(states), states.current_player.shape[0]
    sensible = planes[..., features_lib.PLANE_SLICES["sensibleness"]].reshape(b, n * n) > 0
    return sensible & states.legal_action_mask[:, : n * n]


def _policy_logits(config: APVConfig, nets: Nets, states: pgx.State, seen: jax.Array, sym: jax.Array | None):
    """p_σ^β's logits [B, N²] of the positions whose planes, under symmetry `sym`, are `seen`."""
    n, b = _size(states), states.current_player.shape[0]
    logits = cast(jax.Array, nets.policy.apply({"params": nets.policy_params}, seen[..., : nets.policy_planes]))
    if sym is not None:  # back to the original position's points (pad a pass column for the action tables)
        padded = jnp.concatenate([logits, jnp.zeros((b, 1), logits.dtype)], axis=-1)
        logits = symmetries_lib.inverse_policy(f"go_{n}x{n}", sym, padded)[:, : n * n]
    return logits / config.beta


def _symmetry(config: APVConfig, states: pgx.State, planes: jax.Array, key: jax.Array):
    n, b = _size(states), states.current_player.shape[0]
    game = f"go_{n}x{n}"
    sym = symmetries_lib.random_symmetry(game, key, b) if config.symmetries else None
    return sym, (planes if sym is None else symmetries_lib.transform_observation(game, sym, planes))


def evaluate(
    config: APVConfig,
    nets: Nets,
    states: pgx.State,
    key: jax.Array,
    env: pgx.Env | None = None,
    placeholder: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """(prior logits [B, N² + 1], leaf value [B]) of pgx Go states [B, ...], for the player to move: the logits of
    p_σ^β (with `placeholder`, p_τ's: the expansion threshold's interim priors) over the sensible points (MASKED
    elsewhere; pass alone when none is left) and V = (1 − λ) v_θ + λ z, the rollouts played and scored by `env`
    (`rollout`). Values of states that are over are meaningless (the caller masks them). The key is consumed."""
    sym_key, rollout_key = jax.random.split(key)
    position = from_pgx(states)
    planes = _planes(nets, config, position)  # [B, N, N, 48 or 49]
    sym, seen = _symmetry(config, states, planes, sym_key)
    if placeholder:
        logits = tree_policy.logits(nets.tree, position)  # -inf where illegal; _masked keeps the sensible points
        logits = jnp.where(jnp.isfinite(logits), logits, 0.0)
    else:
        logits = _policy_logits(config, nets, states, seen, sym)
    prior = _masked(logits, _sensible(states, planes))
    value = jnp.zeros(states.current_player.shape[0], jnp.float32)
    if config.uses_value:
        assert nets.value is not None
        v = cast(jax.Array, nets.value.apply({"params": nets.value_params}, seen[..., : nets.value_planes]))
        value = value + (1.0 - config.lam) * v.astype(jnp.float32)
    if config.uses_rollouts:
        assert nets.rollout is not None
        z, _ = rollout(nets.rollout, states, rollout_key, config.rollout_max_moves, env, config.rollout_plies_per_loop)
        value = value + config.lam * z
    return prior, value


def policy_priors(config: APVConfig, nets: Nets, states: pgx.State, key: jax.Array) -> jax.Array:
    """p_σ^β's prior logits [B, N² + 1] alone (no value, no rollout), as `evaluate` gives them; pass alone where the
    game is over. What the expansion threshold's queue computes for a node passing it."""
    planes = features_lib.features(from_pgx(states), features_lib.NUM_POLICY_PLANES)
    sym, seen = _symmetry(config, states, planes, key)
    prior = _masked(_policy_logits(config, nets, states, seen, sym), _sensible(states, planes))
    over = states.terminated | states.truncated
    return jnp.where(over[:, None], jnp.full_like(prior, MASKED).at[:, -1].set(0.0), prior)


def make_recurrent_fn(config: APVConfig, env: pgx.Env | None = None) -> mctx.RecurrentFn:
    """mctx's `recurrent_fn` on pgx Go states (the embedding): step by `env` (default: the size's standard pgx Go env;
    an engine's has the controller's komi), then `evaluate`. Conventions of az_jax/core/search.py: reward to the
    player who moved, value for the player to move, discount −1, 0 after the end."""

    def recurrent_fn(nets: Nets, rng_key, action, states):
        mover = states.current_player
        states = jax.vmap((env if env is not None else _env(_size(states))).step)(states, action)
        prior, value = _evaluate_jit(config, nets, states, rng_key, env, config.expansion_threshold > 0)
        over = states.terminated | states.truncated
        batch = jnp.arange(action.shape[0])
        pass_only = jnp.full_like(prior, MASKED).at[:, -1].set(0.0)  # any one playable move at a terminal node
        output = mctx.RecurrentFnOutput(
            reward=jnp.where(over, states.rewards[batch, mover], 0.0),
            discount=jnp.where(over, 0.0, -1.0),
            prior_logits=jnp.where(over[:, None], pass_only, prior),
            value=jnp.where(over, 0.0, value),
        )
        return output, states

    return recurrent_fn


def make_prior_fn(config: APVConfig) -> virtual_loss.PriorFn:
    """The expansion threshold's `prior_fn` on pgx Go states: p_σ^β's priors (`policy_priors`)."""

    def prior_fn(nets: Nets, key: jax.Array, states: pgx.State) -> jax.Array:
        return policy_priors(config, nets, states, key)

    return prior_fn


# --- selection and the search ---------------------------------------------------------------------------------------


def _search(config: APVConfig, nets: Nets, states: pgx.State, key: jax.Array) -> mctx.PolicyOutput:
    root_key, search_key = jax.random.split(key)
    prior, value = _evaluate_jit(config, nets, states, root_key, None)
    root = mctx.RootFnOutput(prior_logits=prior, value=value, embedding=states)
    invalid = prior <= MASKED / 2
    if config.leaves > 1 or config.expansion_threshold > 0:  # several leaves a step, or an expansion threshold
        return virtual_loss.search(
            nets,
            search_key,
            root,
            make_recurrent_fn(config),
            invalid,
            simulations=config.simulations,
            leaves=config.leaves,
            c_puct=config.c_puct,
            n_vl=config.virtual_loss,
            n_thr=config.expansion_threshold,
            prior_fn=make_prior_fn(config),
        )
    # the search method "alphago" of az_jax/core/search.py: the paper's selection with c_puct, no root noise
    search = search_lib.SearchConfig(num_simulations=config.simulations, algorithm="alphago", c_init=config.c_puct)
    run = search_lib.method(search.algorithm).run
    return run(nets, search_key, root, make_recurrent_fn(config), invalid, search)


_search_jit = jax.jit(_search, static_argnums=0)


def search(config: APVConfig, nets: Nets, states: pgx.State, key: jax.Array) -> mctx.PolicyOutput:
    """APV-MCTS of pgx Go states [B, ...] (not over): `config.simulations` simulations per game; `action` is the most
    visited root action, `action_weights` the root visit distribution. Jitted (config static; the weights in `nets`
    are arguments). The key is consumed."""
    check_nets(config, nets)
    return _search_jit(config, nets, states, key)


def apv_actions(config: APVConfig, nets: Nets, states: pgx.State, key: jax.Array) -> jax.Array:
    """[B] the move APV-MCTS plays in each of the pgx Go states: the most visited root action (pass when no sensible
    point is left). The key is consumed."""
    return search(config, nets, states, key).action


# --- a player -------------------------------------------------------------------------------------------------------


class PolicyShape(Protocol):
    """What `make_apply` reads of a p_σ config (supervised.SLConfig, a frozen dataclass: read-only fields)."""

    @property
    def layers(self) -> int: ...
    @property
    def filters(self) -> int: ...
    @property
    def planes(self) -> int: ...


class ValueShape(Protocol):
    """What `make_apply` reads of a v_θ config (value_training.ValueConfig)."""

    @property
    def layers(self) -> int: ...
    @property
    def filters(self) -> int: ...
    @property
    def hidden(self) -> int: ...
    @property
    def planes(self) -> int: ...


@functools.cache
def make_search(config: APVConfig, policy_config: PolicyShape, value_config: ValueShape | None = None):
    """`search_fn(variables, states [B, ...], key) -> mctx.PolicyOutput`: the search `make_apply` plays by, with its
    whole output (the root's visits and values in `search_tree`; `action` is the move `make_apply` returns), for
    code that shows what the search saw (az_jax/alphago/play_agent.py). Variables and caching as `make_apply`."""
    return _search_fn(config, policy_config, value_config)


def nets_of(config: APVConfig, policy_config: PolicyShape, value_config: ValueShape | None) -> Callable[[dict], Nets]:
    """`variables -> Nets` for an agent's networks, variables = {"policy": p_σ params, "value": v_θ params or None,
    "rollout": RolloutPolicy or None}. ValueError (one line) when λ needs a value network and there is no config."""
    policy = PolicyNetwork(layers=policy_config.layers, filters=policy_config.filters)
    value = None
    if value_config is not None:
        value = ValueNetwork(layers=value_config.layers, filters=value_config.filters, hidden=value_config.hidden)
    if config.uses_value and value is None:
        raise ValueError(f"APV search with lam={config.lam} needs a value network config (lam=1 searches without)")

    def nets(variables: dict) -> Nets:
        return Nets(
            policy_params=variables["policy"],
            value_params=variables.get("value"),
            rollout=variables.get("rollout"),
            tree=variables.get("tree"),
            policy=policy,
            policy_planes=policy_config.planes,
            value=value,
            value_planes=value_config.planes if value_config is not None else features_lib.NUM_VALUE_PLANES,
        )

    return nets


def _search_fn(config: APVConfig, policy_config: PolicyShape, value_config: ValueShape | None):
    nets = nets_of(config, policy_config, value_config)

    def search_fn(variables: dict, states: pgx.State, key: jax.Array) -> mctx.PolicyOutput:
        return search(config, nets(variables), states, key)

    return search_fn


@functools.cache
def make_apply(config: APVConfig, policy_config: PolicyShape, value_config: ValueShape | None = None):
    """`apply(variables, states [B, ...], key) -> actions [B]` for az_jax/evaluation/players.py's JaxPlayer, with
    variables = {"policy": p_σ params, "value": v_θ params or None, "rollout": RolloutPolicy or None}. Cached per
    configs (hashable), so every checkpoint of the same shapes shares one compiled match. `value_config` may be None
    only when config.lam == 1."""
    search_fn = _search_fn(config, policy_config, value_config)

    def apply(variables: dict, states: pgx.State, key: jax.Array) -> jax.Array:
        return search_fn(variables, states, key).action  # apv_actions: the most visited root action

    return apply


_evaluate_jit = jax.jit(evaluate, static_argnums=(0, 4, 5))  # config, env and placeholder static
