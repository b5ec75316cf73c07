"""The tic-tac-toe oracle: its position set and minimax values checked against facts that can be worked out by hand."""

import jax
import numpy as np
import pgx

from az_jax.core import arena
from az_jax.evaluation import tic_tac_toe_oracle as oracle
from az_jax.evaluation.positions import states_from_moves

E = -1  # empty cell; 0 = X (first mover), 1 = O


def test_reachable_positions_and_their_values():
    solved = oracle.positions()
    # 5,478 boards are reachable from the empty board (the well-known count); 958 of them end the game (a line, or
    # nine marks), which leaves 4,520 with a move to make. The search below reaches all 5,478.
    assert len(solved.boards) == oracle.NUM_NON_TERMINAL == 4520
    all_boards, frontier = set(), {(E,) * 9}
    while frontier:
        all_boards |= frontier
        frontier = {oracle.play(b, i) for b in frontier if not oracle.is_terminal(b) for i in range(9) if b[i] < 0}
    assert len(all_boards) == oracle.NUM_REACHABLE == 5478
    # The empty board is a draw, and every first move keeps it drawn (each has a drawing reply: a corner or the
    # centre answered by the centre or a corner).
    assert oracle.value((E,) * 9) == 0
    assert oracle.optimal_moves((E,) * 9).all()
    # X centre, O edge (cell 1): X wins. X 6 threatens 2 (line 2-4-6); O must take 2, which threatens 0 (0-1-2); X
    # takes 0 and now threatens both 3 (0-3-6) and 8 (0-4-8).
    assert oracle.value((E, 1, E, E, 0, E, E, E, E)) == 1
    # X centre, O corner (cell 0): a draw.
    assert oracle.value((1, E, E, E, 0, E, E, E, E)) == 0
    # X holds 6 and 7, O holds the centre, O to move: every move but the block at 8 lets X complete 6-7-8 (and the
    # block draws: O's reply threat on 0 (0-4-8) keeps X busy).
    board = (E, E, E, E, 1, E, 0, 0, E)
    assert oracle.mover(board) == 1
    np.testing.assert_array_equal(np.flatnonzero(oracle.optimal_moves(board)), [8])
    # X holds 0, 2, 4 and O holds 3, 7, O to move: X threatens 1 (0-1-2), 8 (0-4-8) and 6 (2-4-6), O has no line
    # to complete, so O loses whatever it plays, and every legal move keeps that value.
    lost = (0, E, 0, 1, 0, E, E, 1, E)
    assert oracle.mover(lost) == 1 and oracle.value(lost) == -1
    np.testing.assert_array_equal(oracle.optimal_moves(lost), np.array(lost) < 0)


def test_states_are_the_boards_and_perfect_play_draws():
    env = pgx.make("tic_tac_toe")
    solved = oracle.positions()
    states = states_from_moves(env, solved.moves)
    np.testing.assert_array_equal(np.asarray(states._x.board), solved.boards)
    assert not np.asarray(states.terminated).any()
    # The perfect player is perfect on every position, uniform random is not (it keeps the value in about half).
    assert oracle.check(oracle.perfect_player, jax.random.key(0)).summary()["mistakes"] == 0
    random = oracle.check(arena.uniform_random_player, jax.random.key(1)).summary()
    assert 0.4 < random["optimal"] < 0.8
    # Perfect against perfect: every game a draw.
    results = jax.jit(lambda key: arena.play_match(env, oracle.perfect_player, oracle.perfect_player, key, 32, 9))(
        jax.random.key(2)
    )
    np.testing.assert_array_equal(np.asarray(results), 0.0)
