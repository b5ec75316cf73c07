"""AlphaGo's input feature planes (Silver et al., Nature 2016, Extended Data Table 2) of a `Position`, in JAX: batched
over any leading dimensions and jit-able.

    x = features(position)                  # [..., N, N, 48] float32: the policy networks' input
    x = features(position, 49)              # [..., N, N, 49]: + player colour, the value network's input
    x = features(position, 4 | 12 | 20)     # the first 4, 12 or 20 planes (Extended Data Table 3's smaller inputs)
    x[..., PLANE_SLICES["liberties"]]       # [..., N, N, 8]

Every plane is relative to the player to move ("own" = the player to move, "opponent" = the other). Planes, in order
(integer features one-hot, the last plane of each taking every larger value):

    stone colour          3  own stone / opponent stone / empty
    ones                  1  constant 1
    turns since           8  a stone played 1, 2, ..., 7, >= 8 turns ago (`Position.turns_since`; 0 on empty points)
    liberties             8  liberties of the chain at the point: 1, 2, ..., 7, >= 8 (0 on empty points)
    capture size          8  opponent stones a move here would capture: 0, 1, ..., 6, >= 7 — over legal moves, so
                             plane 0 is "a legal move that captures nothing"
    self-atari size       8  own stones in atari after a move here (the size of the new stone's chain when that chain
                             is left with 1 liberty): 1, 2, ..., 7, >= 8
    liberties after move  8  liberties of the new stone's chain after a move here: 1, 2, ..., 7, >= 8
    ladder capture        1  a move here captures an opponent chain in a ladder (see "Ladders")
    ladder escape         1  a move here saves an own chain in atari from a ladder
    sensibleness          1  a legal move here does not fill one of the player's own eyes (see "Eyes")
    zeros                 1  constant 0
    player colour         1  1 when Black is to move (value network only, plane 49)

The planes are 0/1 float32 (`dtype=jnp.bfloat16` gives the same values exactly). The move planes (capture size to
sensibleness) are 0 on every point where the move is illegal.

Legality. A move is legal when the point is empty, is not `position.ko` (pgx's simple-ko point) and is not suicide (its
chain would have no liberty after the opponent chains it captures are removed; pgx forbids suicide). Positional
superko is not checked here: a move pgx's superko rule would forbid still has its move features.

Chains are found by label propagation over the 4-neighbour grid (each stone takes the smallest point index among
same-coloured neighbours, with pointer jumping, `lax.while_loop` until nothing changes); a chain's liberties are the
distinct empty points next to it, counted with one bitset (ceil(N*N / 32) uint32 words) per chain. The move features
of all N*N candidate points come from those bitsets at once, with no board copies.

Eyes (sensibleness). An own eye is an empty point whose on-board orthogonal neighbours are all own stones and that is
not a false eye by the usual diagonal rule: among its on-board diagonal neighbours at most one opponent stone in the
middle of the board, none on the edge or in the corner. Simplifications: an empty diagonal point, or one the opponent
could take, does not count against the eye; two-point eyes are not eyes.

Ladders. A read follows a ladder from a candidate move m on a copy of the board (moves capture, chains merge):
  * ladder capture at m: m is a liberty of an opponent chain (the prey) with exactly 2 liberties; the player to move
    (the attacker) plays m;
  * ladder escape at m: m is the liberty of an own chain in atari (the prey); the player to move (the defender)
    plays m, and the opponent is the attacker.
Then the two sides alternate:
  * defender, prey in atari: extends at the prey's last liberty, or takes the attacker chain in atari next to the
    prey with the lowest liberty point, whichever leaves the prey more liberties (the extension on a tie). Then 0 or
    1 liberty: captured; 3 or more: escaped; 2: the attacker moves;
  * attacker, prey with 2 liberties: plays one of them, chosen by a one-move look-ahead that ignores captures: not
    the ko point; a liberty x whose stone would keep >= 2 liberties; then the fewest liberties for the defender's
    extension on the other liberty y (the empty points next to y, y's own chains and the prey, less x and y); then
    the lower point. When both liberties look equally good (a safe stone, 2 liberties for the defender), the other
    one is read too, as a second line from the same position, once per read (`_FORKS`). After the move: suicide or
    the ko point: escaped; the prey in atari: the defender moves; anything else (the move took defender stones next
    to the prey): escaped.
Simple ko holds inside a read (a lone stone that took one stone may not be taken back at once: without it, reads
loop on kos); a line still going after 4 * N attacker moves counts as a capture (as RocAlphaGo's depth limit does).
The ladder-capture plane is set at m when a line from m captures its prey; the ladder-escape plane when no line from
m captures it (it escapes at once, with 3 or more liberties, or the ladder then fails).
Simplifications against a full reader (RocAlphaGo's `is_ladder_capture` / `is_ladder_escape`, which read every
attacker choice and every defender extension or capture):
  * the attacker reads one choice per move, except for the one fork above; the defender weighs only the extension
    and one capture, by the liberties they leave at once, and reads on from the better only;
  * the defender never plays elsewhere (no counter-atari, no capture of attacker chains not next to the prey).
Against such a full reader (both attacker choices, the extension and every capture for the defender, no ko, 80
plies; `python -m experiments.alphago.ladder_reference`, figures in experiments/alphago/results/ladder_reference.json),
on 256 random 19x19 positions (100 random moves each): 796 ladder captures against its 799 (14 extra, 17 missed) and
116 escapes against 112 (4 extra, none missed); on 256 random 9x9 positions (40 moves): 646 captures against 642 (20
extra, 16 missed), 152 escapes against 154 (1 extra, 3 missed).
Reads run on a fixed number of slots shared by the whole batch; a finished line's slot takes a forked line waiting
(on a stack of twice the slots; a fork that finds it full is not read) or the next pending read, so the time goes
with the number of plies read, not with the batch size times the longest ladder.
"""

