"""One game's search tree, kept between calls: searched in chunks of simulations (time control, live analysis) and
carried over to the next move (tree reuse). mctx keeps no tree between calls; this module does.

API (batch of one game; host-side object around jitted pure functions):

    ts = TreeSearch(agent, capacity=None, chunk=32, search="puct")
                                    # agent: az_jax.runtime.agent.Agent; env: agent.env unless given; capacity None:
                                    # default_capacity(env); search: a method of az_jax/core/search.py that continues
    ts.reset(state)                 # an unbatched pgx state: a fresh root, no tree
    ts.search(64)                   # adds up to 64 simulations to the tree (fewer once `capacity` is full); returns
                                    # how many it added
    ts.visits                       # simulations in the tree under the root (int)
    ts.moves()                      # [MoveInfo], most visited first: action, visits, winrate, prior, pv (actions)
    ts.best_action()                # the most visited legal action (ties: the higher prior), as Agent.act plays
    ts.value                        # the root's search value for the player to move, in [-1, 1]
    ts.play(action)                 # the game moves on: the chosen child's subtree becomes the tree; ts.reused says
                                    # how many of its visits were carried over
    ts.state                        # the current (unbatched) pgx state
    ts.full                         # the tree has no room for another chunk

    think(ts, seconds=2.0, max_visits=None, stop=event.is_set, on_chunk=callback)
                                    # searches chunk by chunk until `seconds` have passed, the tree holds
                                    # `max_visits` visits, stop() is true (checked between chunks) or the tree is full;
                                    # calls on_chunk() after each chunk (live analysis); returns simulations added

How the tree is continued, using mctx's public API only: a search method (az_jax/core/search.py; mctx's policies and
mctx.search) takes a `loop_fn` that runs its simulation loop `loop_fn(0, num_simulations, body, (key, fresh_tree))`.
Ours runs the same body on the kept tree from simulation `start` instead. In mctx every simulation adds exactly one
node, numbered `simulation + 1` (the depth limit is the tree's capacity, never reached), so a tree whose root has V
visits holds nodes 0..V−1 and the next simulation is number V − 1. The search is PUCT without root noise (AlphaZero,
Methods: evaluation and matches) and deterministic but for mctx's tie-breaking noise (1e-7 · uniform added to the PUCT
scores), whose key we make a function of the simulation's number (`fold_in(tree key, number)`). So chunks of 16 + 16
simulations give the same tree as one search of 32 (tests/test_tree_search.py checks it), and a reused subtree is the
tree a search from that position would have grown after the simulations that passed through it (the same visits, where
no two PUCT scores tie exactly: the tie-breaks are drawn with other numbers).

Reuse: after `play(a)`, the node reached by `a` becomes the root: its subtree (node_visits[a] nodes, the root's count
included) is copied to nodes 0..V−1 in the order of its node numbers, so a parent still comes before its children and
the simulations added next number on from V − 1 as above. A node reached by an action never searched gives a fresh
root. The priors kept in the subtree are the network's at that node (no noise ever enters an engine's tree), which is
what a fresh root there would get, so the continued search is a search from the new position with a head start.
An engine searches by the method it is given (`search`, default PUCT with the run's c_init and c_base), whatever the
run's acting search; a method that plans its budget ahead (Gumbel's sequential halving) cannot be continued and is
refused (ValueError, one line).

What evaluates the tree's positions is an `Evaluator` (root priors and value, mctx's recurrent_fn): an AlphaZero
agent's network (`network_evaluator`), or whatever an agent with a `tree_evaluator(env)` method gives: an AlphaGo
agent's p_σ^β priors and (1 − λ)·v_θ + λ·z leaf values (az_jax/alphago/play_agent.py), searched by "alphago".
"""

import dataclasses
import functools
import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pgx

from az_jax.core import search as search_lib
from az_jax.core import virtual_loss

Tree = mctx.Tree  # the tree type (a chex dataclass) and its constants (NO_PARENT, UNVISITED)


@dataclasses.dataclass(frozen=True)
class MoveInfo:
    action: int
    visits: int
    winrate: float  # in [0, 1], for the player to move at the root: (1 + Q) / 2 of the child; its prior's if unvisited
    prior: float  # the network's probability of the action at the root
    pv: tuple[int, ...]  # principal variation: this action, then the most visited child at each node below


