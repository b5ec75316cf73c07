"""Each chain's liberty count, liberty sum and size, carried through a rollout and updated by the move played (Silver
et al., Nature 2016, Methods, "Rollout policy": p_π's features are updated incrementally, not found again each move).

    chains = of_board(board, label, n)                                 # one board, at the rollout's start
    board, label, ko, chains = play(board, label, chains, action, n)   # B games [B, ...]: the player to move (+1)

A chain is named by its label (features._chain_labels: a point of the chain), so the three are arrays [P + 1]
indexed by label (index P: garbage, what empty points' label P scatters to). The liberty *sum* (the points' indices
added up) stands in for the lowest and highest liberty that lean_moves.py read before: a chain with 2 liberties, one
of them m, has the other at sum − m, and a chain in atari has its liberty at sum.

A move at x changes the chains next to x and next to what it captures, nothing else:
- each opponent chain next to x (once each) loses liberty x: count − 1, sum − x; those left with none are captured;
- the chain through x (x and the own chains next to it) is counted afresh from its stones after the captures: its
  liberties are the empty points next to it, the captured stones next to it among them;
- every other own chain next to a captured stone gains it (once per stone and chain: count + 1, sum + the point).
Labels that leave the board (merged into a smaller one, or captured) keep stale entries, never read again: a label
comes back only as the chain through a later move, whose entries are then set, not added to.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import struct

from az_jax.alphago.features import (
    _OFF,
    _dilate,
    _distinct_neighbour_labels,
    _liberty_counts,
    _play,
    _repeats,
    _tables,
)


@struct.dataclass
class Chains:
    """One board's chains by label ([P + 1] int32 each, index P garbage; a batch carries [B, P + 1])."""

    liberties: jax.Array  # the chain's liberty count
    liberty_sum: jax.Array  # its liberties' point indices added up
    size: jax.Array  # its stones


def of_board(board: jax.Array, label: jax.Array, n: int) -> Chains:
    """The chains of a [P] board with its labels [P], counted from the whole board (a rollout's start)."""
    p = n * n
    d = _distinct_neighbour_labels(label, n)  # [P, 4]: the chains next to each point, each once
    at = jnp.where((board == 0)[:, None], d, p)  # an empty point is a liberty of each chain next to it
    q = jnp.broadcast_to(jnp.arange(p)[:, None], at.shape)
    zeros = jnp.zeros(p + 1, jnp.int32)
    liberties = _liberty_counts(board, label, n, d)
    return Chains(liberties=liberties, liberty_sum=zeros.at[at].add(q), size=zeros.at[label].add(1))


def play(
    board: jax.Array, label: jax.Array, chains: Chains, action: jax.Array, n: int, listed: int | None = None
) -> tuple[jax.Array, jax.Array, jax.Array, Chains]:
    """features._play of the player to move (+1) in B games (board, label [B, P], chains [B, P + 1]) at `action` [B]
    (an empty point, or >= P: a pass, which changes nothing), with the chains it changes updated (the module
    docstring): (board, label, ko [B], chains).

    Scatters run one element at a time on XLA's CPU backend, so the captured stones' neighbour chains are not
    scattered over every point of every game: a ply with no capture in the batch skips it, one with up to B + 16
    captured stones in all (`listed`, default B + 16) scatters just those, and only a larger one every point of every
    game (`_gain`, with a list as long as the board)."""
    p = n * n
    q = jnp.arange(p)

    def one(board, label, chains, action):
        played = action < p
        x = jnp.minimum(action, p - 1)
        nbr = jnp.asarray(_tables(n)["nbr"])[x]  # [4], P off the board
        nbr_colour = jnp.append(board, _OFF)[nbr]
        nbr_label = jnp.append(label, p)[nbr]
        opponent = jnp.where(
            (nbr_colour == -1) & ~_repeats(nbr_label), nbr_label, p
        )  # [4]: each opponent chain next to x once
        new_board, new_label, ko = _play(board, label, x, 1, n)
        liberties = chains.liberties.at[opponent].add(-1)
        liberty_sum = chains.liberty_sum.at[opponent].add(-x)
        # the chain through x, after the captures
        mine = new_label[x]
        stones = new_label == mine
        around = _dilate(stones, n) & (new_board == 0)
        new = Chains(
            liberties=liberties.at[mine].set(around.sum()),
            liberty_sum=liberty_sum.at[mine].set(jnp.where(around, q, 0).sum()),
            size=chains.size.at[mine].set(stones.sum()),
        )
        pick = lambda a, b: jnp.where(played, a, b)  # noqa: E731
        captured = played & (board == -1) & (new_board == 0)
        return (
            pick(new_board, board),
            pick(new_label, label),
            pick(ko, -1),
            jax.tree.map(pick, new, chains),
            captured,
            mine,
        )

    board, label, ko, chains, captured, mine = jax.vmap(one)(board, label, chains, action)
    # the captured stones of the whole batch, usually none or a few: listed (at most `listed`) and scattered alone;
    # more than that, every point of every game
    listed = board.shape[0] + 16 if listed is None else listed
    count = captured.sum()
    branch = jnp.where(count == 0, 0, jnp.where(count <= listed, 1, 2))
    gain_listed = functools.partial(_gain, n=n, size=listed)
    gain_all = functools.partial(_gain, n=n, size=captured.size)
    chains = jax.lax.switch(branch, [lambda c, *_: c, gain_listed, gain_all], chains, label, captured, mine)
    return board, label, ko, chains


def _gain(chains: Chains, label: jax.Array, captured: jax.Array, mine: jax.Array, n: int, size: int) -> Chains:
    """B games ([B, ...]): the own chains next to captured stones other than the chain through the move (`mine`,
    counted afresh) gain them as liberties, once per stone and chain, from a list of the captured stones (room for
    `size`: B + 16 usually, every point B · P for a larger capture). The only stones next to a captured one are own
    (its own chain was removed whole), so a captured point's distinct neighbour labels below P are own chains."""
    b, p = label.shape
    where = jnp.nonzero(captured.reshape(-1), size=size, fill_value=b * p)[0]  # [size]: game · P + point
    listed = where < b * p
    game, point = jnp.minimum(where // p, b - 1), where % p
    nbr = jnp.asarray(_tables(n)["nbr"])[point]  # [size, 4]
    nbr_label = jnp.concatenate([label, jnp.full((b, 1), p, label.dtype)], 1)[game[:, None], nbr]  # [size, 4]
    own = listed[:, None] & ~_repeats(nbr_label) & (nbr_label < p) & (nbr_label != mine[game][:, None])
    at = jnp.where(own, game[:, None] * (p + 1) + nbr_label, b * (p + 1))  # [size, 4] into the flat [B · (P + 1)]
    both = jnp.stack([chains.liberties, chains.liberty_sum], -1).reshape(b * (p + 1), 2)
    add = jnp.stack([jnp.ones_like(at), jnp.broadcast_to(point[:, None], at.shape)], -1)
    both = jnp.append(both, jnp.zeros((1, 2), both.dtype), 0).at[at].add(add)[:-1].reshape(b, p + 1, 2)
    return Chains(liberties=both[..., 0], liberty_sum=both[..., 1], size=chains.size)
