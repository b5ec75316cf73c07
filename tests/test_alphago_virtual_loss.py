"""APV-MCTS with several leaves per tree per step under virtual loss (az_jax/core/virtual_loss.py; Silver et al.,
Nature 2016, Methods, "virtual loss", n_vl = 3): the leaves one step selects, derived by hand; one leaf per step is the
synchronous search visit for visit; every virtual loss is taken off again; one game's leaves reach the network as one
batch. The tiny hand-set networks of tests/test_alphago_apv_mcts.py, 9x9."""

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from test_alphago_apv_mcts import BETA, EMPTY, EYE, P, nets, policy_params, stack, value_params

from az_jax.alphago import apv_mcts, tree_policy
from az_jax.core import virtual_loss

from conftest import fast_compiles_here

A1, A2 = 40, 30  # the centre, and a point next to it (as tests/test_alphago_apv_mcts.py)


@pytest.fixture(scope="module", autouse=True)
def fast_compiles():
    with fast_compiles_here():
        yield


def apv(lam: float = 0.0, simulations: int = 4, leaves: int = 4, n_vl: float = 3.0, symmetries: bool = False):
    return apv_mcts.APVConfig(
        simulations=simulations, c_puct=5.0, lam=lam, beta=BETA, symmetries=symmetries, leaves=leaves, virtual_loss=n_vl
    )


def hand_nets():
    """The empty board's prior P = 0.5 on A1, 0.1 on A2, 0.4 / 79 ≈ 0.005063 on each other point; v ≡ 0.9."""
    prior = np.full(P, 0.4 / 79)
    prior[A1], prior[A2] = 0.5, 0.1
    return nets(policy_params(BETA * np.log(prior)), value_params(0.9), None)


def test_one_step_of_four_leaves_by_hand():
    """One step of 4 leaves, n_vl = 3, c_puct = 5; Q' = (W − 3i)/(N + 3i), score Q' + 5·P·sqrt(ΣN')/(1 + N'):
      leaf 1: nothing visited, ΣN' = 0: the highest prior, A1. In flight: A1 1.
      leaf 2: A1 N' = 3, Q' = −1; ΣN' = 3: A1 −1 + 5·0.5·1.732/4 = 0.083; A2 5·0.1·1.732 = 0.866;
              others 5·0.005063·1.732 = 0.044 -> A2.
      leaf 3: ΣN' = 6: A1 −1 + 5·0.5·2.449/4 = 0.531; A2 −1 + 5·0.1·2.449/4 = −0.694; others 0.062 -> A1 again: the
              prior outweighs 3 losses, and the unexpanded edge is chosen twice.
      leaf 4: A1 N' = 6, ΣN' = 9: A1 −1 + 5·0.5·3/7 = 0.0714; A2 −1 + 5·0.1·3/4 = −0.625; others 5·0.005063·3 =
              0.0759 -> the lowest other point, 0.
    Settled in that order: A1's node, A2's, A1's again (its second visit: 2, mean 0.9), point 0's. Root visits A1 2,
    A2 1, point 0 1; 3 nodes below the root. (The synchronous search gives A1 3 and A2 1, one of A1's below it:
    tests/test_alphago_apv_mcts.py.) With n_vl = 0 nothing deters: all 4 leaves are A1."""
    out = apv_mcts.search(apv(), hand_nets(), stack(EMPTY, EMPTY), jax.random.key(2))
    tree = out.search_tree
    expected = np.zeros((2, P + 1), np.int32)
    expected[:, A1], expected[:, A2], expected[:, 0] = 2, 1, 1
    np.testing.assert_array_equal(tree.children_visits[:, 0], expected)
    np.testing.assert_array_equal(tree.node_visits[:, 1:], [[2, 1, 1, 0]] * 2)  # A1's node twice, one node unused
    np.testing.assert_allclose(tree.node_values[:, 1], 0.9, atol=1e-6)
    np.testing.assert_allclose(tree.qvalues(jnp.zeros(2, jnp.int32))[:, A1], -0.9, atol=1e-6)  # 0.9 for White
    assert out.action.tolist() == [A1, A1]
    greedy = apv_mcts.search(apv(n_vl=0.0), hand_nets(), stack(EMPTY, EMPTY), jax.random.key(2)).search_tree
    assert greedy.children_visits[:, 0, A1].tolist() == [4, 4] and greedy.children_visits[:, 0].sum(-1).tolist() == [
        4,
        4,
    ]


