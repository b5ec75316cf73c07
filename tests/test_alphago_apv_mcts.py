"""APV-MCTS (az_jax/alphago/apv_mcts.py; Silver et al., Nature 2016, Methods "Searching with policy and value
networks"): the λ mix of leaf values, the selection formula, the p_σ^β priors and their symmetries, the rollouts,
the move played, and config validation. Tiny networks whose outputs are set by hand (a policy network whose logits
are its per-point bias, a value network that outputs a constant), a rollout policy with zero weights (uniform over
sensible points), 9x9, 4 simulations, batches of 2. XLA's optimisation passes are off for the module: the programs
run for milliseconds and would compile for tens of seconds; every search test shares one of three programs (λ = 0,
0.5, 1)."""

import functools
import math

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from pgx._src.games import go as pgx_go

from az_jax.alphago import apv_mcts
from az_jax.alphago import features as features_lib
from az_jax.alphago import rollout_policy as rollout_lib
from az_jax.alphago.networks import PolicyNetwork, ValueNetwork
from az_jax.alphago.position import from_pgx
from az_jax.alphago.supervised import SLConfig
from envs import make_env

from conftest import fast_compiles_here

N = 9
P = N * N
PASS = P
ENV = make_env("go_9x9")[0]
KOMI = float(ENV._game.komi)
POLICY = PolicyNetwork(layers=2, filters=4)
VALUE = ValueNetwork(layers=2, filters=4, hidden=8)
BETA = 0.67
ZERO_ROLLOUT = rollout_lib.RolloutPolicy(
    response_vocabulary=jnp.zeros(0, jnp.uint32),
    pattern_vocabulary=jnp.zeros(0, jnp.uint32),
    weights=jnp.zeros(rollout_lib.NUM_FIXED, jnp.float32),
)


def config(lam: float, symmetries: bool = False, rollout_max_moves: int = 0) -> apv_mcts.APVConfig:
    return apv_mcts.APVConfig(
        simulations=4, c_puct=5.0, lam=lam, beta=BETA, symmetries=symmetries, rollout_max_moves=rollout_max_moves
    )


@pytest.fixture(scope="module", autouse=True)
def fast_compiles():
    with fast_compiles_here():
        yield


# --- networks and positions ------------------------------------------------------------------------------------------


def policy_params(bias: np.ndarray | None = None, seed: int = 0) -> dict:
    """Random p_σ weights; with `bias` every weight is 0 but the per-point bias, so the logits are `bias` [P]."""
    params = POLICY.init(jax.random.key(seed), jnp.zeros((1, N, N, 48)))["params"]
    if bias is None:
        return jax.tree.map(lambda x: x, params) | {
            "PointBias_0": {"bias": jax.random.normal(jax.random.key(seed), (P,))}
        }
    params = jax.tree.map(jnp.zeros_like, params)
    params["PointBias_0"]["bias"] = jnp.asarray(bias, jnp.float32)
    return params


def value_params(constant: float | None = None, seed: int = 1) -> dict:
    """Random v_θ weights; with `constant` v ≡ constant (every weight 0, the output bias atanh(constant))."""
    params = VALUE.init(jax.random.key(seed), jnp.zeros((1, N, N, 49)))["params"]
    if constant is None:
        return params
    params = jax.tree.map(jnp.zeros_like, params)
    params["Dense_1"]["bias"] = jnp.full((1,), math.atanh(constant), jnp.float32)
    return params


def nets(policy, value, rollout=ZERO_ROLLOUT) -> apv_mcts.Nets:
    return apv_mcts.Nets(
        policy_params=policy, value_params=value, rollout=rollout, policy=POLICY, policy_planes=48, value=VALUE
    )


def stack(*states):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def played(*actions: int):
    """The pgx state after `actions` from the empty board."""
    state = ENV.init(jax.random.key(0))
    for a in actions:
        state = ENV.step(state, jnp.int32(a))
    return state


