"""AlphaGo's policy network and its supervised learning (az_jax/alphago/networks.py, supervised.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az_jax.alphago import supervised
from az_jax.alphago.dataset import Positions
from az_jax.alphago.networks import PolicyNetwork, ValueNetwork
from az_jax.alphago.position import Position
from az_jax.core import devices


def _count(params) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))


def test_parameter_counts_by_hand():
    # Policy, 9×9, 4 planes in, k = 4, 3 layers: 5×5×4×4 + 4 = 404 (layer 1), 3×3×4×4 + 4 = 148 (layer 2),
    # 1×1×4×1 = 4 (layer 3, no bias) and one bias per point, 81: 404 + 148 + 4 + 81 = 637.
    # (shapes only: jax.eval_shape runs no initialiser)
    policy = jax.eval_shape(PolicyNetwork(layers=3, filters=4).init, jax.random.key(0), jnp.zeros((1, 9, 9, 4)))[
        "params"
    ]
    assert _count(policy) == 637
    # Value, 9×9, 5 planes, k = 4, 3 conv layers, 8 hidden: 5×5×5×4 + 4 = 504, 3×3×4×4 + 4 = 148, 1×1×4×1 + 1 = 5,
    # dense 81×8 + 8 = 656, out 8 + 1 = 9: 504 + 148 + 5 + 656 + 9 = 1322.
    value = jax.eval_shape(ValueNetwork(layers=3, filters=4, hidden=8).init, jax.random.key(0), jnp.zeros((1, 9, 9, 5)))
    value = value["params"]
    assert _count(value) == 1322


def test_output_shapes_and_ranges():
    planes = jax.random.normal(jax.random.key(1), (2, 9, 9, 5))
    logits = jax.jit(PolicyNetwork(layers=2, filters=3).init_with_output)(jax.random.key(0), planes)[0]
    assert logits.shape == (2, 81)  # no pass: the paper's network predicts points only
    v = jax.jit(ValueNetwork(layers=2, filters=3, hidden=4).init_with_output)(jax.random.key(0), planes)[0]
    assert v.shape == (2,) and bool(jnp.all(jnp.abs(v) <= 1))


def test_step_size_is_halved_at_the_papers_ratio():
    # 340 steps: halved every 340 · 80 / 340 = 80 steps, so 0.012 for steps 0..79, 0.006 from 80, 0.003 from 160.
    config = supervised.SLConfig(size=9, steps=340, learning_rate=0.012)
    assert config.halving_steps == 80
    schedule = supervised.optimizer_schedule(config)
    assert [float(schedule(s)) for s in (0, 79, 80, 159, 160)] == pytest.approx([0.012, 0.012, 0.006, 0.006, 0.003])


@pytest.mark.parametrize(
    "field, value", [("size", 13), ("planes", 47), ("layers", 1), ("learning_rate", float("nan")), ("steps", 0)]
)
def test_invalid_config_is_one_line(field, value):
    with pytest.raises(ValueError, match=f"invalid {field}="):
        supervised.SLConfig(**{"size": 9, field: value})


def _synthetic(count: int, seed: int) -> Positions:
    """9×9 positions whose 'expert move' is a symmetric rule the planes show: the last move's stone (turns since 1)
    has exactly one empty neighbour, and that point is the move. The rule is the same under every rotation and
    reflection, so augmentation keeps it learnable if and only if planes and move are transformed alike."""
    rng = np.random.default_rng(seed)
    n = 9
    board = rng.choice(np.array([-1, 0, 1], np.int8), size=(count, n, n), p=[0.25, 0.5, 0.25])
    turns = np.where(board != 0, 8, 0).astype(np.int8)
    action = np.zeros(count, np.int32)
    for i in range(count):
        r, c = rng.integers(1, n - 1, size=2)  # inside, so all 4 neighbours exist
        board[i, r, c], turns[i, r, c] = -1, 1  # the opponent's last move
        neighbours = [(r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)]
        free = neighbours[rng.integers(4)]
        for q in neighbours:
            board[i][q] = 0 if q == free else rng.choice([-1, 1])
            turns[i][q] = 0 if q == free else 8
        action[i] = free[0] * n + free[1]
    position = Position(
        board=board.reshape(count, n * n),
        turns_since=turns.reshape(count, n * n),
        ko=np.full(count, -1, np.int32),
        black_to_move=np.ones(count, bool),
    )
    return Positions(
        position=position,
        action=action,
        outcome=np.zeros(count, np.int8),
        game=np.arange(count, dtype=np.int32),
        move_number=np.zeros(count, np.int32),
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("sl"))
    config = supervised.SLConfig(
        size=9, filters=16, layers=3, planes=12, batch_size=32, learning_rate=0.1, steps=300, eval_every=150
    )
    last = supervised.train(config, _synthetic(2000, 0), _synthetic(300, 1), run_dir, log=lambda m: None)
    return config, run_dir, last


def test_learns_a_rule_through_the_symmetry_augmentation(trained):
    # Chance is about 1 / 40 (the empty points). Had the move not been transformed with the planes, 7 of 8 training
    # samples would label a point unrelated to the rotated board, and the rule could not be learnt this well.
    _, _, last = trained
    assert last["step"] == 300
    assert last["test_accuracy"] > 0.8, last


def test_checkpoint_restores_the_same_network(trained):
    config, run_dir, last = trained
    restored_config, params, step = supervised.restore_params(run_dir)
    assert restored_config == config and step == 300
    again = supervised.evaluate(config, devices.make_mesh(), params, _synthetic(300, 1))
    assert again["test_accuracy"] == pytest.approx(last["test_accuracy"])


def test_another_config_in_the_same_run_dir_is_refused(trained):
    config, run_dir, _ = trained
    other = supervised.SLConfig(**{**config.__dict__, "filters": 8})
    with pytest.raises(supervised.SLError, match="filters"):
        supervised.train(other, _synthetic(64, 0), _synthetic(64, 1), run_dir, log=lambda m: None)


def test_the_eight_symmetry_ensemble_by_hand():
    """A p_σ whose logits are its per-point bias alone (every other weight 0): 3 at A = (0,1), 2.5 at the centre B =
    (4,4), 0 elsewhere. On the empty board p(A) = e³/Z = 0.1805, p(B) = e^2.5/Z = 0.1095, each other point 1/Z =
    0.0090 (Z = 20.09 + 12.18 + 79 = 111.27). The raw network predicts A. Averaged over the 8 symmetries, A's mass is
    spread over A's 8 images, (0.1805 + 7 · 0.0090) / 8 = 0.0304 each, while the centre keeps 0.1095: the ensemble
    predicts B. Four positions, three labelled B and one A: raw accuracy 1/4, ensemble 3/4."""
    config = supervised.SLConfig(size=9, filters=4, layers=2, planes=4, steps=1)
    params = jax.eval_shape(lambda: supervised.init_state(config)).params
    params = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), params)
    bias = np.zeros(81, np.float32)
    bias[1], bias[40] = 3.0, 2.5
    params["PointBias_0"]["bias"] = jnp.asarray(bias)
    m = 4
    data = Positions(
        position=Position(
            board=np.zeros((m, 81), np.int8),
            turns_since=np.zeros((m, 81), np.int8),
            ko=np.full(m, -1, np.int32),
            black_to_move=np.ones(m, bool),
        ),
        action=np.array([40, 40, 40, 1], np.int32),
        outcome=np.zeros(m, np.int8),
        game=np.arange(m, dtype=np.int32),
        move_number=np.ones(m, np.int32),
    )
    report = supervised.evaluate(config, devices.make_mesh(), params, data, ensemble=True)
    assert (report["test_accuracy"], report["test_accuracy_8sym"]) == (0.25, 0.75)
    assert "test_accuracy_8sym" not in supervised.evaluate(config, devices.make_mesh(), params, data)
