"""An AlphaGo agent directory as a GTP engine (`az-jax gtp --run-dir AGENT_DIR`): GoEngine (az_jax/frontends) keeps
the tree of the paper's search between moves (search method "alphago" on the agent's p_σ^β priors and
(1 − λ)·v_θ + λ·z leaf values, az_jax/alphago/play_agent.py's tree_evaluator), resigns by the engine's rule, and the
command refuses what does not apply to an AlphaGo agent. The hand-written agent directory of
tests/test_alphago_play.py (random 2 × 4 networks, zero-weight rollout policy, rollouts capped at 20 moves)."""

import contextlib
import dataclasses
import io
import shutil

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from test_alphago_play import agent, agent_dir  # noqa: F401 (module fixtures)

from az_jax.alphago import play_agent, rollout_policy, tree_policy
from az_jax.apps import cli
from az_jax.core.search import MASKED
from az_jax.frontends.gtp_engine import GoEngine
from az_jax.frontends.tree_search import TreeSearch
from envs.notation import go

Tree = mctx.Tree

pytestmark = pytest.mark.usefixtures("fast_compiles")

SIMS = 16


def ok(engine, line: str) -> str:
    response = engine.handle(line)
    assert response.startswith("= ") and response.endswith("\n\n"), (line, response)
    return response[2:-2]


def test_genmove_keeps_the_papers_tree_between_moves_and_resigns(agent):  # noqa: F811
    engine = GoEngine(agent, simulations=SIMS, resign_threshold=-1.0, capacity=64, chunk=8, search="alphago")
    assert "AlphaGo agent agent" in ok(engine, "version")
    for line in ("boardsize 9", "clear_board", "komi 7.5"):
        ok(engine, line)
    move = ok(engine, "genmove b")
    action = go.vertex_to_action(move, 9)
    ts = engine._env()[3]
    assert ts.visits == SIMS and engine._actions() == (action,)
    # the move is the root's most visited, and the tree's priors are p_σ^β over the sensible points: the root of the
    # empty board gives pass no prior while a point is sensible (apv_mcts.evaluate)
    visits = np.asarray(ts._get("root_visits"))
    assert visits[action] == visits.max() and visits.sum() == SIMS and visits[81] == 0
    assert ts._prior()[81] == 0.0
    carried = int(visits[action]) - 1  # the subtree under the move played: its visits less its own expansion
    reply = ok(engine, "genmove w")
    assert go.is_vertex(reply, 9) and reply != move
    # the kept subtree was the head start (tree reuse), and the search only topped it up to SIMS visits
    assert ts.reused == carried >= 1 and ts.visits == SIMS
    # resignation: the engine's rule on the paper's values (threshold 1.0: always), nothing played
    engine.resign_threshold = 1.0
    assert ok(engine, "genmove b") == "resign" and len(engine._actions()) == 2


def test_the_engines_tree_is_the_agents_search(agent):  # noqa: F811
    """One fresh root, SIMS simulations in chunks of 8: the same root visits as the agent's own search
    (apv_mcts.search, mctx's loop) of the same position with the same networks; the tree is deterministic (no
    symmetries in the preset, rollouts of a zero-weight p_π are random, so λ = 0 here)."""
    search = dataclasses.replace(agent.config.search, lam=0.0)
    agent = dataclasses.replace(agent, config=dataclasses.replace(agent.config, search=search))
    engine = GoEngine(agent, simulations=SIMS, resign_threshold=-1.0, capacity=64, chunk=8, search="alphago")
    for line in ("boardsize 9", "clear_board", "play b E5"):
        ok(engine, line)
    ok(engine, "reg_genmove w")
    ts = engine._env()[3]
    _, out = agent.search(jax.tree.map(lambda x: x[None], ts.state), jax.random.key(0), SIMS)
    np.testing.assert_array_equal(ts._get("root_visits"), np.asarray(out.search_tree.children_visits[0, 0]))
    assert np.count_nonzero(ts._get("root_visits")) > 1  # a search with choices in it


def test_virtual_loss_in_the_kept_tree(agent):  # noqa: F811
    """leaves = 4: the engine's tree grows 4 leaves a step under virtual loss (core/virtual_loss.py), none left in
    flight; genmove reaches its visits in whole steps; the subtree of the move played is kept, its visits counted."""
    engine = GoEngine(agent, simulations=SIMS, resign_threshold=-1.0, capacity=64, chunk=8, search="alphago", leaves=4)
    for line in ("boardsize 9", "clear_board"):
        ok(engine, line)
    action = go.vertex_to_action(ok(engine, "genmove b"), 9)
    ts = engine._env()[3]
    visits = np.asarray(ts._get("root_visits"))
    assert ts.visits == SIMS == visits.sum() and visits[action] == visits.max()  # 16: 4 steps of 4
    assert ts._nodes <= SIMS + 1 and int(np.abs(np.asarray(ts._tree.extra_data)).sum()) == 0
    carried = int(visits[action]) - 1
    reply = ok(engine, "genmove w")
    assert go.is_vertex(reply, 9) and ts.reused == carried >= 1
    assert SIMS <= ts.visits < SIMS + 4  # topped up in whole steps of 4
    with pytest.raises(ValueError, match="leaves"):
        GoEngine(agent, search="puct", leaves=4)


