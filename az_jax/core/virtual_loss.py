"""APV-MCTS with several leaves per tree per step under virtual loss (Silver et al., Nature 2016, Methods, "Searching
with policy and value networks": "virtual loss", n_vl = 3 in Extended Data Table 5), on mctx's tree.

    out = search(params, key, root, recurrent_fn, invalid, simulations=400, leaves=8, c_puct=5.0, n_vl=3.0)
    tree, free = grow(params, key, tree, free, first_step, steps, recurrent_fn, leaves=8, c_puct=5.0, n_vl=3.0)
                                    # more steps on a kept tree (an engine's, az_jax/frontends/tree_search.py)

The paper runs many search threads on one tree, asynchronously: a thread that descends an edge adds n_vl visits that
all lost to it, N(s, a) ← N(s, a) + n_vl and W(s, a) ← W(s, a) − n_vl, so the threads after it spread over other
moves; when its evaluation comes back the virtual visits are taken off and the real one backed up. On one device the
asynchrony becomes a batch: each step selects `leaves` leaves of every tree in turn, each selection seeing the virtual
losses of the ones before it (`virtual_selection`); the leaves × B games are then evaluated together, in one call of
`recurrent_fn` (one network batch, one rollout loop); then, in the order they were selected, each leaf is expanded
and backed up and its virtual losses are removed. With one leaf per step no virtual loss is ever seen and the search
is the synchronous one of apv_mcts.py, visit for visit (tests/test_alphago_virtual_loss.py).

* The virtual visits count in the combined statistics (apv_mcts.py evaluates v_θ and z together, so the paper's
  separate N_r/W_r and N_v/W_v are one N/W here); selection is apv_mcts.py's (`paper_action_selection`) with
  N' = N + n_vl·i and W' = W − n_vl·i, i the selections in flight through the edge.
* Two leaves of one step can still reach the same unexpanded edge (a prior strong enough to outweigh n_vl losses).
  The first to be settled expands it; the second is a second visit of that node: its own evaluation (its own
  rollout) is backed up through it, and its priors are dropped (the same position's).
* A tree holds one node per leaf, so `simulations` must be a multiple of `leaves`.
* Expansion threshold `n_thr` > 0 (the paper's n_thr = 40: a node is added once N(s, a) > n_thr, with the tree
  policy's priors until the policy network's arrive from the GPU queue): a node is made at its first visit with
  `recurrent_fn`'s priors (the placeholders) but stays a leaf while its visits are at most n_thr: a selection that
  reaches it takes its edge again (another evaluation of the same position, e.g. a new rollout) instead of going
  below it. The settle that takes its visits past n_thr queues it; the next step calls `prior_fn` on the queued
  positions (skipped when none is queued) beside its leaves' evaluation, and their priors replace the placeholders
  at the end of that step: one step of latency, in which that step's selections go below the node by the
  placeholders. What is still queued when the search ends arrives then.

mctx builds the tree (`instantiate_tree_from_root`) and descends it (`simulate`, with our selection); its search loop
evaluates one leaf per tree at a time, so the loop, the expansion of several leaves and their backups are here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mctx
from mctx._src import search as mctx_search  # the tree's allocation and its descent (mctx pinned in constraints.txt)

from az_jax.core import backup
from az_jax.core import search as search_lib

MASKED = search_lib.MASKED
Tree = mctx.Tree
PriorFn = Callable[[Any, jax.Array, Any], jax.Array]  # (params, key, embeddings [M, ...]) -> prior logits [M, A]


def virtual_selection(rng_key, tree: mctx.Tree, node_index, depth=0, *, c_puct: float, n_vl: float) -> jax.Array:
    """apv_mcts.py's selection, argmax_a Q'(s, a) + c_puct · P(s, a) · sqrt(Σ_b N'(s, b)) / (1 + N'(s, a)), on the
    statistics with the virtual losses in flight (`tree.extra_data` [nodes, A]: selections through each edge):
    N' = N + n_vl·i, W' = W − n_vl·i, Q' = W'/N' (0 where N' = 0). With nothing in flight it is
    `paper_action_selection` itself; with no visit below the node, the highest prior."""
    del rng_key, depth
    inflight = tree.extra_data[node_index].astype(jnp.float32)  # [A] i
    visits = tree.children_visits[node_index]  # [A] N(s, a)
    logits = tree.children_prior_logits[node_index]  # [A]
    prior = jax.nn.softmax(logits)  # P(s, a)
    q = jnp.where(visits > 0, tree.qvalues(node_index), 0.0)  # W/N from the mover's view at s
    n = visits + n_vl * inflight  # N'
    q = jnp.where(inflight > 0, (q * visits - n_vl * inflight) / jnp.maximum(n, 1e-9), q)  # Q' = W'/N'
    total = n.sum()
    score = q + c_puct * prior * jnp.sqrt(total.astype(prior.dtype)) / (1.0 + n)
    score = jnp.where(total > 0, score, prior)
    return jnp.argmax(jnp.where(logits > MASKED / 2, score, -jnp.inf)).astype(jnp.int32)


def _mark(tree: mctx.Tree, parent: jax.Array, action: jax.Array, delta: int) -> mctx.Tree:
    """One tree (unbatched): adds `delta` to the in-flight count of the edge (parent, action) and of every edge on the
    path from the root down to `parent`."""
    inflight = tree.extra_data.at[parent, action].add(delta)

    def up(carry):
        node, inflight = carry
        above = tree.parents[node]
        return above, inflight.at[above, tree.action_from_parent[node]].add(delta)

    _, inflight = jax.lax.while_loop(lambda c: c[0] != Tree.ROOT_INDEX, up, (parent, inflight))
    return tree.replace(extra_data=inflight)


def _expand(tree: mctx.Tree, node, new, parent, action, step: mctx.RecurrentFnOutput, embedding) -> mctx.Tree:
    """One tree: writes the leaf reached by (parent, action) as node `node` when it is `new` (priors, raw value, state,
    and its place under its parent); a node already there keeps what it has."""

    def put(x, value, *at):
        return x.at[at].set(jnp.where(new, value, x[at]))

    return tree.replace(
        children_prior_logits=put(tree.children_prior_logits, step.prior_logits, node),
        raw_values=put(tree.raw_values, step.value, node),
        embeddings=jax.tree.map(lambda x, e: put(x, e, node), tree.embeddings, embedding),
        children_index=put(tree.children_index, node, parent, action),
        children_rewards=put(tree.children_rewards, step.reward, parent, action),
        children_discounts=put(tree.children_discounts, step.discount, parent, action),
        parents=put(tree.parents, parent, node),
        action_from_parent=put(tree.action_from_parent, action, node),
    )


def _backup(tree: mctx.Tree, node, value) -> mctx.Tree:
    """Trees [B, ...]: one visit of `node` [B] worth `value` [B] (for the player to move there), then mctx's backward
    pass from it to the root (reward + discount · value at each edge, running means; backup.walk_up, batched so a
    step costs O(B), not the whole tree's select of a vmapped loop). For a new node this is mctx's expansion and
    backward exactly: its value becomes `value`, its visits 1."""
    games = jnp.arange(node.shape[0])
    visits = tree.node_visits[games, node]
    tree = tree.replace(
        node_values=tree.node_values.at[games, node].set(
            (tree.node_values[games, node] * visits + value) / (visits + 1.0)
        ),
        node_visits=tree.node_visits.at[games, node].set(visits + 1),
    )
    return backup.walk_up(tree, node, value)


def _leading(x: jax.Array, b: int, k: int) -> jax.Array:
    """[B·K, ...] (game-major) -> [K, B, ...]."""
    return jnp.swapaxes(x.reshape((b, k, *x.shape[1:])), 0, 1)


def grow(
    params,
    rng_key: jax.Array,
    tree: mctx.Tree,
    free: jax.Array,
    first_step,
    steps,
    recurrent_fn: mctx.RecurrentFn,
    *,
    leaves: int,
    c_puct: float,
    n_vl: float,
    n_thr: int = 0,
    prior_fn: PriorFn | None = None,
) -> tuple[mctx.Tree, jax.Array]:
    """`steps` more steps of `leaves` leaves per tree on `tree` (its `extra_data` the in-flight counts [B, nodes, A],
    zero between steps), whose next unused node is `free` [B]; step i draws its keys from fold_in(rng_key,
    first_step + i), so steps run in chunks give the tree one call would. Returns (tree, free). `steps` and
    `first_step` may be traced; the tree must have room for steps · leaves more nodes.

    With an expansion threshold `n_thr` > 0 (the module docstring) `recurrent_fn`'s priors are the placeholders and
    `prior_fn(params, key, embedding [M, ...]) -> prior logits [M, A]` gives a node's priors once its visits pass
    n_thr."""
    if n_thr > 0 and prior_fn is None:
        raise ValueError("an expansion threshold needs prior_fn, the priors that replace the placeholders")
    b = free.shape[0]
    games = jnp.arange(b)
    select = functools.partial(virtual_selection, c_puct=c_puct, n_vl=n_vl)  # the same at the root and below
    depth = tree.node_visits.shape[1] - 1  # mctx's default: as deep as the tree has nodes
    mark = jax.vmap(_mark, in_axes=(0, 0, 0, None))

    def choose(tree, key):  # one leaf of every tree, seeing the virtual losses of the ones chosen before it
        parent, action = mctx_search.simulate(jax.random.split(key, b), tree, select, depth)
        if n_thr > 0:  # a node at or below the threshold is a leaf: its own edge is chosen again, not one below it
            below = (parent != Tree.ROOT_INDEX) & (tree.node_visits[games, parent] <= n_thr)
            parent, action = (
                jnp.where(below, tree.parents[games, parent], parent),
                jnp.where(below, tree.action_from_parent[games, parent], action),
            )
        return mark(tree, parent, action, 1), (parent, action)

    def settle(carry, leaf):  # expand and back up one leaf of every tree, and take its virtual losses off
        tree, free = carry
        parent, action, step, embedding = leaf
        existing = tree.children_index[games, parent, action]
        new = existing == Tree.UNVISITED
        node = jnp.where(new, free, existing)
        before = jnp.where(new, 0, tree.node_visits[games, node])
        tree = jax.vmap(_expand)(tree, node, new, parent, action, step, embedding)
        tree = _backup(tree, node, step.value)
        crossed = jnp.where((n_thr > 0) & (before == n_thr), node, -1)  # [B]: passes the threshold now
        return (mark(tree, parent, action, -1), free + new), crossed

    def arrive(tree, queue, key):  # the priors of the nodes queued [B, K] (−1: none) replace their placeholders
        def priors(tree):
            assert prior_fn is not None
            flat = jax.tree.map(
                lambda x: x[games[:, None], jnp.maximum(queue, 0)].reshape((b * leaves, *x.shape[2:])), tree.embeddings
            )
            return _leading(prior_fn(params, key, flat), b, leaves)  # [K, B, A]

        logits = jax.lax.cond(
            (queue >= 0).any(), priors, lambda t: jnp.zeros((leaves, *t.children_prior_logits[:, 0].shape)), tree
        )
        at = jnp.where(queue >= 0, queue, tree.children_prior_logits.shape[1])  # out of range: dropped
        return tree.replace(
            children_prior_logits=tree.children_prior_logits.at[games[:, None], at].set(
                jnp.swapaxes(logits, 0, 1), mode="drop"
            )
        )

    def step_keys(i):  # step i's keys: selection, evaluation (with a threshold: the queue's, and the last flush's)
        return jax.random.split(jax.random.fold_in(rng_key, first_step + i), 4 if n_thr > 0 else 2)

    def body(i, carry):
        tree, free, queue = carry
        select_key, eval_key, *queue_keys = step_keys(i)
        tree, (parents, actions) = jax.lax.scan(choose, tree, jax.random.split(select_key, leaves))  # [K, B] each
        flat = jax.tree.map(lambda x: x[games[:, None], parents.T].reshape((b * leaves, *x.shape[2:])), tree.embeddings)
        step, embedding = recurrent_fn(params, eval_key, actions.T.reshape(-1), flat)
        per_leaf = jax.tree.map(lambda x: _leading(x, b, leaves), (step, embedding))
        (tree, free), crossed = jax.lax.scan(settle, (tree, free), (parents, actions, *per_leaf))
        if n_thr > 0:  # last step's queue, evaluated with this step's leaves, arrives now: one step late
            tree = arrive(tree, queue, queue_keys[0])
        return tree, free, crossed.T

    queue = jnp.full((b, leaves), -1, jnp.int32)
    tree, free, queue = jax.lax.fori_loop(0, steps, body, (tree, free, queue))
    if n_thr > 0:  # the search ends: what is still queued arrives
        tree = arrive(tree, queue, step_keys(steps - 1)[3])
    return tree, free


def in_flight(tree: mctx.Tree) -> jax.Array:
    """[B, nodes, A] int32 zeros: the in-flight counts `grow` keeps in a tree's extra_data."""
    return jnp.zeros(tree.children_visits.shape, jnp.int32)


def search(
    params,
    rng_key: jax.Array,
    root: mctx.RootFnOutput,
    recurrent_fn: mctx.RecurrentFn,
    invalid: jax.Array,
    *,
    simulations: int,
    leaves: int,
    c_puct: float,
    n_vl: float,
    n_thr: int = 0,
    prior_fn: PriorFn | None = None,
) -> mctx.PolicyOutput:
    """`simulations` simulations per tree of the B roots, `leaves` of them per step evaluated together (the module
    docstring). `recurrent_fn(params, key, action [B·leaves], embedding [B·leaves, ...])` sees the leaves game-major.
    Plays the most visited root move (ties to the highest prior); `action_weights` are the root's visit shares. The
    key is consumed."""
    if leaves < 1 or simulations % leaves:
        raise ValueError(f"leaves per step must be ≥ 1 and divide the simulations ({simulations}), not {leaves}")
    b = root.prior_logits.shape[0]
    tree = mctx_search.instantiate_tree_from_root(root, simulations, root_invalid_actions=invalid, extra_data=None)
    tree = tree.replace(extra_data=in_flight(tree))
    free = jnp.ones(b, jnp.int32)
    steps = simulations // leaves
    tree, _ = grow(
        params, rng_key, tree, free, 0, steps, recurrent_fn,
        leaves=leaves, c_puct=c_puct, n_vl=n_vl, n_thr=n_thr, prior_fn=prior_fn,
    )  # fmt: skip
    return mctx.PolicyOutput(
        action=search_lib.most_visited(tree), action_weights=tree.summary().visit_probs, search_tree=tree
    )
