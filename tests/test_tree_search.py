"""az_jax/frontends/tree_search.py: a search continued in chunks is the search run at once, and a reused subtree
continued to N simulations is the search from that position with N simulations."""

import jax
import numpy as np
import pytest

from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.core.iteration import init_variables, make_setup
from az_jax.frontends.tree_search import TreeSearch, think
from az_jax.runtime.agent import Agent

from conftest import TINY_NETWORK


@pytest.fixture(scope="module")
def agent():
    """A tiny connect_four network whose weights are perturbed away from init's near-uniform priors (an untrained
    network gives all 7 columns the same prior to 3 decimals, and ties would be broken by mctx's noise alone)."""
    config = overrides_lib.override(presets_lib.preset("connect_four", "small"), TINY_NETWORK)
    variables = init_variables(make_setup(config), jax.random.key(3))
    leaves, treedef = jax.tree.flatten(variables["params"])
    keys = jax.random.split(jax.random.key(5), len(leaves))
    noisy = [x + 0.05 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)]
    return Agent(config=config, variables={**variables, "params": jax.tree.unflatten(treedef, noisy)})


def searched(agent, state, n: int, chunk: int, capacity: int = 128) -> TreeSearch:
    ts = TreeSearch(agent, capacity=capacity, chunk=chunk)
    ts.reset(state)
    assert ts.search(n) == n
    return ts


def root_visits(ts: TreeSearch) -> np.ndarray:
    return np.array([next(m.visits for m in ts.moves() if m.action == a) for a in range(7)])


def test_chunks_and_reuse_give_the_visits_of_one_search(agent):
    s0 = agent.env.init(jax.random.key(0))
    whole = searched(agent, s0, 48, chunk=48)
    # 48 = 5 + 5 + ... + 3: ten chunks, the last one short
    chunked = searched(agent, s0, 48, chunk=5)
    assert whole.visits == chunked.visits == 48
    np.testing.assert_array_equal(root_visits(whole), root_visits(chunked))
    assert root_visits(whole).sum() == 48  # every simulation passes through one root action
    np.testing.assert_allclose(whole.value, chunked.value, rtol=1e-6)

    # The game moves on by the most visited column: its subtree (V visits, V nodes) becomes the tree.
    action = whole.best_action()
    carried = int(root_visits(whole)[action])
    assert carried == max(root_visits(whole))
    whole.play(action)
    assert whole.reused == whole.visits == carried - 1  # its own evaluation is the new root's, not a simulation
    whole.search(48 - whole.reused)
    fresh = searched(agent, agent.env.step(s0, action), 48, chunk=16)
    np.testing.assert_array_equal(root_visits(whole), root_visits(fresh))
    np.testing.assert_allclose(whole.value, fresh.value, rtol=1e-5)

    # An action no simulation took: a fresh root.
    unvisited = searched(agent, s0, 3, chunk=3)
    never = next(m.action for m in unvisited.moves() if m.visits == 0)
    unvisited.play(never)
    assert unvisited.reused == unvisited.visits == 0


def test_moves_report_the_tree(agent):
    ts = searched(agent, agent.env.init(jax.random.key(0)), 40, chunk=8)
    moves = ts.moves()
    assert [m.visits for m in moves] == sorted((m.visits for m in moves), reverse=True)
    assert abs(sum(m.prior for m in moves) - 1.0) < 1e-5
    best = moves[0]
    assert best.action == ts.best_action() and best.pv[0] == best.action and len(best.pv) >= 2
    # The root's value is the mean of its own evaluation and the 40 simulations' values, each of which is
    # −(the child's value) seen from the root: value = (v_root + Σ_a N(a)·Q(a)) / 41, Q = 2·winrate − 1.
    v_root = float(np.asarray(agent.policy_value(jax.tree.map(lambda x: x[None], ts.state))[1])[0])
    backed = sum(m.visits * (2 * m.winrate - 1) for m in moves if m.visits)
    assert ts.value == pytest.approx((v_root + backed) / 41, abs=1e-5)


def test_capacity_limits_and_think(agent):
    ts = TreeSearch(agent, capacity=20, chunk=8)
    ts.reset(agent.env.init(jax.random.key(0)))
    # 20 nodes: the root and 19 simulations, added 8 + 8 + 3
    assert ts.search(100) == 19 and ts.full and ts.search(5) == 0
    ts.reset(ts.state)
    assert think(ts, max_visits=12) == 12 and ts.visits == 12  # 8 + 4: the last chunk stops at the limit
    stops = iter([False, True])
    assert think(ts, stop=lambda: next(stops)) == 7  # one chunk of 7 fills the tree (19 − 12); stop is not reached
    with pytest.raises(ValueError, match="not legal"):
        ts.play(10)
    with pytest.raises(ValueError, match="give seconds"):
        think(ts)
