"""az_jax/core/rows.py: row-wise selection in batched pytrees, checked on hand-made rows."""

import jax.numpy as jnp
import numpy as np

from az_jax.core.rows import where_rows


def test_rows_come_from_new_where_the_mask_is_true_for_every_leaf_shape():
    mask = jnp.array([True, False, True])
    new = {"board": jnp.arange(12).reshape(3, 2, 2), "ply": jnp.array([7, 8, 9])}
    old = {"board": -jnp.arange(12).reshape(3, 2, 2), "ply": jnp.array([0, 0, 0])}
    out = where_rows(mask, new, old)
    # rows 0 and 2 from new, row 1 from old, whole [2, 2] boards at a time
    np.testing.assert_array_equal(out["board"][0], [[0, 1], [2, 3]])
    np.testing.assert_array_equal(out["board"][1], [[-4, -5], [-6, -7]])
    np.testing.assert_array_equal(out["board"][2], [[8, 9], [10, 11]])
    np.testing.assert_array_equal(out["ply"], [7, 0, 9])


def test_a_two_axis_mask_selects_per_leading_pair():
    # mask [2, 2] over leaves [2, 2, 3]: each (i, j) row of 3 taken whole from new or old
    mask = jnp.array([[True, False], [False, True]])
    new, old = jnp.ones((2, 2, 3)), jnp.zeros((2, 2, 3))
    out = where_rows(mask, new, old)
    np.testing.assert_array_equal(out.sum(-1), [[3, 0], [0, 3]])
