"""An AlphaGo agent directory played like an AlphaZero run (az_jax/alphago/play_agent.py): GameSession and analyse
(az_jax/apps/session.py) on it, and `az-jax play --run-dir DIR` (az_jax/apps/cli/play.py).

The agent directory is written by hand, without training (module fixture): p_σ and v_θ with random weights (2 layers
of 4 filters), each saved as its stage saves a checkpoint, a rollout policy with zero weights (uniform over the
sensible points), and a preset.json whose search (8 simulations, λ = 0.5, rollouts capped at 20 moves, no random
symmetry) is the agent's. XLA's optimisation passes are off (conftest.py): the programs run for milliseconds."""

import contextlib
import dataclasses
import io
import json

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import orbax.checkpoint as ocp
import pytest

from az_jax.alphago import agent as agent_lib
from az_jax.alphago import checkpoints, play_agent, rollout_policy, supervised, value_training
from az_jax.apps import cli
from az_jax.apps.session import GameSession, analyse
from envs import notation

pytestmark = pytest.mark.usefixtures("fast_compiles")

SIMS = 8
SEARCH = {"simulations": SIMS, "c_puct": 5.0, "lam": 0.5, "beta": 0.67, "rollout_max_moves": 20, "symmetries": False}
POLICY = supervised.SLConfig(size=9, filters=4, layers=2, planes=48, steps=1)
VALUE = value_training.ValueConfig(size=9, filters=4, layers=2, hidden=8, steps=1)


def save_run(run_dir, config, init_state, seed: int) -> None:
    """A stage's run directory (config.json and one orbax checkpoint, as supervised.train / value_training.train
    write them) holding a state drawn on the host: weights ~ N(0, 1/fan_in), everything else 0 (no initialiser to
    compile)."""
    rng = np.random.default_rng(seed)

    def draw(leaf):
        if jnp.issubdtype(leaf.dtype, jnp.floating) and len(leaf.shape) >= 1:
            fan_in = int(np.prod(leaf.shape[:-1])) if len(leaf.shape) > 1 else 1
            return jnp.asarray(rng.normal(0.0, fan_in**-0.5, leaf.shape), leaf.dtype)
        return jnp.zeros(leaf.shape, leaf.dtype)

    state = jax.tree.map(draw, jax.eval_shape(lambda: init_state(config)))
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({**dataclasses.asdict(config), "data": ""}))
    manager = checkpoints.manager(str(run_dir))
    manager.save(1, args=ocp.args.StandardSave(state))
    manager.wait_until_finished()


def write_preset(directory, **search) -> None:
    (directory / "preset.json").write_text(json.dumps({"name": "tiny", "size": 9, "search": {**SEARCH, **search}}))


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("alphago") / "agent"
    save_run(d / "sl", POLICY, supervised.init_state, seed=0)
    save_run(d / "value", VALUE, value_training.init_state, seed=1)
    zero = rollout_policy.RolloutPolicy(
        response_vocabulary=jnp.zeros(0, jnp.uint32),
        pattern_vocabulary=jnp.zeros(0, jnp.uint32),
        weights=jnp.zeros(rollout_policy.NUM_FIXED, jnp.float32),
    )
    rollout_policy.save(d / "rollout.npz", zero)
    write_preset(d)
    return d


@pytest.fixture(scope="module")
def agent(agent_dir):
    return play_agent.load(str(agent_dir))


