"""The batched backward pass (az_jax/core/backup.py): mctx's trees bit for bit, and one backup by hand."""

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from mctx._src import search as mctx_search

from az_jax.core import backup

B, A = 3, 4


def _recurrent_fn(params, rng_key, action, embedding):
    """A made-up game whose rewards, discounts, values and priors depend on the path (embedding = a running hash), so
    trees grow unevenly deep and every backup term matters."""
    del params, rng_key
    h = (embedding * 31 + action + 7) % 1009  # [B]
    u = lambda k: jnp.sin(h * (k + 1.3)).astype(jnp.float32)  # noqa: E731  deterministic values in [−1, 1]
    out = mctx.RecurrentFnOutput(
        reward=0.5 * u(0),
        discount=jnp.where(u(1) > 0.8, 0.0, -1.0),  # some edges end the game
        prior_logits=3.0 * jnp.stack([u(k) for k in range(2, 2 + A)], axis=-1),
        value=u(7),
    )
    return out, h


def _search(policy: str, batched: bool, simulations: int = 40):
    backup.use_batched_backward(batched)
    try:
        root = mctx.RootFnOutput(
            prior_logits=jnp.array([[0.0, 1.0, 2.0, 0.5], [2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]),
            value=jnp.array([0.1, -0.3, 0.0]),
            embedding=jnp.array([1, 2, 3]),
        )
        if policy == "gumbel":
            run = lambda k: (
                mctx.gumbel_muzero_policy(  # noqa: E731
                    None, k, root, _recurrent_fn, simulations, max_num_considered_actions=A
                ).search_tree
            )
        else:
            run = lambda k: mctx.muzero_policy(None, k, root, _recurrent_fn, simulations).search_tree  # noqa: E731
        return jax.jit(run)(jax.random.key(5))
    finally:
        backup.use_batched_backward(True)  # az_jax's setting, for the tests after this one


def _deepest(parents: np.ndarray) -> int:
    """The depth of a tree's deepest node, from its parents [N] (−1: the root, or a node never made)."""
    depth = np.zeros(len(parents), int)
    for node in range(1, len(parents)):  # a node's parent was made before it
        depth[node] = depth[parents[node]] + 1 if parents[node] >= 0 else 0
    return int(depth.max())


@pytest.mark.parametrize("policy", ["muzero", "gumbel"])
def test_the_same_trees_as_mctx_backward(policy):
    # mctx's search loop calls the module global `backward`, which use_batched_backward replaces: were it renamed,
    # both searches below would be mctx's and this test would prove nothing
    codes = [mctx_search.search.__code__, *(c for c in mctx_search.search.__code__.co_consts if hasattr(c, "co_names"))]
    assert any("backward" in code.co_names for code in codes)
    backup.use_batched_backward(True)
    assert mctx_search.backward is backup.backward
    ours, theirs = _search(policy, True), _search(policy, False)
    # the trees' depths differ between games, so in a backup some reach their root before the others
    assert len({_deepest(np.asarray(ours.parents[b])) for b in range(B)}) > 1
    theirs_leaves = jax.tree.leaves(theirs)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(ours), theirs_leaves, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=jax.tree_util.keystr(path))


def test_walk_up_by_hand():
    """Tree 0: root 0 —a2→ node 1 —a0→ node 2, each edge reward r and discount −1; tree 1 stays at its root.

    Before: node values v0 = 0.2 (2 visits), v1 = 0.5 (1 visit), v2 = −0.4 (the leaf's own value after its
    expansion, 1 visit). Walking up from node 2 with value −0.4:
      edge 1→2 (reward 0.1): value_up = 0.1 + (−1)(−0.4) = 0.5; node 1: (0.5·1 + 0.5) / 2 = 0.5, visits 2;
        children_values[1, 0] = v2 = −0.4, children_visits[1, 0] = 0 + 1 = 1.
      edge 0→1 (reward −0.2): value_up = −0.2 + (−1)(0.5) = −0.7; node 0: (0.2·2 + (−0.7)) / 3 = −0.1, visits 3;
        children_values[0, 2] = v1 (now 0.5), children_visits[0, 2] = 1 + 1 = 2."""
    root = mctx.RootFnOutput(prior_logits=jnp.zeros((2, A)), value=jnp.zeros(2), embedding=jnp.zeros(2))
    tree = mctx_search.instantiate_tree_from_root(root, 3, root_invalid_actions=jnp.zeros((2, A)), extra_data=None)
    set_ = lambda x, idx, v: x.at[idx].set(v)  # noqa: E731
    tree = tree.replace(
        node_values=set_(tree.node_values, (0, slice(0, 3)), jnp.array([0.2, 0.5, -0.4])),
        node_visits=set_(tree.node_visits, (0, slice(0, 3)), jnp.array([2, 1, 1])),
        parents=set_(tree.parents, (0, slice(0, 3)), jnp.array([-1, 0, 1])),
        action_from_parent=set_(tree.action_from_parent, (0, slice(0, 3)), jnp.array([-1, 2, 0])),
        children_index=tree.children_index.at[0, 0, 2].set(1).at[0, 1, 0].set(2),
        children_rewards=tree.children_rewards.at[0, 0, 2].set(-0.2).at[0, 1, 0].set(0.1),
        children_discounts=tree.children_discounts.at[0, 0, 2].set(-1.0).at[0, 1, 0].set(-1.0),
        children_visits=tree.children_visits.at[0, 0, 2].set(1),
    )
    after = backup.walk_up(tree, jnp.array([2, 0]), jnp.array([-0.4, 9.0]))
    np.testing.assert_allclose(after.node_values[0, :3], [-0.1, 0.5, -0.4], atol=1e-6)
    np.testing.assert_array_equal(after.node_visits[0, :3], [3, 2, 1])
    np.testing.assert_allclose([after.children_values[0, 0, 2], after.children_values[0, 1, 0]], [0.5, -0.4])
    np.testing.assert_array_equal([after.children_visits[0, 0, 2], after.children_visits[0, 1, 0]], [2, 1])
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(tree), strict=True):  # tree 1 was at its root: untouched
        np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(b[1]))