def _batched(state: pgx.State) -> pgx.State:
    return jax.tree.map(lambda x: x[None], state)


def _unbatched(state: pgx.State) -> pgx.State:
    return jax.tree.map(lambda x: x[0], state)


@dataclasses.dataclass(frozen=True)
class Evaluator:
    """How a kept tree's positions are evaluated: `root(variables, key, state [1, ...]) -> mctx.RootFnOutput` (the
    prior logits with every move the tree may not play masked) and mctx's `recurrent_fn(variables, key, action,
    state)`. Made once per (network, env) and cached, so the programs built on it are too."""

    root: Callable
    recurrent_fn: Callable
    # An expansion threshold n_thr > 0 (az_jax/core/virtual_loss.py): recurrent_fn's priors are placeholders, and
    # `prior_fn(variables, key, states [M, ...]) -> prior logits [M, A]` gives a node's own once its visits pass n_thr.
    n_thr: int = 0
    prior_fn: Callable | None = None
    # The moves the tree may try and play: the legal ones less the mover's own eyes where this names the game
    # (Config.eye_rule; search.allowed_moves); None: the legal ones.
    eye_rule_game: str | None = None


@functools.cache
def network_evaluator(apply_fn, env: pgx.Env, eye_rule_game: str | None = None) -> Evaluator:
    """An AlphaZero network's: the priors and value of `apply_fn` on the observation, the moves outside
    `search.allowed_moves` (illegal ones; the mover's own eyes with `eye_rule_game`) masked."""

    def root(variables, key, state):
        del key  # no root noise and no random symmetry in an engine's tree
        logits, value = apply_fn(variables, state.observation)
        allowed = search_lib.allowed_moves(state, eye_rule_game)
        return mctx.RootFnOutput(prior_logits=search_lib.mask_logits(logits, allowed), value=value, embedding=state)

    recurrent_fn = search_lib.make_recurrent_fn(env, apply_fn, eye_rule_game=eye_rule_game)
    return Evaluator(root, recurrent_fn, eye_rule_game=eye_rule_game)


