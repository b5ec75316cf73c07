"""Search methods (az_jax/core/search.py): every search runs through one function type, registered by name. The toy
method below is defined here and nowhere in the library, yet once registered it is a value of Config.search and of
`az-jax gtp --search`: the engine grows its kept tree with it, with no change to the engine's code."""

import io
import sys

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from az_jax.apps.cli import build_parser
from az_jax.apps.cli import gtp as gtp_cli
from az_jax.apps.cli.args import UsageError
from az_jax.core import search as search_lib
from az_jax.core.config import ConfigError
from az_jax.core.iteration import make_setup
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.frontends.tree_search import TreeSearch
from az_jax.runtime.agent import load_agent

from conftest import TINY_NETWORK, tiny_variables
from test_gtp_engine import save_tiny_go_run

TRACED: list[int] = []  # one entry each time the toy's selection is traced (a jitted program that uses it was built)


def prior_first(rng_key, tree, node_index, depth=0):
    """The toy rule: argmax_a P(a) / (1 + N(a)) over the moves the tree may play (values are ignored)."""
    del rng_key, depth
    TRACED.append(1)
    visits = tree.children_visits[node_index]
    logits = tree.children_prior_logits[node_index]
    score = jax.nn.softmax(logits) / (1.0 + visits)
    return jnp.argmax(jnp.where(logits > search_lib.MASKED / 2, score, -jnp.inf)).astype(jnp.int32)


def toy(params, rng_key, root, recurrent_fn, invalid, settings, loop_fn=jax.lax.fori_loop):
    tree = mctx.search(
        params=params,
        rng_key=rng_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=prior_first,
        interior_action_selection_fn=prior_first,
        num_simulations=settings.num_simulations,
        invalid_actions=invalid,
        loop_fn=loop_fn,
    )
    return mctx.PolicyOutput(
        action=search_lib.most_visited(tree), action_weights=tree.summary().visit_probs, search_tree=tree
    )


search_lib.register("toy_prior", search_lib.SearchMethod(toy))
N = 9


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A go_9x9 run whose one checkpoint (step 0) holds a tiny untrained network."""
    return save_tiny_go_run(tmp_path_factory.mktemp("search_methods") / "run")


def water_filling(prior: np.ndarray, legal: np.ndarray, simulations: int) -> np.ndarray:
    """The root visits the toy gives: every simulation passes the root once, at argmax P/(1 + N) (first on ties)."""
    visits = np.zeros_like(prior)
    for _ in range(simulations):
        visits[np.argmax(np.where(legal, prior / (1.0 + visits), -np.inf))] += 1
    return visits


def test_a_registered_method_grows_an_engines_kept_tree(run_dir):
    agent = load_agent(run_dir)
    state = agent.env.init(jax.random.key(0))
    TRACED.clear()
    trees = {}
    for chunks in ((12,), (5, 7)):  # one search of 12 simulations, or 5 then 7 on the kept tree: the same tree
        ts = TreeSearch(agent, capacity=64, search="toy_prior")
        ts.reset(state)
        for n in chunks:
            assert ts.search(n) == n
        trees[chunks] = {m.action: m.visits for m in ts.moves()}
        prior = np.zeros(N * N + 1)
        for m in ts.moves():
            prior[m.action] = m.prior
    assert TRACED, "the toy's selection was never used"
    assert trees[(12,)] == trees[(5, 7)]
    legal = np.asarray(state.legal_action_mask)
    expected = water_filling(prior, legal, 12)
    assert {a: int(v) for a, v in enumerate(expected) if v} == {a: v for a, v in trees[(12,)].items() if v}


def test_az_jax_gtp_plays_with_the_registered_method(run_dir, monkeypatch, capsys):
    TRACED.clear()
    args = build_parser().parse_args(
        ["gtp", "--run-dir", run_dir, "--simulations", "8", "--capacity", "64", "--search", "toy_prior"]
    )
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"boardsize 9\nclear_board\ngenmove b\nquit\n")))
    assert gtp_cli.run(args) == 0
    answers = [line for line in capsys.readouterr().out.splitlines() if line.startswith("=")]
    assert len(answers) == 4 and answers[2] != "=" and answers[2] != "= resign", answers
    assert TRACED


def test_unknown_or_unfit_methods_are_one_line_errors(run_dir):
    with pytest.raises(ConfigError, match="^search must be one of puct, gumbel, alphago, toy_prior, got 'nope'$"):
        override(preset("tic_tac_toe", "small"), ["search=nope"]).validate()
    assert override(preset("tic_tac_toe", "small"), ["search=toy_prior", "eval_search=alphago"]).validate()
    for name, message in (
        ("nope", "--search: unknown search method 'nope'; known: puct, gumbel, alphago, toy_prior"),
        ("gumbel", "--search: gumbel plans its budget ahead and cannot continue an engine's tree; use puct, alphago"),
    ):
        args = build_parser().parse_args(["gtp", "--run-dir", run_dir, "--search", name])
        with pytest.raises(UsageError) as e:
            gtp_cli.run(args)
        assert str(e.value).startswith(message), str(e.value)
    with pytest.raises(ValueError, match="registered already"):
        search_lib.register("puct", search_lib.SearchMethod(toy))


def test_puct_through_the_registry_is_mctx_muzero_policy():
    # the same search as calling mctx directly with the arguments run_search's docstring states
    config = override(preset("tic_tac_toe", "small"), [*TINY_NETWORK, "num_simulations=16"])
    setup = make_setup(config)
    env = setup.env
    variables = tiny_variables(setup.network, np.zeros((1, 3, 3, 2), np.float32))
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(1), 4))
    settings = search_lib.SearchConfig.for_selfplay(config)
    key = jax.random.key(2)
    out = search_lib.run_search(setup.apply_fn, env, variables, key, states, settings)
    logits, value = setup.apply_fn(variables, states.observation)
    root = mctx.RootFnOutput(
        prior_logits=search_lib.mask_logits(logits, states.legal_action_mask), value=value, embedding=states
    )
    direct = mctx.muzero_policy(
        variables,
        key,
        root,
        search_lib.make_recurrent_fn(env, setup.apply_fn),
        16,
        invalid_actions=~states.legal_action_mask,
        qtransform=lambda tree, node: mctx.qtransform_by_min_max(tree, node, min_value=-1.0, max_value=1.0),
        dirichlet_fraction=settings.dirichlet_fraction,
        dirichlet_alpha=settings.dirichlet_alpha,
        pb_c_init=settings.c_init,
        pb_c_base=settings.c_base,
    )
    np.testing.assert_array_equal(out.action, direct.action)
    np.testing.assert_array_equal(out.search_tree.children_visits, direct.search_tree.children_visits)