def in_process(argv: list[str], stdin: str = "") -> tuple[int, str, list[str]]:
    """`az-jax ARGV` in this process with `stdin` typed in: (exit status, stdout, stderr lines)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr("sys.stdin", io.StringIO(stdin))
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue().splitlines()


def test_agent_directory_detection(agent_dir, tmp_path):
    assert agent_lib.is_agent_directory(str(agent_dir))
    assert not agent_lib.is_agent_directory(str(agent_dir / "sl"))  # a stage's run: config.json and checkpoints/
    assert not agent_lib.is_agent_directory(str(tmp_path))  # empty
    assert not agent_lib.is_agent_directory(str(tmp_path / "none"))
    (tmp_path / "preset.json").write_text("{}")
    assert agent_lib.is_agent_directory(str(tmp_path))  # a pipeline that has not got far: load says what is missing
    (tmp_path / "checkpoints").mkdir()
    assert not agent_lib.is_agent_directory(str(tmp_path))  # an AlphaZero run's


def test_the_agent_takes_the_presets_search(agent):
    assert agent.config.game == "go_9x9"
    assert agent.config.search == play_agent.apv_mcts.APVConfig(**SEARCH)
    assert agent.default_simulations == SIMS
    assert agent.networks.value_config == VALUE and agent.networks.steps == {"sl": 1, "value": 1}


def test_session_replies_with_legal_moves_and_analysis_reads_the_root(agent):
    session = GameSession(agent, human_first=True, seed=0)
    black = notation.side_to_move("go_9x9", session.state)
    human = []
    for wanted in ("E5", "C3", "G7", "C7", "G3"):  # the human's line, skipping a point the agent took
        if session.over or len(session.moves) >= 4:
            break
        if wanted.lower() not in [m.lower() for m in session.legal_moves()]:
            continue
        human.append(session.move(wanted))
        legal = session.legal_moves()
        reply = session.agent_move()
        # legal where it was played, and not a pass: the empty-ish board has sensible points, and the search passes
        # only when none is left (apv_mcts.py)
        assert reply.best in legal and reply.best != "pass", (reply.best, legal)
        assert session.moves[-1] == reply.best and session.side == black
        assert int(reply.visits.sum()) == SIMS
    assert session.moves[::2] == human and len(human) == 2

    # The root as analyse reads it, against the search's own tree (same key: the same search).
    host = jax.device_get(session.state)
    batch = jax.tree.map(lambda x: np.asarray(x)[None], host)
    key = jax.random.key(5)
    analysis = analyse(agent, session.state, key)
    _, out = agent.search(batch, key, SIMS)
    tree, root = out.search_tree, mctx.Tree.ROOT_INDEX
    # mctx expands the root before the first simulation (its node_visits counts that evaluation: 1), and each of the
    # 8 simulations then descends through exactly one root edge, so the root's children visits add to 8, not 7
    assert int(tree.node_visits[0, root]) == SIMS + 1
    assert int(analysis.visits.sum()) == SIMS and analysis.simulations == SIMS
    assert analysis.moves[-1] == "pass" and analysis.visits[-1] == 0  # pass is masked while a point is sensible
    # the move played: the most visited, a tie going to the highest prior (az_jax/core/search.py: most_visited)
    tied = np.flatnonzero(analysis.visits == analysis.visits.max())
    assert analysis.best == analysis.moves[tied[np.argmax(analysis.prior[tied])]]
    # the prior: p_σ^β over the sensible points, which is the search's root prior (no symmetry), pass 0
    probs, values = jax.device_get(agent.policy_value(batch))
    root_prior = np.asarray(jax.nn.softmax(tree.children_prior_logits[0, root]))
    np.testing.assert_allclose(probs[0], root_prior, atol=1e-6)
    assert abs(float(analysis.prior.sum()) - 1.0) < 1e-5 and analysis.prior[-1] == 0.0
    assert float(np.asarray(probs[0]).sum() - analysis.prior.sum()) < 1e-6  # nothing on illegal points
    assert -1.0 <= analysis.network_value <= 1.0 and analysis.network_value == float(values[0])
    assert -1.0 <= analysis.search_value <= 1.0


def test_policy_value_passes_and_has_no_value_without_a_value_network(agent, agent_dir, tmp_path):
    # Black fills the board but its two eyes a1 and c1 (points 72 and 74) while White passes (81), as in
    # tests/test_alphago_cli.py: Black to move has only its own eyes, legal but not sensible, so p_σ^β puts all of
    # its probability on pass
    env, step = agent.env, jax.jit(agent.env.step)
    state = env.init(jax.random.key(0))
    for point in range(81):
        if point not in (72, 74):
            state = step(step(state, jnp.int32(point)), jnp.int32(81))
    batch = jax.tree.map(lambda x: x[None], state)  # a batch of one, as analyse's (one compiled program)
    probs, values = jax.device_get(agent.policy_value(batch))
    assert np.flatnonzero(probs[0]).tolist() == [81] and probs[0, 81] == 1.0 and np.isfinite(values[0])

    # λ = 1 (rollouts only): no value network is loaded, so there is no network value: NaN; the prior is the same p_σ^β
    rollouts_only = tmp_path / "agent"
    rollouts_only.mkdir()
    for name in ("sl", "rollout.npz"):
        (rollouts_only / name).symlink_to(agent_dir / name)
    write_preset(rollouts_only, lam=1.0)
    lam1 = play_agent.load(str(rollouts_only))
    assert lam1.networks.value_config is None and lam1.networks.variables["value"] is None
    probs1, values1 = jax.device_get(lam1.policy_value(batch))
    np.testing.assert_allclose(probs1, probs, atol=1e-6)
    assert np.isnan(values1).all()


def test_cli_plays_an_alphago_directory(agent_dir):
    code, out, err = in_process(
        ["play", "--run-dir", str(agent_dir), "--simulations", str(SIMS), "--seed", "0"], stdin="E5\nquit\n"
    )
    assert (code, err) == (0, []), err
    assert "go_9x9: you play X (Black) and move first" in out
    plays = [line for line in out.splitlines() if "Agent (O (White)) plays " in line]
    assert len(plays) == 1, out
    move = plays[0].split(" plays ")[1].split()[0]
    assert move not in ("E5", "pass") and notation.go.is_vertex(move, 9), plays[0]
    assert "visits: " in plays[0] and out.rstrip().endswith("Session ended.")


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--step", "3"], "--step: for AlphaZero runs only"),
        (["--weights", "latest"], "--weights: for AlphaZero runs only"),
        (["--weights", "best", "--step", "0"], "--step and --weights: for AlphaZero runs only"),
    ],
)
def test_cli_refuses_checkpoint_choices_for_an_alphago_directory(agent_dir, extra, needle):
    code, out, err = in_process(["play", "--run-dir", str(agent_dir), *extra])
    assert (code, len(err)) == (2, 1) and err[0].startswith("az-jax: error: ") and needle in err[0], err
    assert "AlphaGo agent directory" in err[0] and out == ""


def test_cli_missing_parts_are_one_line(agent_dir, tmp_path):
    write_preset(tmp_path)  # a pipeline that wrote its preset and nothing else yet
    code, _, err = in_process(["play", "--run-dir", str(tmp_path)])
    assert (code, len(err)) == (2, 1) and "config.json" in err[0] and str(tmp_path) in err[0], err
    (tmp_path / "sl").symlink_to(agent_dir / "sl")  # p_σ but no v_θ (λ = 0.5 needs it)
    code, _, err = in_process(["play", "--run-dir", str(tmp_path)])
    assert (code, len(err)) == (2, 1) and "value" in err[0], err
