"""Go: the points that are the player to move's own eyes, which Monte Carlo Go programs never fill in their playouts
(Config.eye_rule; not in the AlphaZero papers, whose networks learn this from self-play alone).

An empty point is the mover's eye when every orthogonal neighbour on the board is the mover's stone, and at most one
of its diagonal neighbours is an opponent's stone, none where the point is on the edge or in the corner (where a
diagonal opponent stone makes the eye false). Filling such a point captures nothing (no opponent stone touches it)
and takes a liberty from the mover's own chains; under area scoring it gains no point, since an eye already counts as
the mover's area.
"""

import jax
import jax.numpy as jnp


def shift(x: jax.Array, dr: int, dc: int, fill) -> jax.Array:
    """x [..., n, n] -> [..., n, n]: out[..., r, c] = x[..., r + dr, c + dc], `fill` where that is off the board."""
    n = x.shape[-1]
    padded = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(1, 1), (1, 1)], constant_values=fill)
    return padded[..., 1 + dr : 1 + dr + n, 1 + dc : 1 + dc + n]


def own_eyes(state) -> jax.Array:
    """One pgx Go state (unbatched) -> [A] bool over its actions: the mover's eyes (above); pass is never one."""
    p = state._x.board.shape[-1]
    n = round(p**0.5)
    board = state._x.board.reshape(n, n)
    own = jnp.where(state._x.color == 0, board > 0, board < 0)  # pgx: Black's stones > 0; colour 0 is Black to move
    opponent = (board != 0) & ~own
    orthogonal = [(-1, 0), (1, 0), (0, -1), (0, 1)]
    diagonal = [(-1, -1), (-1, 1), (1, -1), (1, 1)]
    surrounded = jnp.all(jnp.stack([shift(own, dr, dc, True) for dr, dc in orthogonal]), axis=0)  # edge counts as own
    bad_diagonals = sum(shift(opponent, dr, dc, False).astype(jnp.int32) for dr, dc in diagonal)
    line = jnp.arange(n)
    edge = ((line == 0) | (line == n - 1))[:, None] | ((line == 0) | (line == n - 1))[None, :]  # [n, n]
    allowed = jnp.where(edge, 0, 1)  # the edge and the corner: no opponent diagonal; inside: one
    eyes = (board == 0) & surrounded & (bad_diagonals <= allowed)
    return jnp.concatenate([eyes.reshape(-1), jnp.zeros((state.legal_action_mask.shape[-1] - p,), bool)])