class _Programs:
    """The jitted pure functions of one (evaluator, game, capacity, chunk): shared by every TreeSearch that uses
    them."""

    def __init__(
        self,
        evaluator: Evaluator,
        env: pgx.Env,
        c_init: float,
        c_base: float,
        capacity: int,
        search: str = "puct",
        leaves: int = 1,
        n_vl: float = 3.0,
    ):
        self.env = env
        self.capacity = capacity
        recurrent_fn = evaluator.recurrent_fn
        method = search_lib.method(search)
        if not method.continues:
            raise ValueError(
                f"the search method {search!r} cannot continue a kept tree; an engine searches by one that can"
            )
        # several leaves a step, or an expansion threshold: the tree grows by core/virtual_loss.py, not mctx's loop
        self.virtual = leaves > 1 or evaluator.n_thr > 0
        if self.virtual and search != "alphago":
            raise ValueError(
                "leaves per step (virtual loss) and expansion thresholds are for the search method alphago, "
                f"not {search!r}"
            )
        # the tree holds the root and one node per simulation; no root noise (AlphaZero, Methods: evaluation)
        settings = search_lib.SearchConfig(
            num_simulations=capacity - 1, algorithm=search, c_init=c_init, c_base=c_base, dirichlet_fraction=0.0
        )

        def policy(variables, key, state, loop_fn):
            """The search method on one batched state [1, ...], its loop replaced by `loop_fn`; -> the tree."""
            # the simulations' keys are fold_in(key, number < capacity - 1): the root's is a number none of them has
            root = evaluator.root(variables, jax.random.fold_in(key, capacity), state)
            invalid = root.prior_logits <= search_lib.MASKED / 2
            return method.run(variables, key, root, recurrent_fn, invalid, settings, loop_fn=loop_fn).search_tree

        def fresh(variables, key, state):
            """A tree of the root alone (mctx's own initial tree: root evaluated, one visit); grown by virtual_loss,
            its extra_data holds the in-flight counts of virtual loss (all 0)."""
            tree = policy(variables, key, state, lambda lower, upper, body, init: init)
            return tree.replace(extra_data=virtual_loss.in_flight(tree)) if self.virtual else tree

        def extend_virtual(variables, key, tree, free, first_step, steps):
            """`steps` steps of `leaves` leaves each under virtual loss (az_jax/core/virtual_loss.py), with the
            evaluator's expansion threshold, on `tree`, whose next unused node is `free` [1]; -> (tree, free). What
            crosses the threshold in the last step gets its priors at the end of the call."""
            return virtual_loss.grow(
                variables,
                key,
                tree,
                free,
                first_step,
                steps,
                recurrent_fn,
                leaves=leaves,
                c_puct=c_init,
                n_vl=n_vl,
                n_thr=evaluator.n_thr,
                prior_fn=evaluator.prior_fn,
            )

        def extend(variables, key, tree, start, count):
            """`count` more simulations on `tree`, numbered from `start` (= root visits − 1)."""

            def loop_fn(lower, upper, body, init):
                def numbered(sim, carry):  # simulation `sim` gets the same key in whatever chunk it runs
                    return body(sim, (jax.random.fold_in(key, sim), carry[1]))

                return jax.lax.fori_loop(start, start + count, numbered, (init[0], tree))

            state = jax.tree.map(lambda x: x[:, 0], tree.embeddings)
            return policy(variables, key, state, loop_fn)

        def subtree(tree, order, size, remap, legal):
            """The nodes `order` [capacity] (the subtree first, in node order; padding after `size`) renumbered by
            `remap` [capacity] (old -> new, −1 outside the subtree) as a tree of their own, rooted at order[0]."""
            keep = jnp.arange(capacity) < size  # [capacity]

            def take(x, fill):
                taken = jnp.take(x, order, axis=1)
                mask = keep.reshape((1, capacity) + (1,) * (x.ndim - 2))
                return jnp.where(mask, taken, jnp.asarray(fill, x.dtype))

            def renumber(index):
                return jnp.where(index >= 0, remap[jnp.maximum(index, 0)], index)

            parents = renumber(take(tree.parents, Tree.NO_PARENT)).at[:, 0].set(Tree.NO_PARENT)
            return tree.replace(
                node_visits=take(tree.node_visits, 0),
                raw_values=take(tree.raw_values, 0),
                node_values=take(tree.node_values, 0),
                parents=parents,
                action_from_parent=take(tree.action_from_parent, Tree.NO_PARENT).at[:, 0].set(Tree.NO_PARENT),
                children_index=renumber(take(tree.children_index, Tree.UNVISITED)),
                children_prior_logits=take(tree.children_prior_logits, 0),
                children_values=take(tree.children_values, 0),
                children_visits=take(tree.children_visits, 0),
                children_rewards=take(tree.children_rewards, 0),
                children_discounts=take(tree.children_discounts, 0),
                embeddings=jax.tree.map(lambda x: take(x, 0), tree.embeddings),
                root_invalid_actions=~legal[None],
                extra_data=None if tree.extra_data is None else jnp.zeros_like(tree.extra_data),  # nothing in flight
            )

        def summary(tree):
            """What the host reads of a tree, all small: the root's rows [A], and per node [capacity] its parent,
            visits, and most visited action with the child it leads to (for principal variations)."""
            tree = jax.tree.map(lambda x: x[0], tree)  # batch of one
            visits = tree.children_visits  # [capacity, A]
            best = jnp.argmax(visits, axis=-1)  # [capacity]
            q = tree.children_rewards[0] + tree.children_discounts[0] * tree.children_values[0]  # [A]
            return {
                "root_visits": visits[0],
                "root_prior_logits": tree.children_prior_logits[0],
                "root_q": q,
                "root_children": tree.children_index[0],
                "root_value": tree.node_values[0],
                "node_visits": tree.node_visits,
                "parents": tree.parents,
                "best_action": best,
                "best_child": jnp.take_along_axis(tree.children_index, best[:, None], axis=-1)[:, 0],
                "best_visits": jnp.max(visits, axis=-1),
            }

        self.fresh = jax.jit(fresh)
        self.summary = jax.jit(summary)
        self.extend = jax.jit(extend, donate_argnums=2)
        self.extend_virtual = jax.jit(extend_virtual, donate_argnums=2)
        self.subtree = jax.jit(subtree)
        self.step = jax.jit(env.step)
        self.allowed = jax.jit(lambda state: search_lib.allowed_moves(_batched(state), evaluator.eye_rule_game)[0])
        self.softmax = jax.jit(jax.nn.softmax)