def owned_board(white_to_move: bool):
    """A finished-looking board: Black on every point of an even row or column (one chain, holding point 0, so pgx
    id 1), the 16 points (odd, odd) single-point Black eyes. White has no legal point (each is suicide against a
    chain of 16 liberties) and Black no sensible one (each is an own eye), so both pass: Black wins by 65 + 16 = 81
    points to 0 + 7.5 komi."""
    r, c = np.divmod(np.arange(P), N)
    black = (r % 2 == 0) | (c % 2 == 0)
    state = ENV.init(jax.random.key(0))
    x = state._x._replace(
        board=jnp.asarray(np.where(black, 1, 0), jnp.int32),
        board_history=jnp.asarray(np.tile(black.astype(np.int32), (8, 1))),
        step_count=jnp.int32(1 if white_to_move else 0),
    )
    return state.replace(
        _x=x, current_player=state._player_order[x.color], legal_action_mask=ENV._game.legal_action_mask(x)
    )


EMPTY = played()
EYE = played(1, 80, 9, 79)  # Black at (0,1) and (1,0): point 0 is Black's own eye, legal but not sensible


# --- (1) the λ mix ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_leaf_values_mix_value_network_and_rollouts(lam):
    """v_θ ≡ c = 0.3 for whoever is to move; every rollout from `owned_board` is two passes, Black winning: z = +1
    when Black is to move (s = +1), −1 when White is (s = −1). The only move in the tree is pass.
      root raw value R = (1 − λ)c + λs                                  (Silver et al. 2016: V = (1 − λ)v + λz)
      sim 1: root → pass → child (the other side to move, z = −s): raw (1 − λ)c − λs
      sims 2–4: root → pass → child → pass: the game ends, reward −s to the child's mover (value 0, discount 0),
                so the child's edge gets −s each time and the root's +s
      Q(root, pass) = −mean(child raw, −s, −s, −s) = (3s + λs − (1 − λ)c) / 4
      root value = (R + (λs − (1 − λ)c) + 3s) / 5 = (2λs + 3s) / 5
    λ = 0 searches without rollouts (given none here); λ = 1 is the next test."""
    c = 0.3
    rollout = ZERO_ROLLOUT if lam > 0 else None
    states = stack(owned_board(white_to_move=False), owned_board(white_to_move=True))
    out = apv_mcts.search(
        config(lam), nets(policy_params(np.zeros(P)), value_params(c), rollout), states, jax.random.key(1)
    )
    tree = out.search_tree
    s = np.array([1.0, -1.0])
    np.testing.assert_allclose(tree.raw_values[:, 0], (1 - lam) * c + lam * s, atol=1e-5)
    np.testing.assert_allclose(tree.raw_values[:, 1], (1 - lam) * c - lam * s, atol=1e-5)
    np.testing.assert_allclose(
        tree.qvalues(jnp.zeros(2, jnp.int32))[:, PASS], (3 * s + lam * s - (1 - lam) * c) / 4, atol=1e-5
    )
    np.testing.assert_allclose(tree.summary().value, (2 * lam * s + 3 * s) / 5, atol=1e-5)
    assert tree.children_visits[:, 0, PASS].tolist() == [4, 4]
    assert out.action.tolist() == [PASS, PASS]  # no sensible point: the search passes


@pytest.fixture(scope="module")
def lambda_one_symmetric():
    """One jitted `evaluate` with λ = 1 (no value network given) and random symmetries, of 8 copies of EYE and the
    two `owned_board`s (Black, then White to move): (p_σ params, prior logits [10, P + 1], values [10]). Rollouts
    are capped at 2 moves (the owned boards' end by two passes within them)."""
    params = policy_params(seed=5)
    states = stack(*[EYE] * 8, owned_board(white_to_move=False), owned_board(white_to_move=True))
    evaluate = jax.jit(apv_mcts.evaluate, static_argnums=0)
    prior, value = evaluate(
        config(1.0, symmetries=True, rollout_max_moves=2), nets(params, None), states, jax.random.key(6)
    )
    return params, np.asarray(prior), np.asarray(value)