import functools
from types import MappingProxyType

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from az_jax.alphago.position import Position
from az_jax.core.rows import where_rows

# (name, number of planes), in Extended Data Table 2's order.
PLANES: tuple[tuple[str, int], ...] = (
    ("stone_colour", 3),
    ("ones", 1),
    ("turns_since", 8),
    ("liberties", 8),
    ("capture_size", 8),
    ("self_atari_size", 8),
    ("liberties_after_move", 8),
    ("ladder_capture", 1),
    ("ladder_escape", 1),
    ("sensibleness", 1),
    ("zeros", 1),
    ("player_colour", 1),
)
_STOPS = tuple(int(s) for s in np.cumsum([k for _, k in PLANES]))
# name -> slice of the plane axis, e.g. x[..., PLANE_SLICES["liberties"]]
PLANE_SLICES = MappingProxyType(
    {name: slice(stop - k, stop) for (name, k), stop in zip(PLANES, _STOPS)},
)
NUM_POLICY_PLANES = 48
NUM_VALUE_PLANES = 49
PLANE_COUNTS = (4, 12, 20, 48, 49)  # the inputs `features` makes: the first k planes

_OFF = 3  # fill value for a neighbour off the board, in int8 boards (+1 own, -1 opponent, 0 empty)
_DIRS = ((-1, 0), (1, 0), (0, -1), (0, 1))
_DIAGS = ((-1, -1), (-1, 1), (1, -1), (1, 1))
_SLOTS = 128  # at most this many ladder reads run at once (8 per position of the batch, shared by all)
_FORKS = 1  # times a ladder line may fork (see the module docstring)
_RUNNING, _CAPTURED, _ESCAPED = 0, 1, 2


