"""The ladder planes of AlphaGo's features (az_jax/alphago/features.py, Nature 2016 Extended Data Table 2: "ladder
capture", "ladder escape") against a full reference reader, on random positions.

    python -m experiments.alphago.ladder_reference [--positions 256] [--seed 0] [--json FILE]

The reference reads every line, written plainly in Python over a NumPy board, with nothing shared with features.py:

  * ladder capture at m (the player to move attacks): m is legal and a liberty of an opponent chain with exactly 2
    liberties that m puts in atari; the prey is captured if some line captures it;
  * ladder escape at m (the player to move defends): m is the last liberty of an own chain in atari; after m the prey
    escapes if no line captures it;
  * a position met again (the same board, prey and side to move) is read once: its answer is remembered;
  * the defender, prey in atari, tries the extension at its liberty and every capture of an attacker chain in atari
    next to the prey; the attacker, prey with 2 liberties, tries both liberties; a defender move that leaves 3 or more
    liberties escapes, one that leaves 0 or 1 is captured; an attacker move that does not leave the prey in atari
    fails; no ko rule; a line still going after MAX_PLIES plies counts as a capture.

Positions: uniformly random legal play from the empty board (pgx's Go; 100 moves on 19×19, 40 on 9×9), as in the
figures of features.py's docstring. Prints, per size, the points each reader marks and where they differ.
"""

import argparse
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pgx

from az_jax.alphago import features as features_lib
from az_jax.alphago.position import from_pgx

MAX_PLIES = 80
SIZES = {19: 100, 9: 40}  # board size: random moves per position


class Board:
    """n×n points, +1 the attacker's or defender's own side as the caller says, −1 the other, 0 empty."""

    def __init__(self, grid: np.ndarray):
        self.grid = grid
        self.n = grid.shape[0]

    def neighbours(self, p):
        r, c = p
        for q in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= q[0] < self.n and 0 <= q[1] < self.n:
                yield q

    def chain(self, p) -> set:
        colour, seen, todo = self.grid[p], {p}, [p]
        while todo:
            for q in self.neighbours(todo.pop()):
                if q not in seen and self.grid[q] == colour:
                    seen.add(q)
                    todo.append(q)
        return seen

    def liberties(self, chain: set) -> set:
        return {q for p in chain for q in self.neighbours(p) if self.grid[q] == 0}

    def play(self, p, colour: int):
        """The board after `colour` plays p (opponent chains without liberties removed), or None if illegal
        (occupied or suicide)."""
        if self.grid[p] != 0:
            return None
        after = Board(self.grid.copy())
        after.grid[p] = colour
        for q in after.neighbours(p):
            if after.grid[q] == -colour:
                group = after.chain(q)
                if not after.liberties(group):
                    for s in group:
                        after.grid[s] = 0
        if not after.liberties(after.chain(p)):
            return None
        return after


def _defender_moves(board: Board, prey, defender: int) -> list:
    """The extension at the prey's last liberty and every capture of an attacker chain in atari next to the prey."""
    chain = board.chain(prey)
    moves = list(board.liberties(chain))
    for s in chain:
        for q in board.neighbours(s):
            if board.grid[q] == -defender:
                libs = board.liberties(board.chain(q))
                if len(libs) == 1:
                    moves += list(libs)
    return list(dict.fromkeys(moves))


_MEMO: dict = {}  # (to move, board bytes, prey, defender) -> captured: lines that meet again are read once


def _memo(kind: str, board: Board, prey, defender: int, plies: int, read) -> bool:
    key = (kind, board.grid.tobytes(), prey, defender)
    if plies >= MAX_PLIES:
        return True
    if key not in _MEMO:
        _MEMO[key] = read()
    return _MEMO[key]


def captured_defender_to_move(board: Board, prey, defender: int, plies: int) -> bool:
    """The prey (in atari, defender to move) is captured by some line whatever the defender does."""
    return _memo("d", board, prey, defender, plies, lambda: _defender_reads(board, prey, defender, plies))


def captured_attacker_to_move(board: Board, prey, defender: int, plies: int) -> bool:
    """The prey (2 liberties, attacker to move) is captured by some line."""
    return _memo("a", board, prey, defender, plies, lambda: _attacker_reads(board, prey, defender, plies))


def _defender_reads(board: Board, prey, defender: int, plies: int) -> bool:
    for m in _defender_moves(board, prey, defender):
        after = board.play(m, defender)
        if after is None:
            continue
        libs = len(after.liberties(after.chain(prey)))
        if libs >= 3:
            return False
        if libs == 2 and not captured_attacker_to_move(after, prey, defender, plies + 1):
            return False
    return True


