"""Everything mctx needs to search pgx games with the network: the root, `recurrent_fn`, noise and masks.

Conventions (AlphaZero, Silver et al., Science 2018, Methods, "Search"): values are from the point of view of the
player to move; the reward of a step belongs to the player who just moved; the discount is −1 between plies (zero-sum
alternation) and 0 once the game is over, so nothing is backed up from beyond a terminal state. Illegal actions are
masked in the root and interior priors and excluded from the root's search.
"""

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import mctx
import pgx

from az_jax.core import backup
from envs import symmetries as symmetries_lib
from envs.registry import get_game

if TYPE_CHECKING:
    from az_jax.core.config import Config

# Every mctx search of az_jax backs up with the batched backward pass, whose cost does not grow with the tree
# (az_jax/core/backup.py: the same trees, bit for bit).
backup.use_batched_backward(True)

# (variables, observation [B, ...]) -> (logits [B, A], value [B])
ApplyFn = Callable[[dict, jax.Array], tuple[jax.Array, jax.Array]]


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """How one search runs: made once from a Config and passed whole (hashable, so jitted programs close over it)."""

    num_simulations: int
    algorithm: str = "puct"  # a name of METHODS: "puct" (AlphaZero), "gumbel" (Gumbel MuZero), "alphago" (2016), …
    c_init: float = 1.25  # C(s) = log((1 + N + c_base) / c_base) + c_init (AlphaZero pseudocode)
    c_base: float = 19652.0
    dirichlet_fraction: float = 0.25  # ε of the root noise (PUCT); 0: none
    dirichlet_alpha: float = 0.3  # its concentration
    max_num_considered_actions: int = 16  # Gumbel: actions kept by sequential halving
    gumbel_scale: float = 1.0  # Gumbel: 0 searches without Gumbel noise
    gumbel_c_scale: float = 0.1  # Gumbel: σ(q̂) = (c_visit + max N) · c_scale · q̂ (Config.gumbel_c_scale)
    gumbel_c_visit: float = 50.0
    symmetry_game: str | None = None  # evaluations see a random symmetry of this game (AlphaGo Zero); None: off
    forced_playouts_k: float = 0.0  # PUCT: forced playouts and policy target pruning (KataGo §3.2); 0: off
    pass_check_game: str | None = None  # greedy play: passes checked by this game's count (Config.pass_check)
    eye_rule_game: str | None = None  # the mover's own eyes are not searched or played (Config.eye_rule); None: off

    @classmethod
    def for_selfplay(cls, config: "Config") -> "SearchConfig":
        """Self-play's search: the config's algorithm, simulations and root noise."""
        return cls(
            num_simulations=config.num_simulations,
            algorithm=config.search,
            c_init=config.c_init,
            c_base=config.c_base,
            dirichlet_fraction=config.dirichlet_fraction,
            dirichlet_alpha=config.root_dirichlet_alpha,
            max_num_considered_actions=config.max_num_considered_actions,
            gumbel_c_scale=config.gumbel_c_scale,
            gumbel_c_visit=config.gumbel_c_visit,
            symmetry_game=config.game if config.search_symmetries else None,
            forced_playouts_k=config.forced_playouts_k,
            eye_rule_game=config.game if config.eye_rule == "always" else None,
        )

    @classmethod
    def for_play(cls, config: "Config", num_simulations: int) -> "SearchConfig":
        """Greedy play outside self-play (evaluation, gating, Agent): the acting search (`eval_search`, else
        `search`), no root noise, no Gumbel noise; with `eval_symmetry_ensemble` no random symmetry either (the
        network it searches with, `Setup.play_apply`, sees them all)."""
        selfplay = cls.for_selfplay(config)
        return dataclasses.replace(
            selfplay,
            num_simulations=num_simulations,
            algorithm=config.acting_search,
            dirichlet_fraction=0.0,
            gumbel_scale=0.0,
            forced_playouts_k=0.0,
            symmetry_game=None if config.eval_symmetry_ensemble else selfplay.symmetry_game,
            pass_check_game=config.game if config.pass_check and get_game(config.game).checked_pass else None,
            eye_rule_game=config.game if config.eye_rule != "off" else None,
        )


