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
