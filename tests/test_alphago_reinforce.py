"""The RL policy network p_ρ (az_jax/alphago/reinforce.py): the REINFORCE update by hand, outcomes and colours against a
replay in pgx, the opponent pool, resuming, the run directory's errors.

Every training here plays 8 full 9×9 games per iteration (4 on each of the 2 test devices) with a 2-layer, 4-filter
network on the first 4 planes, so the games compile once (the features' ladders make that the dominant cost) and each
test reuses that program."""

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pgx
import pytest
from pgx._src.games import go as pgx_go

from az_jax.alphago import checkpoints, reinforce, supervised
from az_jax.alphago import features as features_lib
from az_jax.alphago.position import from_pgx
from az_jax.core import devices

SL_CONFIG = supervised.SLConfig(size=9, filters=4, layers=2, planes=4)
NETWORK = supervised.network(SL_CONFIG)
GAMES = 8
RL_CONFIG = reinforce.RLConfig(
    games=GAMES,
    iterations=5,
    learning_rate=0.05,
    pool_every=2,
    seed=3,
    checkpoint_every=2,
    eval_every=5,
    eval_games=GAMES,
)


def _same(a, b) -> bool:
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: np.array_equal(np.asarray(x), np.asarray(y)), a, b)))


@pytest.fixture(scope="module")
def sl_run(tmp_path_factory) -> str:
    """A tiny p_σ run directory: the SL config and its initial network as checkpoint 0."""
    run_dir = str(tmp_path_factory.mktemp("sl"))
    supervised.RUN.write_config(run_dir, SL_CONFIG, "")
    manager = checkpoints.manager(run_dir)
    manager.save(0, args=ocp.args.StandardSave(supervised.init_state(SL_CONFIG)))
    manager.wait_until_finished()
    return run_dir


@pytest.fixture(scope="module")
def full_run(sl_run, tmp_path_factory) -> tuple[str, list[dict]]:
    """5 iterations without a stop, the pool growing every 2."""
    run_dir = str(tmp_path_factory.mktemp("rl_full"))
    lines: list[dict] = []
    reinforce.train(RL_CONFIG, sl_run, run_dir, log=lines.append)
    return run_dir, lines


@pytest.mark.parametrize(
    "field, value",
    [("games", 7), ("games", 0), ("learning_rate", 0.0), ("pool_every", 0), ("max_moves", -1), ("eval_games", 3)],
)
def test_invalid_config_is_one_line(field, value):
    with pytest.raises(ValueError, match=f"^RLConfig: invalid {field}={value!r}$"):
        reinforce.RLConfig(**{field: value})


def _by_hand_games(rows: int) -> reinforce.Games:
    """Two learner moves that count and one that does not, on 8 games of which two matter:
    game 0 (z = +1, the first device's) chose point 2 at row 0; game 4 (z = −1, the second device's) chose point 0 at
    row 0; game 0's row-1 move (point 1) is masked. Points 0, 1, 2 are the only sensible ones."""
    n, p = GAMES, 81
    sensible = np.zeros((rows, n, p), bool)
    sensible[:, :, :3] = True
    action = np.full((rows, n), p, np.int32)
    mask = np.zeros((rows, n), bool)
    action[0, 0], mask[0, 0] = 2, True
    action[0, 4], mask[0, 4] = 0, True
    action[1, 0] = 1  # mask False: e.g. the game had ended
    outcome = np.zeros(n, np.float32)
    outcome[0], outcome[4] = 1.0, -1.0
    return reinforce.Games(
        planes=np.zeros((rows, n, 9, 9, SL_CONFIG.planes), bool),
        sensible=sensible,
        action=action,
        mask=mask,
        moves=np.zeros((2 * rows, n), np.int32),
        outcome=outcome,
        learner_black=np.arange(n) % 4 < 2,
        length=np.full(n, 4, np.int32),
    )