def test_one_leaf_per_step_is_the_synchronous_search():
    """Random p_σ and v_θ, λ = 0, no symmetries (nothing random left): 24 simulations one leaf at a time through this
    loop build the very tree mctx's search builds in apv_mcts.py, node for node."""
    search_nets = nets(policy_params(seed=3), value_params(seed=4), None)
    states = stack(EMPTY, EYE)
    mctx_tree = apv_mcts.search(apv(simulations=24, leaves=1), search_nets, states, jax.random.key(0)).search_tree
    config = apv(simulations=24, leaves=1)
    prior, value = apv_mcts.evaluate(config, search_nets, states, jax.random.key(1))
    root = mctx.RootFnOutput(prior_logits=prior, value=value, embedding=states)
    ours = virtual_loss.search(
        search_nets,
        jax.random.key(0),
        root,
        apv_mcts.make_recurrent_fn(config),
        prior <= apv_mcts.MASKED / 2,
        simulations=24,
        leaves=1,
        c_puct=5.0,
        n_vl=3.0,
    ).search_tree
    for field in ("children_visits", "children_index", "parents", "action_from_parent", "node_visits"):
        np.testing.assert_array_equal(getattr(ours, field), getattr(mctx_tree, field), err_msg=field)
    np.testing.assert_allclose(ours.node_values, mctx_tree.node_values, rtol=0, atol=1e-6)
    np.testing.assert_allclose(ours.children_values, mctx_tree.children_values, rtol=0, atol=1e-6)
    assert mctx_tree.children_visits[:, 0].max() < 24  # a tree with choices in it, not one line


def test_one_game_sends_its_leaves_to_the_network_together():
    """Batch 1 (one game), 16 simulations, 8 leaves per step: every evaluation after the root's is one call on 8
    positions (2 steps), rollouts and value network together (λ = 0.5, random symmetries); each virtual loss is taken
    off again (none in flight at the end), and the 16 visits are all in the tree."""
    sizes = []
    recurrent = apv_mcts.make_recurrent_fn(apv(lam=0.5, simulations=16, leaves=8, symmetries=True))

    def counting(params, key, action, states):
        sizes.append(action.shape[0])  # at trace time: the batch of each evaluation
        return recurrent(params, key, action, states)

    search_nets = nets(policy_params(seed=5), value_params(seed=6))
    config = apv(lam=0.5, simulations=16, leaves=8, symmetries=True)
    states = stack(EMPTY)
    prior, value = apv_mcts.evaluate(config, search_nets, states, jax.random.key(1))
    root = mctx.RootFnOutput(prior_logits=prior, value=value, embedding=states)
    out = jax.jit(
        lambda key: virtual_loss.search(
            search_nets, key, root, counting, prior <= apv_mcts.MASKED / 2, simulations=16, leaves=8, c_puct=5.0, n_vl=3
        )
    )(jax.random.key(7))
    assert sizes == [8]  # one traced call (in the loop over 2 steps) on 1 game × 8 leaves
    tree = out.search_tree
    assert int(tree.children_visits[0, 0].sum()) == 16 and int(tree.node_visits[0, 0]) == 17
    assert int(np.abs(np.asarray(tree.extra_data)).sum()) == 0
    assert int(tree.children_visits[0, 0, out.action[0]]) == int(tree.children_visits[0, 0].max())
    # and through apv_mcts.search (the player's path), the same shapes: a legal most-visited move
    move = apv_mcts.search(config, search_nets, states, jax.random.key(7))
    assert bool(states.legal_action_mask[0, move.action[0]])


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"simulations": 6, "leaves": 4}, "leaves"),
        ({"simulations": 4, "leaves": 0}, "leaves"),
        ({"simulations": 4, "virtual_loss": -1.0}, "virtual_loss"),
    ],
)
def test_config_validation(kwargs, field):
    with pytest.raises(ValueError, match=rf"^APVConfig: invalid {field}="):
        apv_mcts.APVConfig(**kwargs)


# --- the expansion threshold ------------------------------------------------------------------------------------------

ZERO_TREE = tree_policy.TreePolicy(  # p_τ with no pattern and zero weights: uniform over the legal points
    response_vocabulary=jnp.zeros(0, jnp.uint32),
    pattern_vocabulary=jnp.zeros(0, jnp.uint32),
    diamond_vocabulary=jnp.zeros(0, jnp.uint32),
    weights=jnp.zeros(tree_policy.NUM_FIXED + tree_policy.NUM_EXTRA, jnp.float32),
)


