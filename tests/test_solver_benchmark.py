"""The connect-four solver benchmark: BitBully's move values against a brute-force negamax on late positions, the
optimal-move rule on hand-made score rows, and the benchmark's bookkeeping on a player that is known to be perfect."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

from az_jax.core.devices import make_mesh
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.evaluation import connect_four_solver as solver_lib
from az_jax.evaluation.in_training import solver_probe
from az_jax.evaluation.positions import states_from_moves
from az_jax.runtime.trainer import Trainer

from conftest import TINY_NETWORK, tiny_variables

ROWS, COLS = 6, 7


def _wins(grid, row, col, mark) -> bool:
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLS and grid[r][c] == mark:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def _drop(grid, col, mark):
    """(new grid, row) with `mark` dropped in `col`; grid rows count from the bottom."""
    row = next(r for r in range(ROWS) if grid[r][col] == 0)
    new = [list(r) for r in grid]
    new[row][col] = mark
    return tuple(tuple(r) for r in new), row


@functools.cache
def _negamax(grid, mark) -> int:
    """Value (+1, 0, −1) for `mark` to move, by full search (no pruning)."""
    best = None
    for col in range(COLS):
        if grid[ROWS - 1][col] == 0:
            child, row = _drop(grid, col, mark)
            value = 1 if _wins(child, row, col, mark) else -_negamax(child, 3 - mark)
            best = value if best is None else max(best, value)
    return 0 if best is None else best


def _late_position(rng, stones: int):
    """Moves of a random game that is still going after `stones` stones."""
    while True:
        grid, moves, mark = tuple((0,) * COLS for _ in range(ROWS)), [], 1
        for _ in range(stones):
            col = int(rng.choice([c for c in range(COLS) if grid[ROWS - 1][c] == 0]))
            grid, row = _drop(grid, col, mark)
            moves.append(col)
            if _wins(grid, row, col, mark):
                break
            mark = 3 - mark
        else:
            return moves, grid, mark


def test_solver_signs_match_brute_force_on_late_positions():
    rng = np.random.default_rng(0)
    agent = solver_lib.solver()
    checked = set()
    for stones in [34] * 12 + [32] * 4:  # 8 or 10 empty cells: the full tree is small enough for plain Python
        moves, grid, mark = _late_position(rng, stones)
        scores = solver_lib.score_moves(agent, moves)
        for col in range(COLS):
            if grid[ROWS - 1][col]:
                assert scores[col] == solver_lib.FULL
                continue
            child, row = _drop(grid, col, mark)
            value = 1 if _wins(child, row, col, mark) else -_negamax(child, 3 - mark)
            assert np.sign(scores[col]) == value, (moves, col, scores)
            checked.add(value)
    assert checked == {-1, 0, 1}  # wins, draws and losses were all compared


def test_optimal_moves_keep_the_sign_of_the_best_score():
    F = solver_lib.FULL
    scores = np.array(
        [
            [3, 5, -2, 0, F, -7, 1],  # won: every winning move is optimal, however slow
            [0, -1, 0, -4, F, F, -1],  # drawn: the drawing moves
            [-3, -1, -2, F, -8, -5, -4],
        ]
    )  # lost: every legal move
    np.testing.assert_array_equal(
        solver_lib.optimal_mask(scores), [[1, 1, 0, 0, 0, 0, 1], [1, 0, 1, 0, 0, 0, 0], [1, 1, 1, 0, 1, 1, 1]]
    )
    np.testing.assert_array_equal(solver_lib.position_value(scores), [1, 0, -1])


def test_benchmark_scores_a_player_by_the_solver_labels(tmp_path):
    positions = solver_lib.generate(6, seed=3, max_depth=10)
    path = tmp_path / "positions.jsonl"
    solver_lib.save(str(path), positions)
    loaded = solver_lib.load(str(path))
    np.testing.assert_array_equal(loaded.moves, positions.moves)
    np.testing.assert_array_equal(loaded.scores, positions.scores)
    # Every stored position has a mistake to make, and its moves replay to a game in progress.
    assert (positions.optimal.sum(1) < (positions.scores != solver_lib.FULL).sum(1)).all()
    # A player that looks each position up in the labels plays optimally everywhere; one that plays the first
    # non-optimal legal move never does. Batches of 4: two batches, the second padded.
    env = pgx.make("connect_four")
    boards = states_from_moves(env, positions.moves)._x.board.reshape(len(positions.moves), -1)  # [P, 42]
    legal = positions.scores != solver_lib.FULL
    best = jnp.asarray(np.argmax(positions.optimal, axis=1))
    worst = jnp.asarray(np.argmax(~positions.optimal & legal, axis=1))

    def labelled(choice):
        def player(states, key):
            match = jnp.all(states._x.board.reshape(states._x.board.shape[0], 1, -1) == boards[None], axis=-1)
            return choice[jnp.argmax(match, axis=1)]  # [n]

        return player

    perfect = solver_lib.evaluate(labelled(best), positions, jax.random.key(0), batch_size=4)
    np.testing.assert_array_equal(perfect.action, best)
    assert perfect.summary()["optimal"] == 1.0
    assert solver_lib.evaluate(labelled(worst), positions, jax.random.key(0), batch_size=4).summary()["optimal"] == 0.0


def test_a_malformed_position_file_is_one_clear_error(tmp_path):
    path = tmp_path / "positions.jsonl"
    path.write_text(
        '{"moves": "33", "scores": [0, 0, 0, 1, 0, 0, 0]}\n{"moves": "39", "scores": [0, 0, 0, 1, 0, 0, 0]}\n'
    )
    with pytest.raises(ValueError, match=r"positions.jsonl:2: expected 7 scores and columns 0-6"):
        solver_lib.load(str(path))
    path.write_text("not json\n")
    with pytest.raises(ValueError, match=r"positions.jsonl:1: not a position line"):
        solver_lib.load(str(path))


def test_in_training_probe_scores_raw_and_search_moves_and_drops_the_padding(two_devices, fast_compiles):
    """`eval_solver_simulations`' probe on 3 hand-labelled positions, sharded over 2 devices (padded to 4 with a copy
    of the first). The network is all zeros: uniform prior, value 0. Its raw move is the argmax of equal logits, the
    first legal column 0; its 8-simulation search finds an immediate win, whose terminal reward is +1 against 0.

    * "656565": the first player has three stones in column 6 and wins there; only 6 is labelled optimal. Raw plays
      0 (wrong), search plays 6 (right).
    * "": every column labelled a draw (score 0), so every move is optimal: both right, and it is the one drawn row.
    * "656565" again.

    Raw: 1 of 3 = 0.333 (with the padding row counted it would be 1 of 4). Search: 3 of 3. Drawn, search: 1 of 1."""
    win_in_6 = [1 if c == 6 else -1 for c in range(7)]
    positions = solver_lib.PositionSet(
        moves=solver_lib._pad([[6, 5, 6, 5, 6, 5], [], [6, 5, 6, 5, 6, 5]]),
        scores=np.array([win_in_6, [0] * 7, win_in_6], np.int32),
    )
    config = override(preset("connect_four", "small"), TINY_NETWORK)
    trainer = Trainer(config, make_mesh(two_devices))
    obs = jnp.zeros((1, *trainer.setup.env.observation_shape), jnp.float32)
    variables = tiny_variables(trainer.setup.network, obs, zero=True)
    metrics = solver_probe(trainer, positions, num_simulations=8)(variables, jax.random.key(0))
    assert metrics["eval/solver_raw"] == pytest.approx(1 / 3)
    assert metrics["eval/solver_search"] == 1.0
    assert metrics["eval/solver_search_drawn"] == 1.0