def _bias_only_params():
    """Every convolution 0, so the logits are the last layer's per-point bias: log 1, log 2, log 5 at points 0, 1, 2,
    i.e. p = 1/8, 2/8, 5/8 over the sensible points {0, 1, 2}."""
    params = jax.tree.map(jnp.zeros_like, supervised.init_state(SL_CONFIG).params)
    bias = jnp.zeros(81).at[:3].set(jnp.log(jnp.array([1.0, 2.0, 5.0])))
    params["PointBias_0"]["bias"] = bias
    return params


def test_reinforce_update_by_hand():
    # ∂ log p(a)/∂logits = onehot(a) − p. Game 0, z = +1, a = 2: (−1/8, −2/8, 3/8); game 4, z = −1, a = 0:
    # −(7/8, −2/8, −5/8) = (−7/8, 2/8, 5/8); the masked move adds nothing. Σ z (onehot − p) = (−1, 0, 1).
    # Loss −(1/n) Σ z log p(a), n = 8 games: ∂/∂bias = (1/8, 0, −1/8), so SGD with α = 0.8 moves the bias by
    # (−0.1, 0, +0.1), and nothing else (p = 0 off the sensible points). Each device sees 4 games and divides by 4;
    # the mean over the 2 devices is the division by 8.
    # Loss: −(1/8) (log 5/8 − log 1/8) = −(log 5)/8 = −0.20118.
    params = _bias_only_params()
    state = reinforce.RLState(params=params, opt_state=optax.sgd(0.8).init(params), iteration=jnp.int32(0))
    state, metrics = reinforce.update(state, _by_hand_games(81), NETWORK, 0.8)
    bias = np.asarray(state.params["PointBias_0"]["bias"])
    expected = np.log([1.0, 2.0, 5.0]) + np.array([-0.1, 0.0, 0.1])
    np.testing.assert_allclose(bias[:3], expected, atol=1e-6)
    assert np.all(bias[3:] == 0.0)
    assert float(metrics["loss"]) == pytest.approx(-np.log(5) / 8, abs=1e-6)
    assert int(state.iteration) == 1


def test_baseline_enters_as_z_minus_b():
    # With b = 0.5 everywhere: game 0 weighs its move by 1 − 0.5 = 0.5: (−1/16, −2/16, 3/16); game 4 by −1 − 0.5 =
    # −1.5: −1.5 (7/8, −2/8, −5/8) = (−21/16, 6/16, 15/16). Sum (−22/16, 4/16, 18/16); gradient −(1/8) of it:
    # (22, −4, −18) / 128.
    games = jax.tree.map(jnp.asarray, _by_hand_games(2))
    grad_fn = jax.jit(lambda p, g, b: reinforce.reinforce_grads(NETWORK, p, g, b))
    _, grads = grad_fn(_bias_only_params(), games, jnp.full((2, GAMES), 0.5))
    np.testing.assert_allclose(np.asarray(grads["PointBias_0"]["bias"][:3]), np.array([22, -4, -18]) / 128, atol=1e-6)


