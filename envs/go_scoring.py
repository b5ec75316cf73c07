"""Go's final ownership and score margin under area scoring, per player: the targets of KataGo's auxiliary ownership
and score heads (Wu, "Accelerating Self-Play Learning in Go", 2019, section "Auxiliary Ownership and Score Targets").

Area scoring as pgx scores Go (Tromp-Taylor, komi 7.5 for White): a point belongs to a colour when that colour's stone
stands on it, or when it is empty and every empty region path from it reaches stones of that colour only. Empty points
that reach both colours (or neither: the empty board) belong to nobody. Every stone on the board counts as alive, so
the ownership is of the final position as the rules score it, dead stones included.

    ownership  [P] ∈ {−1, 0, +1}, +1 where the player owns the point
    margin     the player's area − the opponent's area, komi counted (Black: − komi, White: + komi)

pgx counts an empty region that reaches no stone for both colours (pgx/_src/games/go.py, `_count_ji`); those points
cancel in the difference, so sign(margin) is pgx's result whenever the game was scored (not ended by superko).
"""

import jax
import jax.numpy as jnp

KOMI = 7.5  # pgx.make("go_9x9") and pgx.make("go_19x19"): Go(komi=7.5)


def _neighbours(x: jax.Array) -> jax.Array:
    """x [n, n] bool -> [n, n] bool: some orthogonal neighbour is True (off-board counts as False)."""
    pad = jnp.pad(x, 1)
    return pad[:-2, 1:-1] | pad[2:, 1:-1] | pad[1:-1, :-2] | pad[1:-1, 2:]


def _reach(stones: jax.Array, empty: jax.Array) -> jax.Array:
    """[n, n] bool: the stones, and every empty point connected to one of them through empty points."""

    def spread(carry):
        reach, _ = carry
        grown = reach | (empty & _neighbours(reach))
        return grown, (grown != reach).any()

    reach, _ = jax.lax.while_loop(lambda carry: carry[1], spread, (stones, jnp.bool_(True)))
    return reach


def black_ownership(board: jax.Array) -> jax.Array:
    """board [P] (pgx: > 0 black, < 0 white, 0 empty; P = n²) -> [P] int32: +1 Black's, −1 White's, 0 nobody's."""
    n = round(board.shape[-1] ** 0.5)
    board = board.reshape(n, n)
    black, white, empty = board > 0, board < 0, board == 0
    by_black, by_white = _reach(black, empty), _reach(white, empty)
    owner = jnp.where(by_black & ~by_white, 1, 0) - jnp.where(by_white & ~by_black, 1, 0)
    return owner.reshape(-1).astype(jnp.int32)


def final_targets(state, komi: float = KOMI) -> tuple[jax.Array, jax.Array]:
    """One pgx Go state (unbatched) -> (ownership [2, P] float32, margin [2] float32), row p from the point of view of
    pgx player id p. pgx's `_player_order` maps colour to player id (current_player = _player_order[colour]) and is one
    of [0, 1], [1, 0], its own inverse: player p plays colour _player_order[p] (0 Black, 1 White)."""
    owner = black_ownership(state._x.board).astype(jnp.float32)  # [P], Black's view
    margin = owner.sum() - komi  # Black's area − White's area − komi
    sign = 1.0 - 2.0 * state._player_order.astype(jnp.float32)  # [2]: +1 for the player with Black
    return sign[:, None] * owner[None, :], sign * margin


def mover_margin(state, komi: float = KOMI) -> jax.Array:
    """One pgx Go state (unbatched) -> [] float32: the player to move's area margin (komi counted) were the game to end
    in this position, as two passes would end it. pgx's `color` is 0 when Black is to move."""
    margin = black_ownership(state._x.board).sum().astype(jnp.float32) - komi  # Black's view
    return jnp.where(state._x.color == 0, margin, -margin)


def opponent_passed(state) -> jax.Array:
    """One pgx Go state (unbatched) -> [] bool: the last move was a pass, so a pass now ends the game."""
    return state._x.consecutive_pass_count == 1


def checked_pass(state, choice: jax.Array, best_other: jax.Array) -> jax.Array:
    """Greedy play's move after the rules' own verdict on passing (not in the papers): the search's `choice` [] unless
    a pass decides the game on the spot. After the opponent's pass, passing ends the game, so the mover passes when
    the area count is already its win. A pass by the mover lets the opponent end the game by passing back, so the
    mover does not pass while the count is its loss and it has another move (`best_other` [], the search's best move
    other than pass, or pass where there is none). Against an opponent that passes with stones left in the mover's
    area (GNU Go does, expecting them to be called dead), a network that misjudges their life passes back and loses
    by the rules' count a game that it leads."""
    pass_action = state.legal_action_mask.shape[-1] - 1
    margin = mover_margin(state)
    choice = jnp.where(opponent_passed(state) & (margin > 0), pass_action, choice)
    return jnp.where((choice == pass_action) & (margin < 0), best_other, choice)
