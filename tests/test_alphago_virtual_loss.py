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

from az_jax.alphago import apv_mcts
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