def test_outcomes_colours_and_planes_agree_with_a_replay(full_run, sl_run):
    # The games of two different networks, replayed move by move in pgx's standard 9×9 Go (komi 7.5): each game's z
    # is +1 exactly when the learner's colour has the larger Tromp-Taylor area score less komi (or the opponent made
    # a superko repetition); the learner is Black in the first 2 games of each device's 4; its recorded moves are its
    # own plies' moves, and its recorded planes are the position before each of them, seen from its side.
    run_dir, _ = full_run
    _, sigma, _ = supervised.restore_params(sl_run)
    _, rho, _ = reinforce.restore_params(run_dir)
    games = jax.device_get(reinforce.play_games(NETWORK, 4, rho, sigma, jax.random.key(7), size=9, games=GAMES))
    assert list(games.learner_black) == [True, True, False, False] * 2
    env = pgx.make("go_9x9")
    state = jax.vmap(env.init)(jax.random.split(jax.random.key(0), GAMES))
    step = jax.jit(jax.vmap(env.step))
    planes_of = jax.jit(lambda s: features_lib.features(from_pgx(s), 4).astype(bool))
    length = games.length
    assert length.min() > 20 and length.max() <= 162
    for t in range(int(length.max())):
        k = t // 2
        learner_to_move = games.learner_black == (t % 2 == 0)
        running = t < length
        counted = learner_to_move & running & (games.moves[t] != 81)
        assert np.array_equal(games.mask[k][learner_to_move], counted[learner_to_move])
        assert np.array_equal(games.action[k][counted], games.moves[t][counted])
        assert np.array_equal(games.planes[k][counted], np.asarray(planes_of(state))[counted])
        state = step(state, jnp.asarray(games.moves[t]))
    assert bool(state.terminated.all())
    assert np.array_equal(np.asarray(state._x.step_count), length)
    scores = np.asarray(jax.vmap(lambda x: pgx_go._count_scores(x, 9))(state._x))  # [n, 2]: Black, White
    black_wins = scores[:, 0] - 7.5 > scores[:, 1]
    last_mover_black = (length - 1) % 2 == 0
    superko = np.asarray(state._x.is_psk)
    black_wins = np.where(superko, ~last_mover_black, black_wins)
    learner_wins = np.where(games.learner_black, black_wins, ~black_wins)
    assert np.array_equal(games.outcome, np.where(learner_wins, 1.0, -1.0))


def test_pool_grows_every_pool_every_iterations(full_run, sl_run):
    # pool_every = 2: σ, then ρ after iterations 2 and 4; 3 members after 5 iterations.
    run_dir, lines = full_run
    assert [line["iteration"] for line in lines] == [1, 2, 3, 4, 5]
    assert [line["pool_size"] for line in lines] == [1, 2, 2, 3, 3]
    before = [1, 1, 2, 2, 3]  # the pool each iteration drew its opponent from
    assert all(0 <= line["opponent"] < size for line, size in zip(lines, before))
    pool = reinforce.restore_pool(run_dir)
    assert jax.tree.leaves(pool)[0].shape[0] == 3
    _, sigma, _ = supervised.restore_params(sl_run)
    at = {step: reinforce.restore_params(run_dir, step)[1] for step in (2, 4, 5)}
    assert _same(reinforce.member(pool, 0), sigma)
    assert _same(reinforce.member(pool, 1), at[2]) and _same(reinforce.member(pool, 2), at[4])
    assert not _same(at[2], sigma) and not _same(at[5], at[4])  # the updates did change ρ
    assert 8 * lines[-1]["win_rate_vs_sl"] in range(9) and "win_rate_vs_sl" not in lines[-2]
    saved = json.load(open(os.path.join(run_dir, "config.json")))
    assert saved["sl_step"] == 0 and saved["network"]["filters"] == 4 and saved["rl"]["pool_every"] == 2


def test_resuming_continues_the_same_run(full_run, sl_run, tmp_path):
    # Stopped after 3 iterations (checkpoints 2 and 3), checkpoint 3 then damaged, then asked for 5: checkpoint 3 is
    # moved aside and the run goes on from 2, with the same games, updates and pool as the run that never stopped
    # (each iteration's key and opponent come from the seed and the iteration number).
    run_dir, lines = full_run
    resumed = str(tmp_path / "rl")
    first: list[dict] = []
    reinforce.train(dataclasses.replace(RL_CONFIG, iterations=3), sl_run, resumed, log=first.append)
    for root, _, names in os.walk(os.path.join(resumed, "checkpoints", "3")):
        for name in names:
            open(os.path.join(root, name), "wb").close()  # every file of checkpoint 3 emptied
    second: list[dict] = []
    reinforce.train(RL_CONFIG, sl_run, resumed, log=second.append)
    assert second[0] == {"damaged_checkpoint": 3, "moved_to": os.path.join(resumed, "checkpoints_damaged", "3")}
    second = second[1:]
    assert [line["iteration"] for line in first + second] == [1, 2, 3, 3, 4, 5]
    keys = ("opponent", "pool_size", "win_rate", "mean_length", "learner_moves", "loss")
    assert [[line[k] for k in keys] for line in first[:2] + second] == [[line[k] for k in keys] for line in lines]
    assert [[line[k] for k in keys] for line in first[2:]] == [[line[k] for k in keys] for line in second[:1]]
    with open(os.path.join(resumed, "metrics.jsonl")) as f:
        assert [json.loads(line)["iteration"] for line in f] == [1, 2, 3, 4, 5]  # line 3 dropped, then written again
    assert _same(reinforce.restore_params(resumed)[1], reinforce.restore_params(run_dir)[1])
    assert _same(reinforce.restore_pool(resumed), reinforce.restore_pool(run_dir))


