"""p_π's move features for a rollout (Silver et al., Nature 2016, Methods, "Rollout policy"): what a rollout move reads
of features._move_features — liberties, legality, own eyes, and the liberties after a move capped at 2 — from the
chain labels and chain scalars the rollout carries (lean_chains.py), without features.py's per-chain bitsets.

    moves = move_features(board, ko, n, label[, chains])   # [P] each: label, liberties, legal, liberties_after (<= 2),
                                                            # own_eye; `chains`: lean_chains.Chains a rollout carries
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from az_jax.alphago import lean_chains
from az_jax.alphago.features import _OFF, _dilate, _distinct_neighbour_labels, _own_eyes, _shifted, _tables


def move_features(
    board: jax.Array, ko: jax.Array, n: int, label: jax.Array, chains: lean_chains.Chains | None = None
) -> dict[str, jax.Array]:
    """What p_π's rollout move reads of features._move_features (all [P]): liberties, legal, own_eye, and
    liberties_after capped at 2 (min(liberties_after, 2), the same values on every empty point), from the carried
    chain labels, with no bitsets: chains' liberty counts, liberty sums and sizes per label (scalars, where
    features._move_features scatters and gathers W-word bitsets; carried by a rollout as `chains`, else counted here),
    and the result of a move at m is read from its 4 neighbours.

    The chain N of a move at empty m is m, the own chains next to it (O) and, once the opponent chains next to it
    with one liberty (C, whose liberty is m) are removed, its liberties are: m's empty neighbours, each O's
    liberties but m, and the stones of C next to N. Witnesses of these, up to 12 points: m's empty neighbours, the
    other liberty of each O with 2, and m's neighbours in C; an O with >= 3 liberties gives 2 at once. Two distinct
    witnesses give 2; one gives 1 unless a stone of C that is not next to m is next to an O (possible only when C has
    >= 2 stones): such points, rare, are checked one at a time against the whole board (a while loop that runs for
    none of them in most positions)."""
    p = n * n
    q = jnp.arange(p)
    empty = board == 0
    nbr = jnp.asarray(_tables(n)["nbr"])  # [P, 4], P off the board
    d = _distinct_neighbour_labels(label, n)  # [P, 4]
    chains = lean_chains.of_board(board, label, n) if chains is None else chains
    counts, size = chains.liberties, chains.size
    colour = _shifted(board, n, _OFF)  # [P, 4]
    nlabel = jnp.append(label, p)[nbr]  # [P, 4]: every neighbour's label (repeats kept)
    own = (colour == 1) & (d < p)  # distinct own chains next to m
    captured = (colour == -1) & (d < p) & (counts[d] == 1)  # distinct opponent chains removed by a move at m
    captured_point = (colour == -1) & (counts[nlabel] == 1)  # m's neighbours in those chains
    big = (own & (counts[d] >= 3)).any(-1)
    other = jnp.where(own & (counts[d] == 2), chains.liberty_sum[d] - q[:, None], p)  # the liberty of O but m
    witnesses = jnp.concatenate([jnp.where(colour == 0, nbr, p), other, jnp.where(captured_point, nbr, p)], -1)
    first = witnesses.min(-1)
    second = ((witnesses != first[:, None]) & (witnesses < p)).any(-1)
    two = big | second
    ambiguous = empty & ~two & (captured & (size[d] >= 2)).any(-1) & own.any(-1)

    def resolve(carry):
        left, extra = carry
        m = jnp.argmax(left)
        in_c = (label[:, None] == jnp.where(captured[m], d[m], -1)).any(-1)  # [P]
        in_o = (label[:, None] == jnp.where(own[m], d[m], -1)).any(-1)
        next_to_m = jnp.zeros(p + 1, bool).at[nbr[m]].set(True)[:p]
        found = (in_c & _dilate(in_o, n) & ~next_to_m).any()
        return left.at[m].set(False), extra.at[m].set(found)

    _, extra = lax.while_loop(lambda c: c[0].any(), resolve, (ambiguous, jnp.zeros(p, bool)))
    liberties_after = jnp.where(two | extra, 2, (first < p).astype(jnp.int32))
    legal = empty & (q != ko) & (liberties_after > 0)
    return {
        "label": label,
        "liberties": jnp.where(empty, 0, counts[label]),
        "legal": legal,
        "liberties_after": liberties_after,
        "own_eye": _own_eyes(board, colour, n),
    }