TREE_BUDGET_BYTES = 16 * 2**20  # default_capacity's budget for the tree's per-node arrays
CAPACITY_RANGE = (256, 8192)


def node_bytes(env: pgx.Env) -> int:
    """Bytes one tree node takes: its position (mctx keeps each node's pgx state as its embedding) and its children's
    rows (index, prior logit, value, visits, reward, discount: 6 × 4 bytes per action)."""
    state = jax.eval_shape(env.init, jax.random.key(0))
    leaves = [x for x in jax.tree.leaves(state) if not jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)]
    return sum(x.size * x.dtype.itemsize for x in leaves) + 24 * env.num_actions


def default_capacity(env: pgx.Env, budget: int = TREE_BUDGET_BYTES) -> int:
    """The largest power of two in CAPACITY_RANGE whose tree fits `budget` bytes (the smallest if none does).

    Why a budget: every simulation's cost grows with the tree's size once the tree outgrows the CPU's caches, whatever
    the number of nodes in use (`python -m experiments.engine.tree_capacity RUN_DIR`; a go_9x9 run, 7.7 kB a node,
    2-core CPU with one other busy process: 1.3 ms a simulation at 256 nodes, 1.9 at 1024, 2.3 at 2048, 9.9 at 8192).
    go_9x9 gets 2048 nodes, go_19x19 and chess 256; engines take --capacity to trade speed for the most visits one
    position can hold."""
    per_node = node_bytes(env)
    capacity = CAPACITY_RANGE[0]
    while capacity * 2 <= CAPACITY_RANGE[1] and capacity * 2 * per_node <= budget:
        capacity *= 2
    return capacity


def engine_programs(
    apply_fn, env: pgx.Env, c_init: float, c_base: float, variables, sharding, capacity: int | None = None
) -> dict:
    """name -> a function lowering that program of an engine's search (one game) for `sharding`'s device, from abstract
    `variables`: "engine root" (a fresh root evaluated) and "engine chunk" (simulations added to a kept tree; the
    count is an argument, so one program serves every chunk size). For az_jax/runtime/preflight.py: what `az-jax
    gtp/uci` will compile on the accelerator."""
    capacity = default_capacity(env) if capacity is None else capacity
    programs = _Programs(network_evaluator(apply_fn, env), env, c_init, c_base, capacity)
    place = lambda tree: jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree)
    key = place(jax.eval_shape(lambda: jax.random.key(0)))
    state = place(jax.eval_shape(lambda: _batched(env.init(jax.random.key(0)))))
    tree = place(jax.eval_shape(programs.fresh, variables, key, state))
    count = place(jax.ShapeDtypeStruct((), jnp.int32))
    return {
        "engine root": lambda: programs.fresh.lower(variables, key, state),
        "engine chunk": lambda: programs.extend.lower(variables, key, tree, count, count),
    }


@functools.cache
def _programs(evaluator, env, c_init, c_base, capacity, search="puct", leaves=1, n_vl=3.0) -> _Programs:
    return _Programs(evaluator, env, c_init, c_base, capacity, search, leaves, n_vl)