def test_lambda_one_values_are_rollout_results_without_a_value_network(lambda_one_symmetric):
    """λ = 1: the leaf value is z alone, and the search needs no value network (none is given): on `owned_board`
    z = +1 with Black to move, −1 with White to move (the raw values of the test above with λ = 1); from EYE each
    value is one (capped) rollout's result, ±1."""
    _, prior, value = lambda_one_symmetric
    assert value[8:].tolist() == [1.0, -1.0]
    assert set(np.abs(value[:8]).tolist()) == {1.0}
    assert (np.asarray(jax.nn.softmax(prior[8:]))[:, PASS] == 1.0).all()  # nothing sensible: pass alone


# --- (2) the selection formula ----------------------------------------------------------------------------------------

A1, A2 = 40, 30  # the centre, and a point next to it


def test_selection_is_the_papers_puct():
    """λ = 0, v ≡ 0.9 for the player to move (so a visited edge has Q = −0.9 at its parent); the empty board; prior
    P = 0.5 on A1, 0.1 on A2, 0.4 / 79 ≈ 0.005063 on each other point (the logits β·log P, so p_σ^β = P). Score
    Q + 5·P·sqrt(ΣN)/(1 + N):
      sim 1: ΣN = 0, every score 0: the highest prior, A1. Q(A1) = −0.9.
      sim 2: ΣN = 1: A1 −0.9 + 5·0.5·1/2 = 0.35; A2 5·0.1·1/1 = 0.5; others 5·0.005063 = 0.0253 -> A2. Q(A2) = −0.9.
             (mctx's muzero_action_selection takes sqrt(1 + ΣN) = sqrt(2): A1 −0.9 + 1.768 = 0.868 beats A2's 0.707.)
      sim 3: ΣN = 2: A1 −0.9 + 5·0.5·1.414/2 = 0.868; A2 −0.9 + 5·0.1·1.414/2 = −0.546; others 0.036 -> A1, then in
             A1's child (White; A1 taken, priors renormalised: A2 0.1/0.5 = 0.2, others 0.010127) ΣN = 0 -> A2.
             The grandchild's 0.9 is −0.9 for White: A1's child now has mean (0.9 − 0.9)/2 = 0, so Q(A1) = 0.
      sim 4: ΣN = 3: A1 0 + 5·0.5·1.732/3 = 1.443; A2 −0.9 + 5·0.1·1.732/2 = −0.467 -> A1. In A1's child, ΣN = 1:
             A2 −0.9 + 5·0.2·1/2 = −0.4; each other 5·0.010127 = 0.0506 -> the lowest such point, 0.
    Root visits A1 3, A2 1; A1's child: A2 1, point 0 1; A1's child's mean (0.9 − 0.9 − 0.9)/3 = −0.3, Q(A1) = 0.3."""
    prior = np.full(P, 0.4 / 79)
    prior[A1], prior[A2] = 0.5, 0.1
    search_nets = nets(policy_params(BETA * np.log(prior)), value_params(0.9), None)
    out = apv_mcts.search(config(0.0), search_nets, stack(EMPTY, EMPTY), jax.random.key(2))
    tree = out.search_tree
    root = np.asarray(tree.children_visits[:, 0])
    expected = np.zeros((2, P + 1), np.int32)
    expected[:, A1], expected[:, A2] = 3, 1
    np.testing.assert_array_equal(root, expected)
    child = np.asarray(tree.children_index[:, 0, A1])
    below = np.asarray(tree.children_visits)[np.arange(2), child]
    expected_below = np.zeros((2, P + 1), np.int32)
    expected_below[:, A2], expected_below[:, 0] = 1, 1
    np.testing.assert_array_equal(below, expected_below)
    np.testing.assert_allclose(tree.qvalues(jnp.zeros(2, jnp.int32))[:, A1], 0.3, atol=1e-5)
    np.testing.assert_allclose(jax.nn.softmax(tree.children_prior_logits[:, 0])[:, A1], 0.5, atol=1e-5)
    assert out.action.tolist() == [A1, A1]


