"""Forced playouts and policy target pruning (KataGo, Wu 2019, §3.2; Config.forced_playouts_k): hand-checked pruning
arithmetic, and a search that gives every visited root child its forced visits and trains on the pruned target."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from az_jax.core import search

from conftest import uninformative_model

pytestmark = pytest.mark.usefixtures("fast_compiles")  # tiny programs: XLA's optimisation passes off (conftest.py)


def test_pruning_by_hand():
    # Three children: visits N = [10, 4, 2] (Σ = 16), priors P = [0.5, 0.3, 0.2], Q (in [0, 1]) = [0.6, 0.5, 0.2],
    # exploration C(s)·sqrt(N(s)) = 2, k = 2, so n_forced = sqrt(2 · P · 16) = [4.0, 3.10, 2.53].
    # c* = child 0 keeps 10; its score 0.6 + 2 · 0.5 / 11 = 0.6909.
    # Child 1: 4 − 3.10 = 0.90 would be allowed by n_forced, but its score must stay below 0.6909:
    #   0.5 + 0.6 / (1 + N') < 0.6909  <=>  N' > 0.6 / 0.1909 − 1 = 2.14, so N' = 3 (at 2 it would score 0.70).
    # Child 2: 0.2 + 0.4 / (1 + N') < 0.6909 for any N' >= 0, and 2 − 2.53 < 0: it goes to 0 (and ≤ 1 is dropped).
    # Target: [10, 3, 0] / 13.
    target = search.pruned_policy_target(
        q=jnp.array([0.6, 0.5, 0.2]),
        exploration=jnp.float32(2.0),
        prior=jnp.array([0.5, 0.3, 0.2]),
        visits=jnp.array([10, 4, 2]),
        k=2.0,
    )
    np.testing.assert_allclose(target, np.array([10, 3, 0]) / 13, rtol=1e-6)
    # A child whose Q beats c*'s whole score keeps every visit: Q = 0.7 > 0.6909.
    target = search.pruned_policy_target(
        jnp.array([0.6, 0.7, 0.2]), jnp.float32(2.0), jnp.array([0.5, 0.3, 0.2]), jnp.array([10, 4, 2]), 2.0
    )
    np.testing.assert_allclose(target, np.array([10, 4, 0]) / 14, rtol=1e-6)


def test_search_forces_playouts_and_trains_on_the_pruned_target():
    env, _ = envs.make_env("connect_four")
    apply_fn, variables = uninformative_model(env)  # uniform prior, value 0: only the search's own findings count
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 4))
    # k = 8: the forced visits, Σ_c sqrt(8 · P(c) · 64) <= sqrt(512) · sqrt(7) = 59.9 (Cauchy–Schwarz), fit in 64
    k, sims = 8.0, 64

    @functools.partial(jax.jit, static_argnums=1)
    def run(key, forced_k):
        settings = search.SearchConfig(
            num_simulations=sims, dirichlet_fraction=0.25, dirichlet_alpha=1.0, forced_playouts_k=forced_k
        )
        return search.run_search(apply_fn, env, variables, key, states, settings)

    out = run(jax.random.key(1), k)
    visits = np.asarray(search.visit_counts(out))  # [4, 7]
    assert (visits.sum(1) == sims).all()
    # Every visited child got its forced visits, up to the last one (n_forced grows with Σ N as the search goes on):
    # N(c) + 1 >= sqrt(k · P(c) · Σ N), P the noisy prior the root searched with.
    prior = np.asarray(jax.nn.softmax(out.search_tree.children_prior_logits[:, 0]))
    forced = np.sqrt(k * prior * sims)
    visited = visits >= 1
    assert (visits[visited] + 1 >= forced[visited]).all(), (visits, forced)
    # The policy target is the pruned visit distribution of each root.
    target = np.asarray(out.action_weights)
    np.testing.assert_allclose(target.sum(1), 1.0, rtol=1e-6)
    for b in range(4):
        root = jax.tree.map(lambda x, b=b: x[b], out.search_tree)
        expected = search.pruned_policy_target(*search._puct_terms(root, 1.25, 19652.0), k)
        np.testing.assert_allclose(target[b], expected, rtol=1e-6)
        best = visits[b].argmax()
        assert target[b, best] >= visits[b, best] / sims  # c* keeps every visit of a smaller total
    # Plain PUCT from the same noisy prior leaves some visited child short of n_forced; forcing does not.
    plain = np.asarray(search.visit_counts(run(jax.random.key(1), 0.0)))
    assert ((plain >= 1) & (plain + 1 < forced)).any(), (plain, forced)
