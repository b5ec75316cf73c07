"""Row-wise selection in batched pytrees: the one `jnp.where` that every batched game loop needs (a game slot that
restarts, a move applied only to the games still running, a buffer row rewritten only where valid)."""

import jax
import jax.numpy as jnp


def where_rows(mask: jax.Array, new, old):
    """mask [B] bool (or [B, ...] matching the leaves' leading axes); `new` and `old` pytrees of equal structure whose
    leaves are [B, ...] -> each leaf's rows from `new` where mask is True, else from `old` (mask broadcast over the
    trailing axes)."""
    return jax.tree.map(
        lambda n, o: jnp.where(jnp.reshape(mask, mask.shape + (1,) * (jnp.ndim(o) - mask.ndim)), n, o), new, old
    )