def test_paper_selection_differs_from_mctx_default():
    """The same root after sim 1 (A1 visited once, Q = −0.9): the paper's u picks A2, mctx's PUCT with c = 5 and no
    log term (pb_c_base huge) picks A1 (sim 2's arithmetic above): the reason the search brings its own selection."""
    prior = np.full(P + 1, 0.4 / 79)
    prior[A1], prior[A2], prior[PASS] = 0.5, 0.1, 0.0
    logits = np.where(prior > 0, np.log(np.maximum(prior, 1e-30)), apv_mcts.MASKED).astype(np.float32)
    tree = mctx.Tree(
        node_visits=jnp.array([2, 1]),
        raw_values=jnp.zeros(2),
        node_values=jnp.zeros(2),
        parents=jnp.array([-1, 0]),
        action_from_parent=jnp.array([-1, A1]),
        children_index=jnp.full((2, P + 1), -1).at[0, A1].set(1),
        children_prior_logits=jnp.stack([jnp.asarray(logits), jnp.asarray(logits)]),
        children_values=jnp.zeros((2, P + 1)).at[0, A1].set(0.9),
        children_visits=jnp.zeros((2, P + 1), jnp.int32).at[0, A1].set(1),
        children_rewards=jnp.zeros((2, P + 1)),
        children_discounts=jnp.full((2, P + 1), -1.0),
        embeddings=jnp.zeros(2),
        root_invalid_actions=jnp.asarray(prior == 0),
        extra_data=None,
    )
    key = jax.random.key(0)
    assert int(jax.jit(functools.partial(apv_mcts.paper_action_selection, c_puct=5.0))(key, tree, 0)) == A2
    mctx_choice = jax.jit(mctx.muzero_action_selection, static_argnames=("pb_c_init", "pb_c_base", "qtransform"))(
        key,
        tree,
        0,
        0,
        pb_c_init=5.0,
        pb_c_base=1e30,
        qtransform=lambda t, i: jnp.where(t.children_visits[i] > 0, t.qvalues(i), 0.0),
    )
    assert int(mctx_choice) == A1


# --- (3) priors -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planes() -> dict[str, np.ndarray]:
    """The 48 planes of EYE and EMPTY [N, N, 48] (one jitted call)."""
    both = np.asarray(jax.jit(lambda s: features_lib.features(from_pgx(s), 48))(stack(EYE, EMPTY)))
    return {"eye": both[0], "empty": both[1]}


def expected_prior(params, state, planes: np.ndarray, logits: np.ndarray | None = None) -> np.ndarray:
    """softmax(logits / β) over the sensible points (pgx-legal, not an own eye), pass 0: [P + 1]."""
    sensible = planes[..., features_lib.PLANE_SLICES["sensibleness"]].reshape(P) > 0
    sensible &= np.asarray(state.legal_action_mask[:P])
    if logits is None:
        logits = np.asarray(POLICY.apply({"params": params}, jnp.asarray(planes[None])))[0]
    z = np.where(sensible, logits / BETA, -np.inf)
    p = np.exp(z - z.max())
    return np.append(p / p.sum(), 0.0)


def test_root_priors_are_p_sigma_at_temperature_beta(planes):
    params = policy_params(seed=3)
    out = apv_mcts.search(config(0.0), nets(params, value_params(), None), stack(EYE, EMPTY), jax.random.key(4))
    got = np.asarray(jax.nn.softmax(out.search_tree.children_prior_logits[:, 0]))
    assert bool(EYE.legal_action_mask[0]) and got[0, 0] == 0.0  # point 0 is legal but Black's own eye
    for row, (state, name) in enumerate(((EYE, "eye"), (EMPTY, "empty"))):
        np.testing.assert_allclose(got[row], expected_prior(params, state, planes[name]), atol=1e-6)
    assert out.search_tree.children_visits[:, 0].sum(-1).tolist() == [4, 4]