class TreeSearch:
    """See the module docstring. Not thread-safe: one thread searches it at a time."""

    def __init__(
        self,
        agent,
        env: pgx.Env | None = None,
        capacity: int | None = None,
        chunk: int = 32,
        seed: int = 0,
        search: str = "puct",
        leaves: int = 1,
        n_vl: float = 3.0,
    ):
        env = env if env is not None else agent.env
        capacity = default_capacity(env) if capacity is None else capacity
        if capacity < 2 or chunk < 1 or leaves < 1 or capacity <= leaves:
            raise ValueError(
                f"capacity must be >= 2 and > leaves, chunk and leaves >= 1, got {capacity}, {chunk} and {leaves}"
            )
        self.agent = agent
        self.env = env
        self.capacity = capacity
        self.chunk = chunk
        self.variables = agent.variables
        config = agent.config
        evaluator = agent.tree_evaluator(env) if hasattr(agent, "tree_evaluator") else None  # an AlphaGo agent's
        eye_rule_game = config.game if getattr(config, "eye_rule", "off") != "off" else None  # AlphaGo's: no key
        evaluator = evaluator or network_evaluator(agent.setup.play_apply, self.env, eye_rule_game)
        self._programs = _programs(evaluator, self.env, config.c_init, config.c_base, capacity, search, leaves, n_vl)
        self.leaves = leaves
        self.n_thr = evaluator.n_thr
        self._virtual = self._programs.virtual
        self._nodes = 1  # nodes in use (grown by virtual_loss: a step's leaves that meet at one new node add one node)
        self._steps = 0  # virtual-loss steps run on this tree (their keys' numbers)
        self._key = jax.random.key(seed)
        self._tree_key = self._key
        self.reused = 0
        self.state: pgx.State | None = None
        self._tree: mctx.Tree | None = None
        self._host: dict[str, np.ndarray] | None = None
        self._allowed: np.ndarray | None = None  # [A] the moves the tree may play at its root (Evaluator.eye_rule_game)

    def _next_key(self) -> jax.Array:
        self._key, key = jax.random.split(self._key)
        return key

    # -- the tree ----------------------------------------------------------------------------------------------------

    def reset(self, state: pgx.State) -> None:
        """A fresh root at `state` (unbatched): the root evaluated, no simulations."""
        self.state = state
        self._allowed = np.asarray(self._programs.allowed(state))
        self._tree_key = self._next_key()  # the tree's simulations' keys: fold_in(this, simulation number)
        self._tree = self._programs.fresh(self.variables, self._tree_key, _batched(state))
        self.reused = 0
        self._nodes, self._steps = 1, 0
        self._host = None

    def _require(self) -> mctx.Tree:
        if self._tree is None:
            raise RuntimeError("TreeSearch: call reset(state) first")
        return self._tree

    @property
    def visits(self) -> int:
        """Simulations in the tree (the root's visit count less its own evaluation)."""
        return int(self._get("node_visits")[0]) - 1

    @property
    def full(self) -> bool:
        if self._virtual:
            return self._nodes + self.leaves > self.capacity
        return self.visits + 1 >= self.capacity

    def search(self, num_simulations: int) -> int:
        """Adds up to `num_simulations` simulations, `chunk` at a time (fewer once the tree is full); returns how
        many it added. With leaves > 1 (or an expansion threshold), whole steps of `leaves` simulations: at least one
        step when there is room, so it may add up to leaves − 1 more than asked."""
        tree = self._require()
        added = 0
        if self._virtual:
            while added < num_simulations and not self.full:
                want = -(-min(self.chunk, num_simulations - added) // self.leaves)  # steps, rounded up
                steps = min(want, (self.capacity - self._nodes) // self.leaves)
                tree, free = self._programs.extend_virtual(
                    self.variables,
                    self._tree_key,
                    tree,
                    np.full(1, self._nodes, np.int32),
                    np.int32(self._steps),
                    np.int32(steps),
                )
                self._tree, self._host = tree, None
                self._nodes, self._steps = int(free[0]), self._steps + steps
                added += steps * self.leaves
            return added
        while added < num_simulations and not self.full:
            start = self.visits  # the next simulation's number: nodes 0..visits are in use
            count = min(self.chunk, num_simulations - added, self.capacity - 1 - start)
            tree = self._programs.extend(self.variables, self._tree_key, tree, np.int32(start), np.int32(count))
            self._tree, self._host = tree, None
            added += count
        return added

    def play(self, action: int) -> None:
        """The game moves on by `action`: the subtree under it becomes the tree (a fresh root if it has none)."""
        tree = self._require()
        assert self.state is not None  # set with the tree
        legal = np.asarray(self.state.legal_action_mask)
        if not (0 <= action < legal.shape[0] and legal[action]):
            raise ValueError(f"action {action} is not legal here")
        next_state = self._programs.step(self.state, jnp.int32(action))
        child = int(self._get("root_children")[action])
        if child == Tree.UNVISITED or (self.n_thr > 0 and self._get("node_visits")[child] <= self.n_thr):
            # none, or a leaf below the expansion threshold: no node under it, and only the placeholder priors
            self.reset(next_state)
            return
        # The subtree's nodes, in node order: mctx numbers a node after its parent, so one pass over the parents
        # finds every descendant of `child`.
        parents, used = self._get("parents"), (self._nodes if self._virtual else self.visits + 1)
        inside = np.zeros(self.capacity, bool)
        inside[child] = True
        for node in range(child + 1, used):
            inside[node] = inside[parents[node]]
        order = np.flatnonzero(inside)
        size = len(order)
        remap = np.full(self.capacity, -1, np.int32)
        remap[order] = np.arange(size, dtype=np.int32)
        padded = np.zeros(self.capacity, np.int32)
        padded[:size] = order
        allowed = self._programs.allowed(next_state)
        self._tree = self._programs.subtree(tree, padded, np.int32(size), remap, allowed)
        self._host = None
        self.state, self._allowed = next_state, np.asarray(allowed)
        if self._virtual:  # a node visited twice in one step (or below the threshold) holds more visits than nodes
            self._nodes, self._steps = size, 0
            self._tree_key = self._next_key()  # the moved tree's steps draw from a new key (numbered from 0 again)
            self.reused = self.visits
            return
        self.reused = size - 1
        assert self.visits == self.reused, (self.visits, self.reused)  # node_visits[child] is its subtree's size

    # -- what the tree says ------------------------------------------------------------------------------------------

    def _get(self, name: str) -> np.ndarray:
        """One array of the tree's summary (_Programs.summary: root rows [A], per-node arrays [capacity]) on the
        host; read once per tree."""
        if self._host is None:
            self._host = jax.tree.map(np.asarray, self._programs.summary(self._require()))
        return self._host[name]

    @property
    def value(self) -> float:
        """The root's search value (mean of its backed-up values) for the player to move, in [-1, 1]."""
        return float(self._get("root_value"))

    def _prior(self) -> np.ndarray:
        assert self._allowed is not None  # set with the state
        logits = np.where(self._allowed, self._get("root_prior_logits"), -np.inf)
        p = np.exp(logits - logits.max())
        return p / p.sum()

    def _pv(self, action: int) -> tuple[int, ...]:
        best, child, visits = self._get("best_action"), self._get("best_child"), self._get("best_visits")
        pv, node = [action], int(self._get("root_children")[action])
        while node >= 0 and visits[node] > 0:
            pv.append(int(best[node]))
            node = int(child[node])
        return tuple(pv)

    def moves(self) -> list[MoveInfo]:
        """The root's legal actions (less the mover's own eyes under Config.eye_rule), most visited first (ties:
        higher prior)."""
        assert self._allowed is not None  # set with the state
        legal = np.flatnonzero(self._allowed)
        visits, prior, q = self._get("root_visits"), self._prior(), self._get("root_q")
        root_value = self.value
        infos = [
            MoveInfo(
                action=int(a),
                visits=int(visits[a]),
                winrate=float((1.0 + (q[a] if visits[a] > 0 else root_value)) / 2.0),
                prior=float(prior[a]),
                pv=self._pv(int(a)) if visits[a] > 0 else (int(a),),
            )
            for a in legal
        ]
        return sorted(infos, key=lambda m: (-m.visits, -m.prior, m.action))

    def best_action(self) -> int:
        """The most visited legal action, ties broken by the higher prior (search.greedy_action's rule for PUCT)."""
        return self.moves()[0].action


def think(
    ts: TreeSearch,
    seconds: float = math.inf,
    max_visits: int | None = None,
    stop: Callable[[], bool] | None = None,
    on_chunk: Callable[[], None] | None = None,
) -> int:
    """Searches `ts` chunk by chunk until `seconds` have passed, the tree holds `max_visits` simulations, `stop()` is
    true (checked between chunks) or the tree is full; calls `on_chunk()` after each chunk. At least one chunk runs
    unless `max_visits` is already reached or the tree is full. Returns the simulations added."""
    if seconds == math.inf and max_visits is None and stop is None:
        raise ValueError("think: give seconds, max_visits or stop, or it would search until the tree is full")
    deadline = time.monotonic() + seconds
    added = 0
    while not ts.full:
        want = ts.chunk if max_visits is None else min(ts.chunk, max_visits - ts.visits)
        if want <= 0:
            break
        added += ts.search(want)
        if on_chunk is not None:
            on_chunk()
        if time.monotonic() >= deadline or (stop is not None and stop()):
            break
    return added