def features(position: Position, num_planes: int = NUM_POLICY_PLANES, dtype=jnp.float32) -> jax.Array:
    """The first `num_planes` (4, 12, 20, 48 or 49) feature planes of `position` (leading dims [...]), as
    [..., N, N, num_planes] 0/1 values of `dtype`. Only what the planes asked for is computed (4 and 12: no chains;
    20: chains and liberties; 48 and 49: all, ladders included)."""
    if num_planes not in PLANE_COUNTS:
        raise ValueError(f"num_planes must be one of {', '.join(map(str, PLANE_COUNTS))}, not {num_planes!r}")
    n = position.size
    p = n * n
    lead = position.board.shape[:-1]
    flat = jax.tree.map(lambda x: x.reshape((-1, *x.shape[len(lead) :])), position)
    board = flat.board.astype(jnp.int8)  # [B, P]
    planes = [
        board == 1,
        board == -1,
        board == 0,
        jnp.ones_like(board, bool),
    ]
    if num_planes >= 12:
        planes.append(_one_hot(flat.turns_since.astype(jnp.int32), 1, 8))
    if num_planes == 20:
        libs = jax.vmap(lambda b: _chain_liberties(b, n))(board)
        planes.append(_one_hot(libs, 1, 8))
    if num_planes >= 48:
        moves = jax.vmap(lambda b, ko: _move_features(b, ko, n))(board, flat.ko.astype(jnp.int32))
        legal = moves["legal"]
        capture, escape = _ladders(board, moves, n)
        planes += [
            _one_hot(moves["liberties"], 1, 8),
            _one_hot(moves["capture_size"], 0, 8) & legal[..., None],
            _one_hot(jnp.where(moves["liberties_after"] == 1, moves["chain_size"], 0), 1, 8) & legal[..., None],
            _one_hot(moves["liberties_after"], 1, 8) & legal[..., None],
            capture & legal,
            escape & legal,
            legal & ~moves["own_eye"],
            jnp.zeros_like(board, bool),
        ]
    if num_planes == 49:
        planes.append(jnp.broadcast_to(flat.black_to_move[:, None], (board.shape[0], p)))
    x = jnp.concatenate([q[..., None] if q.ndim == 2 else q for q in planes], axis=-1).astype(dtype)
    return x.reshape((*lead, n, n, num_planes))


def _one_hot(v: jax.Array, lo: int, k: int) -> jax.Array:
    """[..., P] ints -> [..., P, k] bool: planes for the values lo, lo+1, ..., lo+k-2 and >= lo+k-1; none below lo."""
    values = jnp.arange(lo, lo + k)
    return (jnp.minimum(v, lo + k - 1)[..., None] == values) & (v >= lo)[..., None]


# --- the grid ---------------------------------------------------------------------------------------------------


def _shifted(x: jax.Array, n: int, fill, dirs=_DIRS) -> jax.Array:
    """[P] -> [P, len(dirs)]: the value at each point's neighbour in each direction, `fill` off the board."""
    padded = jnp.pad(x.reshape(n, n), 1, constant_values=fill)
    return jnp.stack([padded[1 + dr : 1 + dr + n, 1 + dc : 1 + dc + n].reshape(-1) for dr, dc in dirs], axis=-1)


def _dilate(mask: jax.Array, n: int) -> jax.Array:
    """[P] bool -> [P] bool: the points next to (not necessarily in) `mask`."""
    return _shifted(mask, n, False).any(-1)