def test_another_config_in_the_same_run_dir_is_refused(full_run, sl_run):
    run_dir, _ = full_run
    with pytest.raises(reinforce.RLError, match="pool_every") as e:
        reinforce.train(dataclasses.replace(RL_CONFIG, pool_every=3), sl_run, run_dir, log=lambda m: None)
    assert "\n" not in str(e.value)


def test_restore_errors_and_policy_loading(full_run, sl_run, tmp_path):
    run_dir, _ = full_run
    with pytest.raises(reinforce.RLError, match="is not an RL policy run"):
        reinforce.restore_params(sl_run)
    with pytest.raises(supervised.SLError, match="is not an RL policy run"):  # an RLError is an SLError
        reinforce.restore_params(str(tmp_path))
    assert reinforce.is_run(run_dir) and not reinforce.is_run(sl_run)
    config, params, step = reinforce.restore_policy(run_dir)
    assert config == SL_CONFIG and step == 5 and _same(params, reinforce.restore_params(run_dir)[1])
    config, params, step = reinforce.restore_policy(sl_run)
    assert config == SL_CONFIG and step == 0
    assert devices.make_mesh().size == 2  # the tests' 2 CPU devices split every batch of games


def test_a_run_written_on_the_mesh_restores_onto_one_device(full_run):
    """The run was trained (and checkpointed) replicated on the tests' 2-device mesh; a restore must not ask for that
    topology (a 1-device process could not give it: orbax's "topology mismatch"), so it lands on this process's first
    device and the caller places it on its own mesh."""
    run_dir, _ = full_run
    _, params, _ = reinforce.restore_params(run_dir)
    for leaf in jax.tree.leaves((params, reinforce.restore_pool(run_dir))):
        assert leaf.sharding.device_set == {jax.devices()[0]}


def test_a_diverging_run_stops_before_it_logs_or_saves(sl_run, tmp_path):
    # α = 1e38 sends the weights past float32's range in the first update (|Δ| = α·|grad|, 1e38 · O(0.1)+ overflows
    # or nearly so), so the second iteration's loss is not finite: the run stops there with one line
    run_dir = str(tmp_path / "rl")
    config = dataclasses.replace(RL_CONFIG, learning_rate=1e38, checkpoint_every=1)
    lines: list[dict] = []
    with pytest.raises(reinforce.RLError) as e:
        reinforce.train(config, sl_run, run_dir, log=lines.append)
    message = str(e.value)
    assert "\n" not in message and message.startswith("training diverged: the loss is nan at iteration 2; ")
    assert "the newest checkpoint (iteration 1) is intact: lower the learning rate" in message
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        logged = [json.loads(line) for line in f]
    assert logged == lines and all(np.isfinite(line["loss"]) for line in logged)  # nothing non-finite written
    saved = ocp.CheckpointManager(os.path.join(run_dir, "checkpoints")).all_steps()
    assert list(saved) == [line["iteration"] for line in logged]  # a checkpoint for each logged iteration only