def threshold_nets():
    """p_σ^β: P = 0.8 on A1, 0.05 on A2, 0.15 / 79 ≈ 0.0019 on each other point (the same on every board: a bias);
    v ≡ 0; p_τ uniform."""
    prior = np.full(P, 0.15 / 79)
    prior[A1], prior[A2] = 0.8, 0.05
    return nets(policy_params(BETA * np.log(prior)), value_params(0.0), None).replace(tree=ZERO_TREE)


def test_expansion_threshold_by_hand():
    """n_thr = 2, one leaf a step, 6 simulations, λ = 0, v ≡ 0 (so every Q is 0 and the prior alone steers), c = 5:
      1: nothing visited: the highest prior, A1; its node X is made with p_τ's (uniform) priors, visits 1.
      2: A1 5·0.8·1/2 = 2.0 against A2 5·0.05·1 = 0.25 -> A1; X (1 visit <= 2) is a leaf: evaluated again, visits 2.
      3: A1 5·0.8·1.414/3 = 1.89 > A2 0.35 -> X again: visits 3 > 2, X is queued for p_σ.
      4: A1 5·0.8·1.732/4 = 1.73 > A2 0.43 -> into X, whose priors are still p_τ's (p_σ's come with this step's
         batch): nothing below X visited, the highest prior, a tie of uniform priors: the first sensible point, 0.
         Node Y = X + point 0. X's p_σ priors arrive: over X's sensible points (A1 taken) A2 0.05/0.2 = 0.25.
      5: A1 5·0.8·2/5 = 1.6 > A2 0.5 -> into X: point 0 (N 1) 5·0.0095·1/2 = 0.024, A2 5·0.25·1 = 1.25 -> A2: Z.
      6: A1 5·0.8·2.236/6 = 1.49 > A2 0.56 -> into X: A2 5·0.25·1.414/2 = 0.88 > point 0 0.034 -> Z (1 visit): a
         leaf, evaluated again.
    Root: A1 6 visits. X: 6; its children point 0 1 (Y) and A2 2 (Z). Three nodes. With n_thr = 0 (expanded at once,
    p_σ's priors at once) the second simulation goes below X at once, by p_σ: to A2."""
    config = apv(simulations=6, leaves=1)
    threshold = apv_mcts.APVConfig(**{**config.__dict__, "expansion_threshold": 2})
    tree = apv_mcts.search(threshold, threshold_nets(), stack(EMPTY), jax.random.key(2)).search_tree
    assert int(tree.children_visits[0, 0, A1]) == 6 and int(tree.children_visits[0, 0].sum()) == 6
    x = int(tree.children_index[0, 0, A1])
    below = np.asarray(tree.children_visits[0, x])
    assert int(tree.node_visits[0, x]) == 6 and below[0] == 1 and below[A2] == 2 and below.sum() == 3
    assert int((np.asarray(tree.node_visits[0]) > 0).sum()) == 4  # the root, X, Y, Z
    y, z = int(tree.children_index[0, x, 0]), int(tree.children_index[0, x, A2])
    prior_x = np.asarray(jax.nn.softmax(tree.children_prior_logits[0, x]))
    assert prior_x[A2] == pytest.approx(0.25, abs=1e-4) and prior_x[A1] < 1e-6  # p_σ's, arrived
    prior_y = np.asarray(jax.nn.softmax(tree.children_prior_logits[0, y]))
    assert prior_y.max() == pytest.approx(1 / 79, abs=1e-5)  # p_τ's placeholder: uniform over 79 free points
    assert int(tree.node_visits[0, z]) == 2 and int(tree.node_visits[0, y]) == 1
    at_once = apv_mcts.search(config, threshold_nets(), stack(EMPTY), jax.random.key(2)).search_tree
    x0 = int(at_once.children_index[0, 0, A1])
    assert int(at_once.children_visits[0, x0, A2]) >= 1 and int(at_once.children_visits[0, x0, 0]) == 0


def test_expansion_threshold_needs_the_tree_policy():
    config = apv_mcts.APVConfig(simulations=8, lam=0.0, expansion_threshold=40)
    with pytest.raises(ValueError, match="needs the tree policy p_tau") as e:
        apv_mcts.search(config, nets(policy_params(), value_params(), None), stack(EMPTY), jax.random.key(0))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="expansion_threshold"):
        apv_mcts.APVConfig(simulations=8, expansion_threshold=-1)
