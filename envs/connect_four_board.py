"""Connect four's final board as an auxiliary target: KataGo's ownership head (Wu, "Accelerating Self-Play Learning in
Go", 2019, section "Auxiliary Ownership and Score Targets") carried over to a game with no territory. Each position
learns, from its mover's point of view, whose stone stands on each cell when the game ends:

    ownership  [42] ∈ {−1, 0, +1}: +1 the player's stone, −1 the opponent's, 0 still empty (a won game ends early)

Connect four has no score, so the margin is 0 and the score head is refused for it (GameSpec.final_margin). NOT IN THE
PAPERS: neither AlphaZero nor KataGo trains connect four this way; the per-cell target is a dense signal of which
threats the game went on to fill, where z is one number per game.

pgx's connect four (pgx/_src/games/connect_four.py) keeps `_x.board` [42], row-major from the top row, −1 for an empty
cell and 0 / 1 for the colour that moved first / second; `_x.color` is the colour to move and `current_player` its pgx
player id, so player p plays `_x.color` when p is `current_player` and the other colour otherwise."""

import jax
import jax.numpy as jnp


def final_targets(state) -> tuple[jax.Array, jax.Array]:
    """One pgx connect four state (unbatched) -> (ownership [2, 42] float32, margin [2] float32 zeros), row p from
    the point of view of pgx player id p."""
    board = state._x.board  # [42] int32 in {−1, 0, 1}
    players = jnp.arange(2)
    colour = jnp.where(players == state.current_player, state._x.color, 1 - state._x.color)  # [2]
    own = (board[None, :] == colour[:, None]).astype(jnp.float32)  # [2, 42]
    theirs = (board[None, :] == 1 - colour[:, None]).astype(jnp.float32)
    return own - theirs, jnp.zeros(2, jnp.float32)
