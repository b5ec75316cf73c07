"""`az-jax alphago` (az_jax/apps/cli/alphago.py) and the `sl:` player (az_jax/alphago/policy_player.py): bad input is
one line and exit 2, a trained SL policy plays through the player specs every command takes."""

import contextlib
import io

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

from az_jax.alphago import dataset, features, supervised
from az_jax.alphago.policy_player import sensible_moves
from az_jax.apps import cli
from az_jax.evaluation.players import PlayerSpecError, make_player


def in_process(argv: list[str]) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(argv)
    return code, err.getvalue().splitlines()


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    """A 9×9 data set of three hand-written games; c.sgf is held out (its hash, corpus.is_held_out)."""
    root = tmp_path_factory.mktemp("games")
    (root / "a.sgf").write_bytes(b"(;SZ[9]RE[B+5.5];B[ee];W[cc];B[gg];W[dd];B[ce];W[dc])")
    (root / "b.sgf").write_bytes(b"(;SZ[9]RE[W+2.5];B[dd];W[ff];B[fd];W[df];B[ec];W[ge])")
    (root / "c.sgf").write_bytes(b"(;SZ[9]RE[B+0.5];B[ee];W[cc];B[gg];W[dd];B[ae])")
    out = root / "go9.npz"
    dataset.build([root], 9, out)
    return str(out)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["alphago", "sl", "--data", "{tmp}/none.npz", "--run-dir", "{tmp}/r"], "none.npz"),
        (["alphago", "sl", "--data", "{data}", "--run-dir", "{tmp}/r", "--planes", "47"], "argument --planes"),
        (["alphago", "sl", "--data", "{data}", "--run-dir", "{tmp}/r", "--learning-rate", "nan"], "--learning-rate"),
        (["alphago", "sl", "--data", "{data}", "--run-dir", "{tmp}/r", "--steps", "0"], "argument --steps"),
        (["alphago", "data", "--size", "13"], "argument --size"),
        (["alphago", "data", "--size", "9", "--source", "{tmp}/nowhere"], "nowhere"),
        (["alphago", "games", "--games", "0"], "argument --games"),
        (["alphago", "mcts"], "invalid choice: 'mcts'"),
        (["alphago", "rl", "--sl", "{tmp}/none", "--run-dir", "{tmp}/r"], "none"),
        (["alphago", "rl", "--sl", "{tmp}/s@x", "--run-dir", "{tmp}/r"], "the step after @"),
        (["alphago", "rl", "--sl", "{tmp}/s", "--run-dir", "{tmp}/r", "--games", "7"], "invalid games=7"),
        (
            [
                "alphago",
                "value-data",
                "--sl",
                "{tmp}/none",
                "--rl",
                "{tmp}/none",
                "--out",
                "{tmp}/v.npz",
                "--games",
                "4",
            ],
            "none",
        ),
        (["alphago", "value", "--data", "{tmp}/none.npz", "--run-dir", "{tmp}/r"], "none.npz"),
        (["alphago", "value", "--data", "{data}", "--run-dir", "{tmp}/r"], "go9.npz"),
    ],
)
def test_user_errors_are_one_line(tmp_path, data_file, argv, needle):
    names = {"tmp": str(tmp_path), "data": data_file}
    code, err = in_process([a.format(**names) for a in argv])
    assert (code, len(err)) == (2, 1), err
    assert err[0].startswith("az-jax: error: ") and needle.format(**names) in err[0], err[0]