def in_process(argv: list[str], stdin: str = "") -> tuple[int, str, list[str]]:
    """`az-jax ARGV` in this process with `stdin` as its input (bytes, as `serve` reads them): (exit status, stdout,
    stderr lines)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue().splitlines()


def test_cli_plays_an_alphago_directory_and_refuses_what_does_not_apply(agent_dir):  # noqa: F811
    code, out, err = in_process(
        ["gtp", "--run-dir", str(agent_dir), "--simulations", "8", "--capacity", "64", "--chunk", "8"],
        stdin="1 genmove b\n2 name\nquit\n",
    )
    assert code == 0 and err and "AlphaGo agent" in err[0], err
    responses = out.split("\n\n")
    assert responses[0].startswith("=1 ") and go.is_vertex(responses[0][3:], 9), out
    assert responses[1] == "=2 az_jax"
    for extra, needle in [
        (["--search", "puct"], "an AlphaGo agent searches by alphago"),
        (["--step", "3"], "--step: for AlphaZero runs only"),
        (["--weights", "latest"], "--weights: for AlphaZero runs only"),
    ]:
        code, out, err = in_process(["gtp", "--run-dir", str(agent_dir), *extra])
        assert (code, len(err), out) == (2, 1, "") and needle in err[0], err


def test_expansion_threshold_in_the_kept_tree(agent_dir, tmp_path):  # noqa: F811
    """n_thr = 2, 4 leaves a step, λ = 0 (no rollouts: the tree is deterministic) and p_τ with zero weights, so its
    placeholder priors are equal (0) over the sensible points while p_σ's are not. The engine's kept tree grown in one
    call is the agent's own search (apv_mcts.search, virtual_loss.search) visit for visit; a node with at most 2
    visits has no node under it and still p_τ's priors, one with more has p_σ's; playing a move whose node is below
    the threshold starts a fresh tree, one above keeps its subtree."""
    directory = tmp_path / "agent"
    shutil.copytree(agent_dir, directory)
    zero = tree_policy.TreePolicy(
        response_vocabulary=jnp.zeros(0, jnp.uint32),
        pattern_vocabulary=jnp.zeros(0, jnp.uint32),
        diamond_vocabulary=jnp.zeros(0, jnp.uint32),
        weights=jnp.zeros(rollout_policy.NUM_FIXED + tree_policy.NUM_EXTRA, jnp.float32),
    )
    tree_policy.save(directory / "tree.npz", zero)
    loaded = play_agent.load(str(directory), expansion_threshold=2)
    search = dataclasses.replace(loaded.config.search, lam=0.0, leaves=4)
    thr_agent = dataclasses.replace(loaded, config=dataclasses.replace(loaded.config, search=search))
    env = thr_agent.env
    state = env.step(env.init(jax.random.key(0)), jnp.int32(40))  # after Black's E5

    def grown() -> TreeSearch:
        ts = TreeSearch(thr_agent, capacity=64, chunk=SIMS, search="alphago", leaves=4)
        ts.reset(state)
        assert ts.search(SIMS) == SIMS  # 4 steps of 4 leaves, one call
        return ts

    ts = grown()
    _, out = thr_agent.search(jax.tree.map(lambda x: x[None], state), jax.random.key(0), SIMS)
    visits = np.asarray(ts._get("root_visits"))
    np.testing.assert_array_equal(visits, np.asarray(out.search_tree.children_visits[0, 0]))
    tree = jax.tree.map(lambda x: np.asarray(x[0]), ts._tree)
    used = ts._nodes
    for node in range(1, used):
        logits = tree.children_prior_logits[node]
        sensible = logits > MASKED / 2
        flat = np.ptp(logits[sensible]) == 0  # p_τ's zero weights: one value on every sensible point
        if tree.node_visits[node] <= 2:
            assert flat and (tree.children_index[node] == Tree.UNVISITED).all(), node
        else:
            assert not flat, node
    children = np.asarray(ts._get("root_children"))
    low = [a for a in range(82) if children[a] >= 0 and tree.node_visits[children[a]] <= 2]
    high = [a for a in range(82) if children[a] >= 0 and tree.node_visits[children[a]] > 2]
    assert low and high, visits  # a search with both kinds at the root
    ts.play(low[0])
    assert (ts.reused, ts.visits) == (0, 0)
    ts = grown()
    ts.play(high[0])
    assert ts.reused == ts.visits == tree.node_visits[children[high[0]]] - 1 >= 2
    code, out, err = in_process(["gtp", "--run-dir", str(agent_dir), "--expansion-threshold", "2"])
    assert (code, len(err)) == (2, 1) and "tree.npz" in err[0], err  # the fixture's directory has no p_τ
    code, out, err = in_process(
        ["gtp", "--run-dir", str(directory), "--simulations", "8", "--expansion-threshold", "2", "--capacity", "64"],
        stdin="1 genmove b\nquit\n",
    )
    assert code == 0 and out.startswith("=1 ") and go.is_vertex(out.split("\n\n")[0][3:], 9), (out, err)