# NumPy operations on [H, W, C] planes and their inverses on [H, W] logits, independent of envs/symmetries.py
PLANE_OPS = {
    "identity": (lambda x: x, lambda y: y),
    "rot90": (lambda x: np.rot90(x, 1), lambda y: np.rot90(y, -1)),
    "rot180": (lambda x: np.rot90(x, 2), lambda y: np.rot90(y, 2)),
    "rot270": (lambda x: np.rot90(x, 3), lambda y: np.rot90(y, -3)),
    "flip_lr": (lambda x: x[:, ::-1], lambda y: y[:, ::-1]),
    "flip_ud": (lambda x: x[::-1], lambda y: y[::-1]),
    "transpose": (lambda x: np.swapaxes(x, 0, 1), lambda y: y.T),
    "antitranspose": (lambda x: np.swapaxes(x[::-1, ::-1], 0, 1), lambda y: y.T[::-1, ::-1]),
}


def test_priors_under_random_symmetries(planes, lambda_one_symmetric):
    """With symmetries, each evaluation's prior is p_σ^β of one of the 8 transformed boards, mapped back to the
    original points (the network sees g(s); its logits at g(a) belong to a): each of 8 evaluations of the same
    position equals exactly one of the 8 candidates, and more than one symmetry is drawn."""
    params, prior, _ = lambda_one_symmetric
    eye = planes["eye"]
    seen = np.stack([np.ascontiguousarray(forward(eye)) for forward, _ in PLANE_OPS.values()])  # [8, N, N, 48]
    logits = np.asarray(POLICY.apply({"params": params}, jnp.asarray(seen))).reshape(8, N, N)
    candidates = np.stack(
        [
            expected_prior(params, EYE, eye, np.ascontiguousarray(back(y)).reshape(P))
            for (_, back), y in zip(PLANE_OPS.values(), logits)
        ]
    )
    assert np.abs(candidates[:, None] - candidates[None]).max(-1)[np.triu_indices(8, 1)].min() > 1e-4
    got = np.asarray(jax.nn.softmax(prior[:8]))
    matches = np.abs(got[:, None] - candidates[None]).max(-1) < 1e-5  # [8 evaluations, 8 symmetries]
    assert (matches.sum(-1) == 1).all()
    assert len(set(np.argmax(matches, -1).tolist())) > 1


# --- (4) rollouts -----------------------------------------------------------------------------------------------------


def test_own_eyes():
    """The rollouts' eye test: in EYE point 0 (Black at (0,1), (1,0), Black to move) is Black's eye; in
    `owned_board` the 16 (odd, odd) points are Black's eyes and, with White to move, none is White's."""
    eyes = np.asarray(apv_mcts.own_eyes(from_pgx(stack(EYE, owned_board(False), owned_board(True))).board, N))
    r, c = np.divmod(np.arange(P), N)
    assert np.flatnonzero(eyes[0]).tolist() == [0]
    assert np.flatnonzero(eyes[1]).tolist() == np.flatnonzero((r % 2 == 1) & (c % 2 == 1)).tolist()
    assert not eyes[2].any()


def lean_area_winner(final, row: int) -> int:
    """+1 if Black wins row `row` of a rollout's final (lean) state as it stands (its board made Black's, pgx's
    Tromp–Taylor area with komi), else −1."""
    board = np.asarray(final.board[row]) * (1 if bool(final.black_to_move[row]) else -1)
    black, white = (int(v) for v in pgx_go._count_scores(pgx_go.GameState(board=jnp.asarray(board, jnp.int32)), N))
    return 1 if black - KOMI > white else -1