def mask_logits(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Illegal actions get the lowest finite logit, so softmax gives them zero probability. [B, A] -> [B, A]."""
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def predict(
    apply_fn: ApplyFn,
    variables: dict,
    observation: jax.Array,
    rng_key: jax.Array | None,
    symmetry_game: str | None = None,
) -> tuple[jax.Array, jax.Array]:
    """The network on observations [B, ...] -> (logits [B, A], value [B]); the key is consumed (used only with
    `symmetry_game`).

    With `symmetry_game` each position is evaluated under its own uniformly random symmetry of that game (AlphaGo
    Zero, "Expand and evaluate", Methods: (d_i(p), v) = f_θ(d_i(s_L)), d_i a dihedral reflection or
    rotation chosen uniformly at random): the network sees the transformed observation d_i(s) and its logits are
    mapped back to the untransformed position's actions by d_i⁻¹."""
    if symmetry_game is None:
        return apply_fn(variables, observation)
    assert rng_key is not None  # a random symmetry needs the key
    sym = symmetries_lib.random_symmetry(symmetry_game, rng_key, observation.shape[0])  # [B]
    logits, value = apply_fn(variables, symmetries_lib.transform_observation(symmetry_game, sym, observation))
    return symmetries_lib.inverse_policy(symmetry_game, sym, logits), value


def symmetry_ensemble(apply_fn: ApplyFn, game: str) -> ApplyFn:
    """`apply_fn` averaged over all K symmetries d_j of `game` (AlphaGo, Silver et al. 2016, Methods, "Symmetries",
    the explicit symmetry ensemble): v̄(s) = 1/K Σ_j v(d_j(s)), p̄(·|s) = 1/K Σ_j d_j⁻¹(p(·|d_j(s))), the probabilities
    averaged and returned as their logarithm (logits [B, A], values [B]). One network call on the K·B observations."""
    k = symmetries_lib.num_symmetries(game)

    def ensemble(variables, observation):
        batch = observation.shape[0]
        sym = jnp.repeat(jnp.arange(k, dtype=jnp.int32), batch)  # [K·B]: all B positions under d_0, then d_1, ...
        tiled = jnp.concatenate([observation] * k)  # [K·B, ...]
        logits, value = apply_fn(variables, symmetries_lib.transform_observation(game, sym, tiled))
        probs = symmetries_lib.inverse_policy(game, sym, jax.nn.softmax(logits, axis=-1))  # [K·B, A], back in place
        mean_probs = probs.reshape(k, batch, -1).mean(axis=0)  # [B, A]
        return jnp.log(mean_probs), value.reshape(k, batch).mean(axis=0)

    return ensemble


def allowed_moves(states: pgx.State, eye_rule_game: str | None = None) -> jax.Array:
    """The moves a search may try and play in states [B, ...]: [B, A] bool, the legal ones less the mover's own eyes
    where `eye_rule_game` is set (Config.eye_rule; envs/go_eyes.py)."""
    legal = states.legal_action_mask
    if eye_rule_game is None:
        return legal
    own_eyes = get_game(eye_rule_game).own_eyes
    assert own_eyes is not None  # Config validation allows the rule only for a game that has eyes
    return legal & ~jax.vmap(own_eyes)(states)


def make_recurrent_fn(
    env: pgx.Env, apply_fn: ApplyFn, symmetry_game: str | None = None, eye_rule_game: str | None = None
) -> mctx.RecurrentFn:
    """`recurrent_fn` that steps the real pgx env; the embedding is the batched pgx state [B, ...].

    The games are deterministic: mctx's per-simulation key is used only for the random symmetries of
    `symmetry_game` (see `predict`). The priors are masked to `allowed_moves`."""

    def recurrent_fn(variables, rng_key, action, state):
        mover = state.current_player  # [B]
        state = jax.vmap(env.step)(state, action)
        logits, value = predict(apply_fn, variables, state.observation, rng_key, symmetry_game)
        batch = jnp.arange(action.shape[0])
        over = state.terminated | state.truncated
        output = mctx.RecurrentFnOutput(
            reward=state.rewards[batch, mover],  # [B] for the player who just moved
            discount=jnp.where(over, 0.0, -1.0),  # [B] zero-sum alternation; 0 at the end
            prior_logits=mask_logits(logits, allowed_moves(state, eye_rule_game)),  # [B, A]
            value=jnp.where(over, 0.0, value),  # [B] nothing beyond a terminal state
        )
        return output, state

    return recurrent_fn


def run_search(
    apply_fn: ApplyFn, env: pgx.Env, variables: dict, rng_key: jax.Array, state: pgx.State, search: SearchConfig
) -> mctx.PolicyOutput:
    """Searches a batch of pgx states [B, ...]; the key is consumed.

    PUCT (AlphaZero, Methods, and its pseudocode's ucb_score): mctx.muzero_policy scores a child by
        Q + C(s) · P · sqrt(N) / (1 + N(a)),   C(s) = log((1 + N + c_base) / c_base) + c_init,
    which is AlphaZero's formula. Q transform: `qtransform_by_min_max(-1, 1)` maps Q ∈ [−1, 1] linearly onto [0, 1] and
    scores unvisited children as 0 (a loss). That is exactly the AlphaZero pseudocode's convention (values in [0, 1],
    unvisited children valued 0), on which c_init = 1.25 and c_base = 19652 were tuned; mctx's default
    (min–max over parent and siblings) would rescale Q per node and change the meaning of c_init.

    Gumbel (`algorithm="gumbel"`): mctx.gumbel_muzero_policy with its paper's completed-Q transform
    (`qtransform_completed_by_mix_value`), which is what makes its policy improvement hold at 2–32 simulations.

    `symmetry_game` (a game name, or None): every network evaluation, root and leaves, sees its position under a
    random symmetry of that game (`predict`). The root's symmetries take a key split from `rng_key`; the leaves' come
    from the per-simulation keys mctx passes to `recurrent_fn`. Without it the key stream is untouched.
    """
    symmetry_game = search.symmetry_game
    root_key = None
    if symmetry_game is not None:
        rng_key, root_key = jax.random.split(rng_key)
    logits, value = predict(apply_fn, variables, state.observation, root_key, symmetry_game)
    allowed = allowed_moves(state, search.eye_rule_game)
    root = mctx.RootFnOutput(prior_logits=mask_logits(logits, allowed), value=value, embedding=state)
    recurrent_fn = make_recurrent_fn(env, apply_fn, symmetry_game, search.eye_rule_game)
    return method(search.algorithm).run(variables, rng_key, root, recurrent_fn, ~allowed, search)


# --- search methods ---------------------------------------------------------------------------------------------------
# Every search runs through one function type, whatever the caller (self-play, evaluation and gating, Agent, the GTP
# and UCI engines' kept trees, AlphaGo's APV-MCTS):
#     run(params, rng_key, root: mctx.RootFnOutput, recurrent_fn, invalid_actions [B, A] bool, search: SearchConfig,
#         loop_fn=jax.lax.fori_loop) -> mctx.PolicyOutput
# mctx's own policies have this shape once the root and the recurrent function are built. `loop_fn` runs the
# simulation loop `loop_fn(0, num_simulations, body, (key, tree))`; the engines pass one that continues a kept tree
# (az_jax/frontends/tree_search.py), which a method can honour only if it plans nothing ahead (`continues`). A new
# method is a function of this type registered under a name (`register`): at once a value of Config.search and
# eval_search and of `az-jax gtp/uci --search`.
SearchFn = Callable[..., mctx.PolicyOutput]


@dataclasses.dataclass(frozen=True)
class SearchMethod:
    run: SearchFn
    continues: bool = True  # it can go on from a kept tree through `loop_fn` (the engines' chunks and tree reuse)


METHODS: dict[str, SearchMethod] = {}


def register(name: str, search_method: SearchMethod) -> SearchMethod:
    """Makes `search_method` a search by `name`; ValueError if the name is another method's."""
    if METHODS.get(name, search_method) is not search_method:
        raise ValueError(f"a search method named {name!r} is registered already")
    METHODS[name] = search_method
    return search_method


def method(name: str) -> SearchMethod:
    """The method registered as `name`; ValueError (one line) naming the known ones otherwise."""
    if name not in METHODS:
        raise ValueError(f"unknown search method {name!r}; known: {', '.join(METHODS)}")
    return METHODS[name]


# AlphaZero's Q transform (`run_search`'s docstring): Q in [-1, 1] onto [0, 1], unvisited children 0
MIN_MAX_Q = functools.partial(mctx.qtransform_by_min_max, min_value=-1.0, max_value=1.0)


def puct(params, rng_key, root, recurrent_fn, invalid, search: SearchConfig, loop_fn=jax.lax.fori_loop):
    """AlphaZero's PUCT (mctx.muzero_policy, `run_search`'s docstring), with KataGo's forced playouts when
    search.forced_playouts_k > 0 (self-play only: `forced_playouts_policy`)."""
    if search.forced_playouts_k > 0:
        return forced_playouts_policy(params, rng_key, root, recurrent_fn, invalid, search)
    return mctx.muzero_policy(
        params,
        rng_key,
        root,
        recurrent_fn,
        search.num_simulations,
        invalid_actions=invalid,
        qtransform=MIN_MAX_Q,
        dirichlet_fraction=search.dirichlet_fraction,
        dirichlet_alpha=search.dirichlet_alpha,
        pb_c_init=search.c_init,
        pb_c_base=search.c_base,
        temperature=1.0,
        loop_fn=loop_fn,
    )


def gumbel(params, rng_key, root, recurrent_fn, invalid, search: SearchConfig, loop_fn=jax.lax.fori_loop):
    """Gumbel MuZero (mctx.gumbel_muzero_policy, `run_search`'s docstring). Its sequential halving plans the whole
    budget in advance, so it does not continue a kept tree."""
    return mctx.gumbel_muzero_policy(
        params,
        rng_key,
        root,
        recurrent_fn,
        search.num_simulations,
        invalid_actions=invalid,
        max_num_considered_actions=search.max_num_considered_actions,
        gumbel_scale=search.gumbel_scale,
        qtransform=functools.partial(
            mctx.qtransform_completed_by_mix_value,
            value_scale=search.gumbel_c_scale,
            maxvisit_init=search.gumbel_c_visit,
        ),
        loop_fn=loop_fn,
    )


MASKED = float(jnp.finfo(jnp.float32).min)  # the prior logit of a move the tree may not play (mask_logits' value)


def paper_action_selection(rng_key, tree: mctx.Tree, node_index, depth=0, *, c_puct: float) -> jax.Array:
    """argmax_a Q(s, a) + c_puct · P(s, a) · sqrt(Σ_b N(s, b)) / (1 + N(s, a)) at one node of an unbatched tree
    (AlphaGo: Silver et al. 2016, Methods, "Selection"); Q = 0 for unvisited edges; moves with a MASKED prior are never
    chosen. With no visit below the node yet, the highest prior."""
    del rng_key, depth
    visits = tree.children_visits[node_index]  # [A] N(s, a)
    logits = tree.children_prior_logits[node_index]  # [A]
    prior = jax.nn.softmax(logits)  # P(s, a)
    q = jnp.where(visits > 0, tree.qvalues(node_index), 0.0)  # W/N from the mover's view at s
    total = visits.sum()
    score = q + c_puct * prior * jnp.sqrt(total.astype(prior.dtype)) / (1.0 + visits)
    score = jnp.where(total > 0, score, prior)
    return jnp.argmax(jnp.where(logits > MASKED / 2, score, -jnp.inf)).astype(jnp.int32)


def most_visited(tree: mctx.Tree) -> jax.Array:
    """[B] the most visited root action among those the tree may play, ties to the highest prior, then the lowest
    index. At a root with no legal move but pass, pass."""
    root = mctx.Tree.ROOT_INDEX
    logits = tree.children_prior_logits[:, root]  # [B, A]
    visits = jnp.where(logits > MASKED / 2, tree.children_visits[:, root], -1)
    top = visits == visits.max(-1, keepdims=True)
    return jnp.argmax(jnp.where(top, logits, -jnp.inf), axis=-1).astype(jnp.int32)


def alphago(params, rng_key, root, recurrent_fn, invalid, search: SearchConfig, loop_fn=jax.lax.fori_loop):
    """AlphaGo's selection (2016, `paper_action_selection`) at every node with c_puct = search.c_init, no root noise;
    plays the most visited move (ties to the highest prior), its weights the root's visit distribution."""
    select = functools.partial(paper_action_selection, c_puct=search.c_init)
    tree = mctx.search(
        params=params,
        rng_key=rng_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=select,
        interior_action_selection_fn=select,
        num_simulations=search.num_simulations,
        invalid_actions=invalid,
        loop_fn=loop_fn,
    )
    return mctx.PolicyOutput(action=most_visited(tree), action_weights=tree.summary().visit_probs, search_tree=tree)


register("puct", SearchMethod(puct))
register("gumbel", SearchMethod(gumbel, continues=False))
register("alphago", SearchMethod(alphago))


def _puct_terms(tree: mctx.Tree, c_init: float, c_base: float) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """At the root of an unbatched tree: (Q transformed to [0, 1] [A], C(s)·sqrt(N(s)) [], priors [A], visits [A]),
    the terms of mctx.muzero_action_selection's score Q + C(s)·P·sqrt(N)/(1 + N(a))."""
    root = mctx.Tree.ROOT_INDEX
    node_visits = tree.node_visits[root]
    c = c_init + jnp.log((node_visits + c_base + 1.0) / c_base)
    q = mctx.qtransform_by_min_max(tree, root, min_value=-1.0, max_value=1.0)
    return q, c * jnp.sqrt(node_visits), jax.nn.softmax(tree.children_prior_logits[root]), tree.children_visits[root]


def forced_playouts(k: float, prior: jax.Array, visits: jax.Array) -> jax.Array:
    """n_forced(c) = sqrt(k · P(c) · Σ_c' N(c')) (KataGo, Wu 2019, §3.2, eq. 3). [A] -> [A]."""
    return jnp.sqrt(k * prior * visits.sum(-1, keepdims=True))


def pruned_policy_target(q: jax.Array, exploration: jax.Array, prior: jax.Array, visits: jax.Array, k: float):
    """Policy target pruning (KataGo §3.2) of one root [A]: the most visited child c* keeps its visits; every other
    child c loses up to n_forced(c) visits, as many as it can while its PUCT score
        Q(c) + exploration · P(c) / (1 + N'(c))        (exploration = C(s)·sqrt(N(s)))
    stays below c*'s with its full count; a child left with at most one visit is dropped. Returns the pruned visit
    distribution [A] (sums to 1)."""
    best = jnp.argmax(visits)
    best_score = q[best] + exploration * prior[best] / (1.0 + visits[best])
    gap = best_score - q  # [A] what c's exploration term must stay below
    # smallest N' with exploration·P/(1 + N') < gap  <=>  N' > exploration·P/gap − 1; no visit can go if gap <= 0
    lowest = jnp.where(gap > 0, jnp.floor(exploration * prior / jnp.maximum(gap, 1e-12) - 1.0) + 1.0, visits)
    counts = visits.astype(jnp.float32)
    pruned = jnp.maximum(counts - forced_playouts(k, prior, counts), jnp.minimum(counts, jnp.maximum(lowest, 0.0)))
    pruned = jnp.where(pruned <= 1.0, 0.0, pruned).at[best].set(counts[best])
    return pruned / pruned.sum()


def forced_playouts_policy(
    variables: dict, rng_key: jax.Array, root: mctx.RootFnOutput, recurrent_fn, invalid: jax.Array, search
) -> mctx.PolicyOutput:
    """mctx.muzero_policy (Dirichlet noise at the root, PUCT everywhere, temperature 1) with KataGo's forced
    playouts at the root, and `action_weights` the pruned visit distribution (the policy target). The move is
    sampled from the pruned distribution too, so the forced visits do not change which move is played more often
    than PUCT would. mctx.muzero_policy has no hook for a root rule, so this calls mctx.search with one; its root noise
    is AlphaZero's (Methods: P = (1 − ε)p + εη, η ~ Dir(α)), as muzero_policy adds it."""
    rng_key, noise_key, search_key = jax.random.split(rng_key, 3)
    probs = jax.nn.softmax(root.prior_logits)
    noise = jax.random.dirichlet(noise_key, jnp.full(probs.shape[-1:], search.dirichlet_alpha), probs.shape[:1])
    noisy = (1.0 - search.dirichlet_fraction) * probs + search.dirichlet_fraction * noise
    logits = jnp.where(invalid, jnp.finfo(probs.dtype).min, jnp.log(jnp.maximum(noisy, jnp.finfo(probs.dtype).tiny)))
    root = root.replace(prior_logits=logits)
    interior = functools.partial(
        mctx.muzero_action_selection, pb_c_init=search.c_init, pb_c_base=search.c_base, qtransform=MIN_MAX_Q
    )

    def root_selection(key, tree, node_index, depth=0):
        q, exploration, prior, visits = _puct_terms(tree, search.c_init, search.c_base)
        score = q + exploration * prior / (visits + 1) + 1e-7 * jax.random.uniform(key, visits.shape)
        forced = (visits >= 1) & (visits < forced_playouts(search.forced_playouts_k, prior, visits))
        score = jnp.where(forced, score + 1e6, score)  # a visited child short of n_forced(c) goes first
        return jnp.argmax(jnp.where(tree.root_invalid_actions, -jnp.inf, score))

    tree = mctx.search(
        params=variables,
        rng_key=search_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=root_selection,
        interior_action_selection_fn=interior,
        num_simulations=search.num_simulations,
        invalid_actions=invalid,
    )
    weights = jax.vmap(
        lambda tree: pruned_policy_target(*_puct_terms(tree, search.c_init, search.c_base), search.forced_playouts_k)
    )(tree)
    action = jax.random.categorical(rng_key, jnp.log(jnp.maximum(weights, 1e-30)))
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=tree)