def test_a_corrupt_data_set_is_one_line_and_kept(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    code, err = in_process(["alphago", "sl", "--data", str(bad), "--run-dir", str(tmp_path / "r")])
    assert code == 2 and len(err) == 1 and "bad.npz" in err[0]
    assert bad.read_bytes() == b"not a zip file"


@pytest.fixture(scope="module")
def sl_run(tmp_path_factory, data_file):
    """A 3-step SL run through the CLI (the network is untrained; the tests below check the rules, not strength)."""
    run_dir = str(tmp_path_factory.mktemp("sl") / "run")
    argv = ["alphago", "sl", "--data", data_file, "--run-dir", run_dir, "--filters", "4", "--layers", "2"]
    code, err = in_process([*argv, "--steps", "3", "--eval-every", "3", "--batch-size", "4"])
    assert code == 0, err
    return run_dir


# One compiled program each, shared by the tests below (batches of 4 states): the features compile for seconds and run
# op by op for many more without jit.
SENSIBLE = jax.jit(sensible_moves)
STEP = jax.jit(jax.vmap(pgx.make("go_9x9").step))  # pgx's step op by op takes seconds a move


@pytest.fixture(scope="module")
def sl_player(sl_run):
    player = make_player(f"sl:{sl_run}", "go_9x9")
    return player, jax.jit(player.apply)


def test_sl_player_plays_the_most_probable_sensible_point(sl_run, sl_player):
    player, apply = sl_player
    assert player.step == 3
    env = pgx.make("go_9x9")
    keys = jax.random.split(jax.random.key(0), 4)
    states = jax.vmap(env.init)(keys)
    for a in (40, 41, 31, 30):  # a few moves so the boards are not empty
        states = STEP(states, jnp.full(4, a))
    actions = np.asarray(apply(player.variables, states, jax.random.key(1)))
    # recomputed by hand from the network: the argmax of its logits over legal points that fill no own eye
    config, params, _ = supervised.restore_params(sl_run)
    planes, sensible = SENSIBLE(states)
    logits = np.asarray(supervised.network(config).apply({"params": params}, planes[..., : config.planes]))
    eye_free = np.asarray(planes[..., features.PLANE_SLICES["sensibleness"]]).reshape(4, 81) > 0
    legal = np.asarray(states.legal_action_mask)[:, :81]
    assert np.array_equal(np.asarray(sensible), eye_free & legal)
    expected = np.argmax(np.where(eye_free & legal, logits, -np.inf), axis=-1)
    assert actions.tolist() == expected.tolist()


def test_policy_passes_when_no_sensible_point_is_left(sl_player):
    # Black fills the board except its two eyes at a1 and c1 (points 72 and 74): every other point black.
    # Built with pgx: Black plays every point but 72 and 74 while White passes (81); then Black is to move with only
    # its own eyes empty, both legal, neither sensible, so the policy passes (81).
    env = pgx.make("go_9x9")
    state = env.init(jax.random.key(0))
    step = jax.jit(env.step)
    for point in range(81):
        if point in (72, 74):
            continue
        state = step(state, jnp.int32(point))
        state = step(state, jnp.int32(81))  # White passes
    assert not bool(state.terminated) and int(state.current_player) == int(env.init(jax.random.key(0)).current_player)
    states = jax.tree.map(lambda x: jnp.stack([x] * 4), state)
    _, sensible = SENSIBLE(states)
    assert np.flatnonzero(np.asarray(states.legal_action_mask)[0]).tolist() == [72, 74, 81]
    assert not bool(sensible.any())
    player, apply = sl_player
    assert apply(player.variables, states, jax.random.key(0)).tolist() == [81] * 4


def test_sl_spec_errors(sl_run):
    with pytest.raises(PlayerSpecError, match="go_9x9 policy, not go_19x19"):
        make_player(f"sl:{sl_run}", "go_19x19")
    with pytest.raises(PlayerSpecError, match="temp"):
        make_player(f"sl:{sl_run}:temp=-1", "go_9x9")
    with pytest.raises(PlayerSpecError, match="not an SL policy run"):
        make_player("sl:/nonexistent", "go_9x9")


def test_alphago_spec_errors(sl_run, tmp_path):
    # an agent directory with p_σ only: λ = 1 needs the rollout policy, λ = 0 the value network, neither is there
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "sl").symlink_to(sl_run)
    with pytest.raises(PlayerSpecError, match="rollout.npz"):
        make_player(f"alphago:{agent}:lambda=1", "go_9x9")
    with pytest.raises(PlayerSpecError, match="value"):
        make_player(f"alphago:{agent}:lambda=0", "go_9x9")
    with pytest.raises(PlayerSpecError, match="lambda must be <= 1.0"):
        make_player(f"alphago:{agent}:lambda=2", "go_9x9")
    with pytest.raises(PlayerSpecError, match="unknown option"):
        make_player(f"alphago:{agent}:lam=0.5", "go_9x9")
    with pytest.raises(PlayerSpecError, match="does not exist"):
        make_player(f"alphago:{tmp_path}/none", "go_9x9")
    with pytest.raises(PlayerSpecError, match="leaves=3 must divide sims=8"):
        make_player(f"alphago:{agent}:sims=8,leaves=3", "go_9x9")
    with pytest.raises(PlayerSpecError, match="tree.npz"):  # an expansion threshold needs p_τ's placeholder priors
        make_player(f"alphago:{agent}:lambda=1,thr=40", "go_9x9")
