"""Go: liberty planes for the network's input, computed from the stones of a batch of observations
(Config.liberty_planes). NOT IN THE AlphaZero PAPERS, whose input is the stones alone: KataGo's input has, besides
the stones, a plane each for the stones whose chain has 1, 2 and 3 liberties (Wu, "Accelerating Self-Play Learning
in Go", 2019, Appendix A, Table of input features), as AlphaGo's 48 planes had its liberty planes (Silver et al. 2016,
Extended Data Table 2). A small network learns to count the liberties of long chains slowly, and whole chains that
run out of them decide the games at CPU scale.

A chain is a maximal set of one colour's stones connected orthogonally; its liberties are the distinct empty points
orthogonally next to one of its stones. pgx's Go observation [n, n, C] has the mover's stones in channel 0 and the
opponent's in channel 1 (the current position; the rest is history and the colour), so the planes need nothing but
the observation, and they look the same under every symmetry of the board.

    liberty_planes(obs [B, n, n, C]) -> [B, n, n, 3] float32: plane k − 1 is 1 on every stone (of either colour) whose
    chain has exactly k liberties, k = 1, 2, 3
"""

import jax
import jax.numpy as jnp

from envs.go_eyes import shift

PLANES = 3  # chains with 1, 2 and 3 liberties (KataGo's three planes)
_DIRECTIONS = ((-1, 0), (1, 0), (0, -1), (0, 1))


def chain_labels(colour: jax.Array) -> jax.Array:
    """colour [B, n, n] int (0 empty, 1 and 2 the two colours) -> [B, n, n] int32: each stone's chain labelled by the
    smallest flat index (r·n + c) among its stones; empty points n². Each round takes the smallest label among a
    stone's same-coloured neighbours, then the label's own label (pointer jumping), until nothing changes."""
    batch, n, _ = colour.shape
    empty_label = n * n
    start = jnp.where(colour > 0, jnp.arange(n * n, dtype=jnp.int32).reshape(n, n), empty_label)
    start = jnp.broadcast_to(start, (batch, n, n))

    # same[d]: the neighbour in direction d is a stone of the same colour (fixed while the labels spread)
    same = [(shift(colour, dr, dc, 0) == colour) & (colour > 0) for dr, dc in _DIRECTIONS]

    def round_(carry):
        labels, _ = carry
        lowest = labels
        for (dr, dc), joined in zip(_DIRECTIONS, same, strict=True):
            lowest = jnp.minimum(lowest, jnp.where(joined, shift(labels, dr, dc, empty_label), empty_label))
        flat = lowest.reshape(batch, n * n)
        padded = jnp.concatenate([flat, jnp.full((batch, 1), empty_label, flat.dtype)], axis=1)  # label n² -> n²
        jumped = jnp.minimum(flat, jnp.take_along_axis(padded, flat, axis=1)).reshape(batch, n, n)
        return jumped, (jumped != labels).any()

    labels, _ = jax.lax.while_loop(lambda carry: carry[1], round_, (start, jnp.bool_(True)))
    return labels


def liberties(colour: jax.Array) -> jax.Array:
    """colour [B, n, n] (as above) -> [B, n, n] int32: the liberties of each stone's chain; 0 on empty points."""
    batch, n, _ = colour.shape
    points = n * n
    labels = chain_labels(colour)
    empty = colour == 0
    # touches[b, e, L]: empty point e is next to a stone of chain L (the label n² of an empty neighbour falls out)
    touches = jnp.zeros((batch, n, n, points), bool)
    for dr, dc in _DIRECTIONS:
        touches |= jax.nn.one_hot(shift(labels, dr, dc, points), points, dtype=bool)
    per_chain = (touches & empty[..., None]).reshape(batch, points, points).sum(axis=1, dtype=jnp.int32)  # [B, L]
    per_chain = jnp.concatenate([per_chain, jnp.zeros((batch, 1), jnp.int32)], axis=1)  # label n² (empty): 0
    return jnp.take_along_axis(per_chain, labels.reshape(batch, points), axis=1).reshape(batch, n, n)


def liberty_planes(obs: jax.Array) -> jax.Array:
    """obs [B, n, n, C] (pgx Go observations, bool or float) -> [B, n, n, 3] float32 (module docstring)."""
    mine, theirs = obs[..., 0] > 0.5, obs[..., 1] > 0.5
    colour = jnp.where(mine, 1, jnp.where(theirs, 2, 0))
    counts = jax.lax.stop_gradient(liberties(colour))
    return jnp.stack([counts == k for k in range(1, PLANES + 1)], axis=-1).astype(jnp.float32)