def _attacker_reads(board: Board, prey, defender: int, plies: int) -> bool:
    for x in sorted(board.liberties(board.chain(prey))):
        after = board.play(x, -defender)
        if after is None or after.grid[prey] != defender:
            continue
        libs = len(after.liberties(after.chain(prey)))
        if libs == 0:
            return True
        if libs == 1 and captured_defender_to_move(after, prey, defender, plies + 1):
            return True
    return False


def reference_planes(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ladder capture, ladder escape) [n, n] bool of a board signed for the player to move (+1 own)."""
    board = Board(grid)
    _MEMO.clear()
    n = board.n
    capture = np.zeros((n, n), bool)
    escape = np.zeros((n, n), bool)
    for m in zip(*np.nonzero(grid == 0)):
        m = (int(m[0]), int(m[1]))
        after = board.play(m, 1)
        if after is None:
            continue
        # capture: an opponent chain next to m with 2 liberties, in atari after m
        for q in board.neighbours(m):
            if board.grid[q] == -1 and len(board.liberties(board.chain(q))) == 2 and after.grid[q] == -1:
                if len(after.liberties(after.chain(q))) == 1 and captured_defender_to_move(after, q, -1, 1):
                    capture[m] = True
        # escape: an own chain in atari whose last liberty is m
        preys = [q for q in board.neighbours(m) if board.grid[q] == 1 and board.liberties(board.chain(q)) == {m}]
        if preys:
            libs = len(after.liberties(after.chain(m)))
            if libs >= 3 or (libs == 2 and not captured_attacker_to_move(after, m, 1, 1)):
                escape[m] = True
    return capture, escape


def random_positions(size: int, moves: int, count: int, seed: int):
    """`count` pgx Go states after `moves` uniformly random legal moves each (a game that ends sooner stops there)."""
    env = pgx.make(f"go_{size}x{size}")
    init, step = jax.jit(jax.vmap(env.init)), jax.jit(jax.vmap(env.step))
    key, sub = jax.random.split(jax.random.key(seed))
    state = init(jax.random.split(sub, count))
    for _ in range(moves):  # a point other than pass while there is one, so positions fill up as the moves say
        key, sub = jax.random.split(key)
        board_points = state.legal_action_mask.at[:, size * size].set(False)
        choices = jnp.where(board_points.any(-1, keepdims=True), board_points, state.legal_action_mask)
        action = jax.random.categorical(sub, jnp.where(choices, 0.0, -jnp.inf))
        state = step(state, jnp.where(state.terminated, size * size, action))
    return state


def compare(size: int, moves: int, count: int, seed: int) -> dict:
    state = random_positions(size, moves, count, seed)
    position = from_pgx(state)
    planes = np.asarray(features_lib.features(position, 48))
    ours_capture = planes[..., features_lib.PLANE_SLICES["ladder_capture"]][..., 0] > 0
    ours_escape = planes[..., features_lib.PLANE_SLICES["ladder_escape"]][..., 0] > 0
    grids = np.asarray(position.board).reshape(count, size, size)
    result = {"size": size, "random_moves": moves, "positions": count, "seed": seed, "max_plies": MAX_PLIES}
    totals = {k: 0 for k in ("capture_ours", "capture_reference", "capture_extra", "capture_missed")}
    totals.update({k.replace("capture", "escape"): 0 for k in totals})
    for i in range(count):
        ref_capture, ref_escape = reference_planes(grids[i].astype(np.int8))
        for name, ours, ref in (("capture", ours_capture[i], ref_capture), ("escape", ours_escape[i], ref_escape)):
            totals[f"{name}_ours"] += int(ours.sum())
            totals[f"{name}_reference"] += int(ref.sum())
            totals[f"{name}_extra"] += int((ours & ~ref).sum())
            totals[f"{name}_missed"] += int((ref & ~ours).sum())
    return {**result, **totals}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    rows = []
    for size, moves in SIZES.items():
        row = compare(size, moves, args.positions, args.seed)
        rows.append(row)
        for name in ("capture", "escape"):
            print(
                f"{size}x{size}, {args.positions} positions of {moves} random moves: ladder {name} "
                f"features.py {row[f'{name}_ours']}, reference {row[f'{name}_reference']} "
                f"({row[f'{name}_extra']} extra, {row[f'{name}_missed']} missed)"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
