"""Connect four against an exact solver: a set of positions from plausible play, every move of each labelled by the
solver, and the share of positions in which a player's move keeps the game-theoretic value.

The solver is BitBully (`bitbully` on PyPI: negamax/MTD(f) with an opening book). Its score of a move is positive when
the move wins for the player making it (larger: sooner), 0 when it draws, negative when it loses. A move is *optimal*
when it keeps the position's value: its score has the sign of the best move's score (win, draw or loss; winning more
slowly is not a mistake). `tests/test_solver_benchmark.py` checks the solver's signs against a brute-force negamax
on late positions.

The position set (`generate`): games played by a noisy strong player — each move keeps the value with probability
`p_good` (uniformly among the value-keeping moves), else it is uniformly random — cut at a depth drawn uniformly in
[0, max_depth), deduplicated, keeping only positions where some legal move is a mistake (a lost position, where every
move loses, tests nothing). Stored as JSON lines, one position a line:
{"moves": "3324…", "scores": [7 × score|null]}.
Columns are 0–6 from the left in both pgx and BitBully.
"""

import json
import os
from typing import NamedTuple

import bitbully
import jax
import numpy as np
import pgx

from az_jax.evaluation import positions as positions_lib

NUM_COLUMNS = 6 + 1
FULL = -100  # stands for a full column's score (no move)
# The held-out set of 1,000 positions (experiments/strength/connect_four_positions.py made it), in the repository
DEFAULT_POSITIONS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "experiments",
    "data",
    "connect_four_positions.jsonl",
)


def solver():
    """A BitBully solver with its opening book."""
    return bitbully.BitBully()


def score_moves(agent, moves: list[int]) -> np.ndarray:
    """[7] int the solver's score of each column after `moves`, FULL for a full column."""
    scores = agent.score_all_moves(bitbully.Board.from_moves(list(moves)))
    return np.array([scores.get(c, FULL) for c in range(NUM_COLUMNS)], np.int32)


def optimal_mask(scores: np.ndarray) -> np.ndarray:
    """[..., 7] bool: the legal moves whose score has the sign of the best score."""
    legal = scores != FULL
    signs = np.where(legal, np.sign(scores), -2)
    return legal & (signs == signs.max(axis=-1, keepdims=True))


def position_value(scores: np.ndarray) -> np.ndarray:
    """[...] int the mover's value with perfect play: +1 won, 0 drawn, −1 lost."""
    return np.sign(np.where(scores != FULL, scores, -1000).max(axis=-1))


class PositionSet(NamedTuple):
    moves: np.ndarray  # [P, 42] int32 pgx actions from the start, −1 padded
    scores: np.ndarray  # [P, 7] int32 the solver's score of each move, FULL where the column is full

    @property
    def optimal(self) -> np.ndarray:
        return optimal_mask(self.scores)  # [P, 7]

    @property
    def value(self) -> np.ndarray:
        return position_value(self.scores)  # [P]

    @property
    def depth(self) -> np.ndarray:
        return (self.moves >= 0).sum(axis=1)  # [P] stones on the board


def generate(num_positions: int, seed: int = 0, max_depth: int = 36, p_good: float = 0.8) -> PositionSet:
    """Plays and labels positions (see the module docstring); deterministic for a seed and the solver's answers."""
    agent, rng = solver(), np.random.default_rng(seed)
    rows: list[list[int]]
    seen, rows, scores = set(), [], []
    while len(rows) < num_positions:
        moves: list[int]
        depth, board, moves = int(rng.integers(0, max_depth)), bitbully.Board(), []
        while len(moves) < depth and not board.is_game_over():
            s = score_moves(agent, moves)
            choices = np.flatnonzero(optimal_mask(s) if rng.random() < p_good else s != FULL)
            move = int(rng.choice(choices))
            board.play(move)
            moves.append(move)
        key = "".join(map(str, moves))
        if board.is_game_over() or key in seen:
            continue
        s = score_moves(agent, moves)
        if optimal_mask(s).sum() == (s != FULL).sum():
            continue  # no move is a mistake here
        seen.add(key)
        rows.append(moves)
        scores.append(s)
    return PositionSet(moves=_pad(rows), scores=np.stack(scores))


def _pad(rows: list[list[int]]) -> np.ndarray:
    """Move lists -> [P, 42] int32, −1 padded."""
    padded = np.full((len(rows), 6 * NUM_COLUMNS), -1, np.int32)
    for i, moves in enumerate(rows):
        padded[i, : len(moves)] = moves
    return padded


def save(path: str, positions: PositionSet) -> None:
    with open(path, "w") as f:
        for moves, scores in zip(positions.moves, positions.scores):
            f.write(
                json.dumps(
                    {
                        "moves": "".join(str(m) for m in moves if m >= 0),
                        "scores": [None if s == FULL else int(s) for s in scores],
                    }
                )
                + "\n"
            )


def load(path: str) -> PositionSet:
    rows, scores = [], []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                item = json.loads(line)
                moves = [int(c) for c in item["moves"]]
                score = [FULL if s is None else int(s) for s in item["scores"]]
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{number}: not a position line ({e})") from None
            if len(score) != NUM_COLUMNS or any(not 0 <= m < NUM_COLUMNS for m in moves):
                raise ValueError(f"{path}:{number}: expected 7 scores and columns 0-6")
            rows.append(moves)
            scores.append(score)
    return PositionSet(moves=_pad(rows), scores=np.array(scores, np.int32))


def evaluate(player, positions: PositionSet, rng_key: jax.Array, batch_size: int = 256) -> positions_lib.Result:
    """`player` (states [n, ...], key) -> actions [n] on every position, in batches of `batch_size`. The key is
    consumed."""
    return positions_lib.evaluate(
        player, pgx.make("connect_four"), positions.moves, positions.optimal, positions.value, rng_key, batch_size
    )
