"""The UCI engine's positions (mixed into UciEngine, az_jax/frontends/uci_engine.py): pgx chess states from FENs
and moves, and `UciPosition`, which brings the engine's TreeSearch to the position of the last `position` command
(continuing its tree when the new position follows the old one). uci_engine.py's docstring states the decisions
(FEN validation, pgx's ended games, tree reuse).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import chess
import jax
import jax.numpy as jnp
import numpy as np

from az_jax.frontends import uci_protocol as protocol
from az_jax.frontends.tree_search import TreeSearch
from envs.notation import chess_moves as cm


# --- pgx states -------------------------------------------------------------------------------------------------------
@functools.cache
def _step(env):
    return jax.jit(env.step)


@functools.cache
def _start(env):
    return jax.jit(env.init)(jax.random.key(0))


@functools.cache
def _finish_fen_state():
    """A jitted function: pgx chess's game state fields (in pgx's layout, see `_fen_state`) -> the pgx `State`.

    What pgx.experimental.chess.from_fen does after parsing, with two differences: one compiled program (from_fen
    makes new jitted functions on every call: 0.4 s a position on a CPU), and a history of the position alone, as
    pgx's own start has (from_fen keeps its default history, the standard start position: an earlier board in the
    observation, and its hash counted as seen once)."""
    from pgx._src.games.chess import Game, GameState, _legal_action_mask, _zobrist_hash  # local: JAX arrays at import
    from pgx.chess import State

    game = Game()

    def finish(board, color, castling_rights, en_passant, halfmove_count, fullmove_count):
        x = GameState(
            board=board,
            color=color,
            castling_rights=castling_rights,
            en_passant=en_passant,
            halfmove_count=halfmove_count,
            fullmove_count=fullmove_count,
        )
        x = x._replace(legal_action_mask=_legal_action_mask(x))
        x = x._replace(
            board_history=jnp.zeros_like(x.board_history).at[0].set(x.board),
            hash_history=jnp.zeros_like(x.hash_history).at[0].set(_zobrist_hash(x)),
        )
        order = jnp.int32([0, 1])  # player 0 plays White
        return State(
            _player_order=order,
            _x=x,
            current_player=order[x.color],
            legal_action_mask=x.legal_action_mask,
            terminated=game.is_terminal(x),
            rewards=game.rewards(x)[order],
            observation=game.observe(x, x.color),
        )

    return jax.jit(finish)


def _fen_state(board: chess.Board):
    """The pgx chess state of `board`'s position, with no history (pgx.experimental.chess.from_fen's layout: square
    file·8 + rank and the pieces seen from the side to move, ranks mirrored and signs swapped for Black; castling
    rights [mover, opponent] × [queen side, king side]; the en passant square in the mover's view, only when an en
    passant capture is legal, as python-chess writes FENs). The halfmove clock is clamped to 100 (pgx ends its game
    there either way), the move number to 10⁶ (int32 fields)."""
    white = board.turn == chess.WHITE
    squares = np.zeros(64, np.int32)
    for square, piece in board.piece_map().items():
        rank = chess.square_rank(square) if white else 7 - chess.square_rank(square)
        squares[chess.square_file(square) * 8 + rank] = piece.piece_type * (1 if piece.color == board.turn else -1)
    rights = [
        [board.has_queenside_castling_rights(color), board.has_kingside_castling_rights(color)]
        for color in (board.turn, not board.turn)
    ]
    ep = -1
    if board.ep_square is not None and board.has_legal_en_passant():
        rank = chess.square_rank(board.ep_square)
        ep = chess.square_file(board.ep_square) * 8 + (rank if white else 7 - rank)
    return _finish_fen_state()(
        squares,
        np.int32(0 if white else 1),
        np.array(rights, bool),
        np.int32(ep),
        np.int32(min(board.halfmove_clock, 100)),
        np.int32(min(board.fullmove_number, 1_000_000)),
    )


def _legal_actions(state) -> frozenset[int]:
    return frozenset(int(a) for a in np.flatnonzero(np.asarray(state.legal_action_mask)))


class UciPosition:
    """The engine's `position` and the tree brought to it (a mixin of UciEngine, which sets these attributes)."""

    position: protocol.Position  # the last `position` command's
    _synced: protocol.Position | None  # the position the tree is at (None: rebuild it before using it)
    env: Any  # the agent's pgx env

    if TYPE_CHECKING:  # UciEngine's

        @property
        def _tree(self) -> TreeSearch: ...

        def note(self, message: str) -> None: ...

    def _board(self, position: protocol.Position | None = None) -> chess.Board:
        position = position or self.position
        board = chess.Board(position.root)
        for move in position.moves:
            board.push(move)
        return board

    def _state(self):
        """The tree's (unbatched) pgx state."""
        assert self._tree.state is not None, "the tree has not been reset"
        return self._tree.state

    def _sync(self) -> None:
        """Brings the tree to `self.position`: the same tree with 0, 1 or 2 moves played on, or a fresh one.
        PositionError if pgx does not reach the position or its legal moves there differ from python-chess's."""
        new, old = self.position, self._synced
        self._synced = None  # until this has succeeded
        stepped = False  # pgx stepped to the tree's state in this call (an ended game it steps into is handled below)
        extra = len(new.moves) - len(old.moves) if old is not None else -1
        if old is not None and new.root == old.root and 0 <= extra <= 2 and new.moves[: len(old.moves)] == old.moves:
            board = self._board(old)
            for move in new.moves[len(old.moves) :]:
                action = cm.move_to_action(move, board)
                if action not in _legal_actions(self._state()):
                    raise protocol.PositionError(f"pgx does not allow {move.uci()} in {board.fen()}")
                self._tree.play(action)
                board.push(move)
                stepped = True
        else:
            board = chess.Board(new.root)
            state = _start(self.env) if new.root == chess.STARTING_FEN else _fen_state(board)
            for move in new.moves:
                action = cm.move_to_action(move, board)
                if action not in _legal_actions(state):
                    raise protocol.PositionError(f"pgx does not allow {move.uci()} in {board.fen()}")
                state = _step(self.env)(state, jnp.int32(action))
                board.push(move)
                stepped = True
            self._tree.reset(state)
        legal = cm.legal_action_set(board)
        if legal and stepped and bool(self._state().terminated):
            # pgx has ended the game where chess goes on: its 512-ply cap, or 50 moves without progress, a threefold
            # repetition or too little material, which chess lets a player claim (or ends later). A pgx step into
            # such an end marks all 4,672 actions legal; pgx's FEN reader computes the position's real moves.
            self.note(
                "pgx's rules have ended this game (512 plies, 50 moves, repetition or material): the tree "
                "restarts from the position's FEN"
            )
            self._tree.reset(_fen_state(board))
        if (_legal_actions(self._state()) != legal) if legal else not bool(self._state().terminated):
            raise protocol.PositionError(f"pgx's legal moves differ from those of chess in {board.fen()}")
        self._synced = new
