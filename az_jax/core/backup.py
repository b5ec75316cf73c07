"""The search's backward pass for a batch of trees, at a cost that does not grow with the tree.

    tree = backward(tree, leaf_index)            # mctx's backward, batched: tree [B, ...], leaf_index [B]
    tree = walk_up(tree, leaf_index, value)      # the same from a leaf whose value is given (virtual_loss.py)
    use_batched_backward(True | False)           # which backward mctx's own search loop calls

mctx writes its backward pass (`mctx._src.search.backward`: from the new leaf up to the root, each edge's value
becomes reward + discount · value and each node's value its running mean; AlphaZero, Silver et al., Science 2018,
Methods, "Search": "backed up" statistics) for one tree and `jax.vmap`s it. A vmapped `while_loop` whose condition
differs between trees runs until the deepest tree is done, and each of its steps `select`s the whole carry — every
tree's [N, A] statistics — between the stepped and the unstepped value, so that trees already at their root stay as
they are. A backward pass then costs depth × B × N × A however little it writes, a simulation O(N) and a search
O(N²). A go_19x19 self-play ply of 8 games (a 1 × 8 network, the 2-core CPU) took 0.66 s at 32 simulations and 46.4 s
at 256 with mctx's backward pass, 0.58 and 11.8 s with this one; one of 1,024 games at 800 simulations (19 × 256,
bf16, one H200) more than ~130 s, and 37.2 s with this one (experiments/accelerators/results/, `cpu_backward/` and
`gpu/h200_run8/`). mctx's issue #107 reports the same slowness as trees deepen.

Here the batch is explicit: one `while_loop` over depth for all trees, each step gathering and scattering one entry
per tree, and a tree already at its root scattering nowhere (an out-of-range row, dropped). The arithmetic is
mctx's, in its order, so the trees are the same bit for bit (tests/test_backup.py); a step costs O(B).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx
from mctx._src import search as mctx_search  # the module whose `backward` its search loop calls (mctx pinned)

ROOT = mctx.Tree.ROOT_INDEX
MCTX_BACKWARD = mctx_search.backward  # mctx's own: the vmapped one-tree loop


def walk_up(tree: mctx.Tree, leaf_index: jax.Array, leaf_value: jax.Array) -> mctx.Tree:
    """From `leaf_index` [B] (int32) to each root: the edge into a node gets the node's value and one more visit, its
    parent the running mean with reward + discount · `leaf_value` [B] (for the player to move at the leaf), backed up
    edge by edge (mctx's backward step). Trees whose leaf is the root are unchanged."""
    batch = tree.node_values.shape[0]
    rows = jnp.arange(batch)

    def step(carry):
        tree, value, index = carry
        going = index != ROOT
        parent = tree.parents[rows, index]  # [B]; −1 (read, never written) for a tree already at its root
        count = tree.node_visits[rows, parent]
        action = tree.action_from_parent[rows, index]
        value_up = tree.children_rewards[rows, parent, action] + tree.children_discounts[rows, parent, action] * value
        parent_value = (tree.node_values[rows, parent] * count + value_up) / (count + 1.0)
        children_values = tree.node_values[rows, index]
        children_counts = tree.children_visits[rows, parent, action] + 1
        at = jnp.where(going, rows, batch)  # an out-of-range row: the scatter drops it
        tree = tree.replace(
            node_values=tree.node_values.at[at, parent].set(parent_value, mode="drop"),
            node_visits=tree.node_visits.at[at, parent].set(count + 1, mode="drop"),
            children_values=tree.children_values.at[at, parent, action].set(children_values, mode="drop"),
            children_visits=tree.children_visits.at[at, parent, action].set(children_counts, mode="drop"),
        )
        return tree, jnp.where(going, value_up, value), jnp.where(going, parent, index)

    carry = (tree, leaf_value, jnp.asarray(leaf_index, jnp.int32))
    tree, _, _ = jax.lax.while_loop(lambda c: jnp.any(c[2] != ROOT), step, carry)
    return tree


def backward(tree: mctx.Tree, leaf_index: jax.Array) -> mctx.Tree:
    """mctx's backward pass on a batch of trees [B, ...] from `leaf_index` [B]: `walk_up` from the leaf's own
    value (the one `expand` just wrote)."""
    leaf_index = jnp.asarray(leaf_index, jnp.int32)
    return walk_up(tree, leaf_index, tree.node_values[jnp.arange(leaf_index.shape[0]), leaf_index])


def use_batched_backward(batched: bool = True) -> None:
    """Makes mctx's search loop (every mctx policy) back up with `backward` (True) or with its own (False).

    mctx's `search` looks its `backward` up as a module global when it is traced, so this decides for programs
    traced afterwards. az_jax calls it with True on import (az_jax/core/search.py); False is for measuring the two
    (experiments/accelerators/selfplay_mfu.py --backward mctx)."""
    mctx_search.backward = backward if batched else MCTX_BACKWARD