@functools.cache
def _tables(n: int) -> dict[str, np.ndarray]:
    """Static per-size tables: neighbours [P, 4] (P off the board), each point's bit and its neighbours' bits as
    bitsets [P, W] uint32, and each point's word index and bit in its word [P]."""
    p = n * n
    words = (p + 31) // 32
    q = np.arange(p)
    r, c = q // n, q % n
    nbr = np.full((p, 4), p, np.int32)
    for k, (dr, dc) in enumerate(_DIRS):
        ok = (0 <= r + dr) & (r + dr < n) & (0 <= c + dc) & (c + dc < n)
        nbr[ok, k] = ((r + dr) * n + c + dc)[ok]
    bit = (np.uint32(1) << (q % 32).astype(np.uint32)).astype(np.uint32)
    point_bits = np.zeros((p, words), np.uint32)
    point_bits[q, q // 32] = bit
    nbr_bits = np.zeros((p + 1, words), np.uint32)
    for k in range(4):
        np.bitwise_or.at(nbr_bits, (q, nbr[:, k] // 32), np.where(nbr[:, k] < p, bit[np.minimum(nbr[:, k], p - 1)], 0))
    return {"nbr": nbr, "point_bits": point_bits, "nbr_bits": nbr_bits[:p], "word": q // 32, "bit": bit}


def _or(xs: jax.Array, axis: int) -> jax.Array:
    return lax.reduce(xs, np.uint32(0), lax.bitwise_or, (axis % xs.ndim,))


def _popcount(bits: jax.Array) -> jax.Array:
    """[..., W] uint32 -> [...] int32: the number of bits set."""
    return lax.population_count(bits).astype(jnp.int32).sum(-1)


# --- chains -----------------------------------------------------------------------------------------------------


def _chain_labels(board: jax.Array, n: int) -> jax.Array:
    """[P] int8 board -> [P] int32: each stone's chain label (a point of the chain, the same for the whole chain), P
    on empty points. Label propagation (smallest label among same-coloured neighbours) with pointer jumping."""
    p = n * n
    stone = board != 0
    same = (_shifted(board, n, _OFF) == board[:, None]) & stone[:, None]  # [P, 4]: neighbour in the same chain

    def step(carry):
        label, _ = carry
        new = jnp.minimum(label, jnp.where(same, _shifted(label, n, p), p).min(-1))
        new = jnp.append(new, p)[new]  # pointer jumping: a label is a point of the chain, whose label is <= it
        return new, jnp.any(new != label)

    return lax.while_loop(lambda c: c[1], step, (jnp.where(stone, jnp.arange(p), p), jnp.bool_(True)))[0]


def _repeats(labels: jax.Array) -> jax.Array:
    """[..., 4] neighbour labels -> [..., 4] bool: the label is one of the earlier ones (its chain counted already)."""
    first = jnp.zeros(labels.shape[:-1] + (1,), bool)
    later = [(labels[..., :k] == labels[..., k : k + 1]).any(-1, keepdims=True) for k in range(1, 4)]
    return jnp.concatenate([first, *later], -1)


def _distinct_neighbour_labels(label: jax.Array, n: int) -> jax.Array:
    """[P] labels -> [P, 4]: the chain labels next to each point, each chain once (repeats and non-stones -> P)."""
    p = n * n
    nl = _shifted(label, n, p)
    return jnp.where(_repeats(nl), p, nl)


def _liberty_counts(board: jax.Array, label: jax.Array, n: int, d: jax.Array | None = None) -> jax.Array:
    """[P] board and labels -> [P + 1] int32: liberties of the chain with each label (index P: garbage). `d`: the
    distinct neighbour labels when the caller has them, else found here."""
    p = n * n
    d = _distinct_neighbour_labels(label, n) if d is None else d
    return jnp.zeros(p + 1, jnp.int32).at[jnp.where((board == 0)[:, None], d, p)].add(1)


def _liberty_range(board: jax.Array, label: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """[P] board and labels -> the lowest and highest liberty of the chain with each label, [P + 1] each (P and -1
    for a chain with none; index P: garbage). A chain is in atari when the two are equal."""
    p = n * n
    empty = _shifted(board == 0, n, False)  # [P, 4]
    at = _shifted(jnp.arange(p), n, p)
    lowest = jnp.full(p + 1, p).at[label].min(jnp.where(empty, at, p).min(-1))
    highest = jnp.full(p + 1, -1).at[label].max(jnp.where(empty, at, -1).max(-1))
    return lowest, highest


def _chain_liberties(board: jax.Array, n: int) -> jax.Array:
    """[P] int8 board -> [P] int32: the liberties of the chain at each point, 0 on empty points."""
    label = _chain_labels(board, n)
    return jnp.where(board != 0, _liberty_counts(board, label, n)[label], 0)


def _own_eyes(board: jax.Array, colour: jax.Array, n: int) -> jax.Array:
    """[P] bool: the player to move's eyes ("Eyes" above): empty, orthogonal neighbours (`colour` [P, 4]) own or off
    the board, and opponent diagonals none on the edge, at most 1 elsewhere."""
    diagonal = _shifted(board, n, _OFF, _DIAGS)
    edge = (diagonal == _OFF).any(-1)
    bad = (diagonal == -1).sum(-1)
    return (board == 0) & ((colour == 1) | (colour == _OFF)).all(-1) & (bad <= jnp.where(edge, 0, 1))


def _move_features(board: jax.Array, ko: jax.Array, n: int, label: jax.Array | None = None) -> dict[str, jax.Array]:
    """One position's chains and the result of a move at each of its N*N points (all [P]):
    label (chain labels), liberties (of the chain at a stone), label_liberties [P + 1] (by label), legal,
    capture_size, chain_size (of the new stone's chain), liberties_after, own_eye. `label`: the chain labels when
    the caller carries them (`_chain_labels`' values: a rollout's, alphago/rollout_game.py), else found here."""
    t = _tables(n)
    p = n * n
    q = jnp.arange(p)
    empty = board == 0
    label = _chain_labels(board, n) if label is None else label
    d = _distinct_neighbour_labels(label, n)  # [P, 4]
    word, bit = jnp.asarray(t["word"]), jnp.asarray(t["bit"])
    words = t["point_bits"].shape[1]
    # bitsets by chain label [P + 1, W] (row P: garbage): the chain's stones, and the points next to it
    stones = jnp.zeros((p + 1, words), jnp.uint32).at[label, word].add(bit)
    nexts = jnp.zeros((p + 1, words), jnp.uint32).at[d, word[:, None]].add(bit[:, None])
    empty_bits = jnp.zeros(words, jnp.uint32).at[word].add(jnp.where(empty, bit, np.uint32(0)))
    label_liberties = _popcount(nexts & empty_bits)
    label_size = _popcount(stones)
    # a move at each point m: its distinct neighbour chains, own (merged) and opponent (captured if in atari)
    colour = _shifted(board, n, _OFF)  # [P, 4]
    own = (colour == 1) & (d < p)
    captured = (colour == -1) & (d < p) & (label_liberties[d] == 1)
    capture_size = jnp.where(captured, label_size[d], 0).sum(-1)
    chain_size = 1 + jnp.where(own, label_size[d], 0).sum(-1)
    zero = np.uint32(0)
    around = jnp.asarray(t["nbr_bits"]) | _or(jnp.where(own[..., None], nexts[d], zero), 1)  # [P, W]
    freed = _or(jnp.where(captured[..., None], stones[d], zero), 1)
    free = (empty_bits & ~jnp.asarray(t["point_bits"])) | freed
    liberties_after = _popcount(around & free)
    legal = empty & (q != ko) & (liberties_after > 0)
    own_eye = _own_eyes(board, colour, n)
    return {
        "label": label,
        "liberties": jnp.where(empty, 0, label_liberties[label]),
        "label_liberties": label_liberties,
        "legal": legal,
        "capture_size": capture_size,
        "chain_size": chain_size,
        "liberties_after": liberties_after,
        "own_eye": own_eye,
    }


# --- ladders ----------------------------------------------------------------------------------------------------


def _play(board: jax.Array, label: jax.Array, x: jax.Array, colour: int, n: int):
    """Play `colour` (+1 or -1) at empty point x of a [P] board with chain labels [P]: merge chains, remove the
    opponent chains left with no liberty. Returns (board, label, ko): ko is the point the opponent may not play next
    (one stone captured by a lone stone left with one liberty), -1 if none. No legality check (a suicide stays on
    the board with 0 liberties)."""
    p = n * n
    nbr = jnp.asarray(_tables(n)["nbr"])[x]  # [4]
    nbr_colour = jnp.append(board, _OFF)[nbr]
    nbr_label = jnp.append(label, p)[nbr]
    same = nbr_colour == colour
    new = jnp.minimum(x, jnp.where(same, nbr_label, p).min())
    merged = (board == colour) & ((label[:, None] == nbr_label) & same).any(-1)
    label = jnp.where(merged, new, label).at[x].set(new)
    board = board.at[x].set(colour)
    near_empty = _dilate(board == 0, n)
    chain = (label[:, None] == nbr_label) & (board == -colour)[:, None]  # [P, 4]: the opponent chains next to x
    dead = (nbr_colour == -colour) & ~(chain & near_empty[:, None]).any(0)
    removed = (chain & dead).any(-1)
    board = jnp.where(removed, 0, board).astype(board.dtype)
    lone = ~same.any() & ((jnp.append(board, _OFF)[nbr] == 0).sum() == 1)
    ko = jnp.where(lone & (removed.sum() == 1), jnp.argmax(removed), -1)
    return board, jnp.where(removed, p, label), ko


def _liberties_of(mask: jax.Array, board: jax.Array, n: int) -> jax.Array:
    """[P] bool mask -> [P] bool: the empty points next to it."""
    return _dilate(mask, n) & (board == 0)


def _attacker_choice(board, label, prey, ko, n):
    """The liberty the attacker plays, of the prey's two (see the module docstring): not the ko point; a stone there
    keeping >= 2 liberties; then the fewest liberties for the defender's extension on the other one; then the lower
    point (all ignoring captures). Returns (that liberty, the other, whether both look like keeping the ladder going:
    a safe stone and 2 liberties for the defender's extension)."""
    p = n * n
    libs = _liberties_of(prey, board, n)
    a, b = jnp.argmax(libs), p - 1 - jnp.argmax(libs[::-1])  # the two liberties, a < b
    nbr = jnp.asarray(_tables(n)["nbr"])
    q = jnp.arange(p)
    empty = board == 0
    pad_board, pad_label = jnp.append(board, _OFF), jnp.append(label, -1)

    def joined(x, colour):  # the stones of `colour` in x's chain after a move at x (captures ignored)
        nl = jnp.where(pad_board[nbr[x]] == colour, pad_label[nbr[x]], -1)
        return (q == x) | ((board == colour) & (label[:, None] == nl).any(-1))

    def score(x, y):
        attacker = (_liberties_of(joined(x, 1), board, n) & (q != x)).sum()
        defender = (_liberties_of(joined(y, -1) | prey, board, n) & empty & (q != x) & (q != y)).sum()
        return jnp.where(x == ko, 4 * p, 0) + jnp.where(attacker >= 2, defender, p + defender)

    scores = jax.vmap(score)(jnp.stack([a, b]), jnp.stack([b, a]))
    first = scores[1] < scores[0]
    return jnp.where(first, b, a), jnp.where(first, a, b), (scores[0] == 2) & (scores[1] == 2)


def _ladder_step(board, label, ko, prey_point, forced, attack_first, n):
    """One attacker move (when `attack_first`) and one defender move of a ladder line, on an attacker-relative
    board (+1 attacker, -1 defender) with its chain labels and ko point. `prey_point` is a stone of the prey (for an
    escape read, the first move, which joins the prey); `forced` >= 0 is the line's first move (the attacker's when
    attack_first, else the defender's). Returns the new (board, label, ko), the status (_RUNNING, _CAPTURED,
    _ESCAPED), and the attacker's other liberty with whether it was as good (a line worth reading too)."""
    p = n * n

    def prey_of(board, label):
        return (label == label[prey_point]) & (board == -1)

    def prey_liberties(board, label):
        return _liberties_of(prey_of(board, label), board, n).sum()

    # attacker: the forced first move or one of the prey's two liberties
    choice, other, tie = _attacker_choice(board, label, prey_of(board, label), ko, n)
    x = jnp.where(forced >= 0, forced, choice)
    tie = tie & (forced < 0) & attack_first
    b1, l1, ko1 = _play(board, label, x, 1, n)
    suicide = ~_liberties_of((l1 == l1[x]) & (b1 == 1), b1, n).any()
    after_attack = jnp.where(
        b1[prey_point] != -1,
        _CAPTURED,
        jnp.where(suicide | (x == ko) | (prey_liberties(b1, l1) != 1), _ESCAPED, _RUNNING),
    )
    board, label = jnp.where(attack_first, b1, board), jnp.where(attack_first, l1, label)
    ko = jnp.where(attack_first, ko1, -1)
    status = jnp.where(attack_first, after_attack, _RUNNING)
    defender_forced = (forced >= 0) & ~attack_first
    # defender: extend at the last liberty, or take the first attacker chain next to the prey in atari, whichever
    # leaves the prey more liberties (the extension on a tie); the ko point is not allowed
    near = _dilate(prey_of(board, label), n)
    lowest, highest = _liberty_range(board, label, n)
    single = (board == 1) & (lowest[label] == highest[label])  # attacker stones whose chain is in atari
    takes = jnp.where(near & single & (lowest[label] != ko), lowest[label], p)  # that liberty, next to the prey
    take_point = takes.min()
    can_take = (take_point < p) & ~defender_forced
    extend = jnp.where(defender_forced, forced, jnp.argmax(near & (board == 0)))
    options = jnp.stack([extend, jnp.minimum(take_point, p - 1)])  # [2]: extend, take
    b2, l2, ko2 = jax.vmap(lambda y: _play(board, label, y, -1, n))(options)
    libs = jax.vmap(prey_liberties)(b2, l2)
    libs = jnp.where(jnp.stack([extend != ko, can_take]), libs, -1)
    choice = jnp.argmax(libs)  # the first (the extension) on a tie
    after_defence = jnp.where(libs[choice] <= 1, _CAPTURED, jnp.where(libs[choice] >= 3, _ESCAPED, _RUNNING))
    keep = status == _RUNNING
    board, label, ko = jnp.where(keep, b2[choice], board), jnp.where(keep, l2[choice], label), ko2[choice]
    status = jnp.where(keep, after_defence, status)
    return board, label, ko, status, other, tie


def _ladders(board: jax.Array, moves: dict[str, jax.Array], n: int) -> tuple[jax.Array, jax.Array]:
    """[B, P] boards and their move features -> ladder capture and ladder escape planes [B, P] bool.

    Reads: for each legal point m and direction k < 4, a capture read when the neighbour is an opponent chain with
    2 liberties (each chain once per m); for k = 4, an escape read when some own neighbour chain is in atari."""
    batch, p = board.shape
    label, legal = moves["label"], moves["legal"]
    d = jax.vmap(lambda lab: _distinct_neighbour_labels(lab, n))(label)  # [B, P, 4]
    colour = jax.vmap(lambda b: _shifted(b, n, _OFF))(board)
    libs = jnp.take_along_axis(moves["label_liberties"], d.reshape(batch, -1), 1).reshape(d.shape)
    capture_reads = legal[..., None] & (colour == -1) & (d < p) & (libs == 2)
    escape_reads = legal & ((colour == 1) & (d < p) & (libs == 1)).any(-1)
    reads = jnp.concatenate([capture_reads, escape_reads[..., None]], -1).reshape(-1)  # [B * P * 5]
    num_reads = reads.sum()
    order = jnp.nonzero(reads, size=reads.shape[0], fill_value=0)[0]
    nbr = jnp.asarray(_tables(n)["nbr"])
    slots = min(_SLOTS, 8 * batch, reads.shape[0])
    spare = 2 * slots  # forked lines waiting for a slot; a fork that finds the stack full is not read
    max_moves = 4 * n

    def load(read):  # a read's first line: attacker-relative board, labels, prey point, first move, who moves first
        b, m, k = read // (p * 5), (read // 5) % p, read % 5
        escape = k == 4
        start = jnp.where(escape, -board[b], board[b])
        prey_point = jnp.where(escape, m, nbr[m, jnp.minimum(k, 3)])
        return start, label[b], prey_point, m, ~escape

    def cond(carry):
        return (carry["next"] < num_reads) | (carry["top"] > 0) | carry["running"].any()

    def body(carry):
        # free slots take the forked lines waiting (last in, first out), then the next reads
        free = ~carry["running"]
        rank = jnp.cumsum(free) - 1
        popped = jnp.minimum(carry["top"], free.sum())
        from_stack = free & (rank < popped)
        from_reads = free & ~from_stack & (carry["next"] + rank - popped < num_reads)
        read = order[jnp.clip(carry["next"] + rank - popped, 0, reads.shape[0] - 1)]
        fresh = jax.vmap(load)(read)
        line = carry["line"]
        stacked = lax.cond(  # (skipped when no forked line waits, as in most iterations)
            popped > 0,
            lambda: jax.tree.map(lambda x: x[jnp.clip(carry["top"] - 1 - rank, 0, spare - 1)], carry["stack"]),
            lambda: line,
        )

        def pick(new, forked, old):
            return where_rows(from_reads, new, where_rows(from_stack, forked, old))

        fresh_line = {
            "board": fresh[0],
            "label": fresh[1],
            "ko": jnp.full(slots, -1),
            "prey": fresh[2],
            "forced": fresh[3],
            "attack_first": fresh[4],
            "read": read,
            "moves": jnp.zeros(slots, jnp.int32),
            "forks": jnp.full(slots, _FORKS),
        }
        line = jax.tree.map(pick, fresh_line, stacked, line)
        running = carry["running"] | from_stack | from_reads
        # one attacker and one defender move in every slot
        b, lab, ko, status, other, tie = jax.vmap(functools.partial(_ladder_step, n=n))(
            line["board"], line["label"], line["ko"], line["prey"], line["forced"], line["attack_first"]
        )
        # a tie forks a line: the other liberty, from the same position, read later
        fork = running & tie & (line["forks"] > 0)
        forks = line["forks"] - fork
        fork_rank = carry["top"] - popped + jnp.cumsum(fork) - 1
        kept = fork & (fork_rank < spare)
        forked = {**line, "forced": other, "attack_first": jnp.ones(slots, bool), "forks": forks}
        at = jnp.where(kept, fork_rank, spare)
        stack = lax.cond(
            kept.any(),
            lambda: jax.tree.map(lambda s, x: s.at[at].set(x, mode="drop"), carry["stack"], forked),
            lambda: carry["stack"],
        )
        moves_made = line["moves"] + line["attack_first"]
        status = jnp.where((status == _RUNNING) & (moves_made >= max_moves), _CAPTURED, status)
        done = running & (status != _RUNNING)
        captured = carry["captured"].at[jnp.where(done, line["read"], reads.shape[0])].max(status == _CAPTURED)
        line = {
            **line,
            "board": b,
            "label": lab,
            "ko": ko,
            "forced": jnp.full(slots, -1),
            "attack_first": jnp.ones(slots, bool),
            "moves": moves_made,
            "forks": forks,
        }
        return {
            "line": line,
            "running": running & ~done,
            "stack": stack,
            "top": carry["top"] - popped + kept.sum(),
            "next": carry["next"] + free.sum() - popped,
            "captured": captured,
        }

    def lines(count):
        return {
            "board": jnp.zeros((count, p), board.dtype),
            "label": jnp.zeros((count, p), jnp.int32),
            "ko": jnp.full(count, -1),
            "prey": jnp.zeros(count, jnp.int32),
            "forced": jnp.full(count, -1),
            "attack_first": jnp.ones(count, bool),
            "read": jnp.zeros(count, jnp.int32),
            "moves": jnp.zeros(count, jnp.int32),
            "forks": jnp.zeros(count, jnp.int32),
        }

    carry = {
        "line": lines(slots),
        "running": jnp.zeros(slots, bool),
        "stack": lines(spare),
        "top": jnp.int32(0),
        "next": jnp.int32(0),
        "captured": jnp.zeros(reads.shape[0] + 1, bool),
    }
    captured = lax.while_loop(cond, body, carry)["captured"][:-1].reshape(batch, p, 5)
    return captured[..., :4].any(-1), escape_reads & ~captured[..., 4]