def test_rollouts_end_games_with_the_result_for_the_player_to_move():
    """Row 0: the empty board, Black to move, played out by uniform p_π over sensible points: the game ends (two
    passes, or pgx's 162-move cap) and z is the area result from Black's view. Row 1: `owned_board` with White to
    move: White passes (no legal point), Black passes (only own eyes): 2 moves, z = −1 for White."""
    rollout = jax.jit(apv_mcts.rollout)  # the cap traced: one program for both calls
    states = stack(EMPTY, owned_board(white_to_move=True))
    z, final = rollout(ZERO_ROLLOUT, states, jax.random.key(7), 0)
    assert final.over.tolist() == [True, True]
    moves = np.asarray(final.steps - states._x.step_count)
    assert moves[0] > 40 and moves[1] == 2
    assert z.tolist() == [float(lean_area_winner(final, 0)), -1.0]
    # capped after 1 move and scored as it stands: Black's first stone owns all 81 points (81 > 0 + 7.5): +1 for
    # Black; White's pass leaves the owned board to Black: −1 for White
    z, final = rollout(ZERO_ROLLOUT, states, jax.random.key(8), 1)
    assert np.asarray(final.steps - states._x.step_count).tolist() == [1, 1]
    assert final.over.tolist() == [False, False]
    assert z.tolist() == [1.0, -1.0]


# --- (5) the move played ----------------------------------------------------------------------------------------------


def test_move_is_the_most_visited_and_the_player_matches():
    """λ = 0.5 with random networks: the move is the most visited root action (ties: the highest prior), and
    make_apply's player (JaxPlayer.apply's contract) plays the same moves with the same key."""
    cfg = config(0.5)
    policy, value = policy_params(seed=9), value_params(seed=10)
    states = stack(EYE, EMPTY)
    key = jax.random.key(11)
    out = apv_mcts.search(cfg, nets(policy, value), states, key)
    visits = np.asarray(out.search_tree.children_visits[:, 0])
    prior = np.asarray(out.search_tree.children_prior_logits[:, 0])
    for row in range(2):
        top = np.flatnonzero(visits[row] == visits[row].max())
        assert int(out.action[row]) == top[np.argmax(prior[row, top])]
    assert visits.sum(-1).tolist() == [4, 4]
    np.testing.assert_array_equal(np.asarray(out.action_weights), visits / 4)
    sl = SLConfig(size=9, filters=4, layers=2, planes=48)
    shape = type("ValueShape", (), {"layers": 2, "filters": 4, "hidden": 8, "planes": 49})()
    apply = apv_mcts.make_apply(cfg, sl, shape)
    actions = apply({"policy": policy, "value": value, "rollout": ZERO_ROLLOUT}, states, key)
    assert actions.tolist() == out.action.tolist()


# --- (6) validation ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"simulations": 0}, "simulations"),
        ({"simulations": 4, "lam": 1.5}, "lam"),
        ({"simulations": 4, "lam": -0.1}, "lam"),
        ({"simulations": 4, "beta": 0.0}, "beta"),
        ({"simulations": 4, "c_puct": float("nan")}, "c_puct"),
        ({"simulations": 4, "rollout_max_moves": -1}, "rollout_max_moves"),
    ],
)
def test_config_validation(kwargs, field):
    with pytest.raises(ValueError, match=rf"^APVConfig: invalid {field}=") as info:
        apv_mcts.APVConfig(**kwargs)
    assert "\n" not in str(info.value)


def test_missing_networks_are_one_line_errors():
    states = stack(EMPTY, EMPTY)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match=r"lam=0.5 needs a rollout policy"):
        apv_mcts.search(config(0.5), nets(policy_params(seed=0), value_params(), None), states, key)
    with pytest.raises(ValueError, match=r"lam=0.5 needs a value network"):
        apv_mcts.search(config(0.5), nets(policy_params(seed=0), None), states, key)
    with pytest.raises(ValueError, match=r"lam=0.5 needs a value network config"):
        apv_mcts.make_apply(config(0.5), SLConfig(size=9, filters=4, layers=2), None)