def visit_counts(output: mctx.PolicyOutput) -> jax.Array:
    """Root visit counts [B, A]."""
    return output.search_tree.summary().visit_counts


def greedy_action(output: mctx.PolicyOutput, legal: jax.Array) -> jax.Array:
    """The most visited legal root action [B], ties broken by the search's policy (`action_weights`), then by the
    lowest index. Used after the sampling plies and in evaluation.

    For PUCT the weights are the visit counts, so this is argmax N(a). For Gumbel search it is the action sequential
    halving ends on when run without Gumbel noise (Danihelka et al. 2022, §3: argmax of logits + σ(q̂) among the
    most visited considered actions), which visits alone cannot name: the last halving phase leaves the finalists
    with equal counts."""
    visits = jnp.where(legal, visit_counts(output), -1)  # [B, A]
    top = visits == jnp.max(visits, axis=-1, keepdims=True)
    return jnp.argmax(jnp.where(top, output.action_weights, -jnp.inf), axis=-1)


def greedy_search(
    apply_fn: ApplyFn, env: pgx.Env, variables: dict, rng_key: jax.Array, states: pgx.State, search: SearchConfig
) -> tuple[jax.Array, mctx.PolicyOutput]:
    """Greedy play (AlphaZero, Methods: evaluation plays the most visited move, no noise): searches states [B, ...]
    with `search` (made by `SearchConfig.for_play`); returns (actions [B], the search's output). The key is consumed."""
    out = run_search(apply_fn, env, variables, rng_key, states, search)
    legal = allowed_moves(states, search.eye_rule_game)
    actions = greedy_action(out, legal)
    if search.pass_check_game is not None:  # Go: the pass the rules' count decides (envs/go_scoring.py)
        no_pass = legal.at[:, -1].set(False)
        best_other = jnp.where(no_pass.any(axis=-1), greedy_action(out, no_pass), actions)
        checked_pass = get_game(search.pass_check_game).checked_pass
        assert checked_pass is not None  # for_play sets pass_check_game only for a game that has one
        actions = jax.vmap(checked_pass)(states, actions, best_other)
    return actions, out
