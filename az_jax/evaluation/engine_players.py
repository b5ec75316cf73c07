"""External engines as players: a GTP engine playing pgx Go, a UCI engine playing pgx chess, each a session per
match (az_jax/engines/ runs the processes)."""

from __future__ import annotations

import re

import chess

from az_jax.engines.gtp import GTPEngine
from az_jax.engines.uci import UCIEngine
from az_jax.evaluation.player_types import RESIGN, EnginePlayer, PlayerSpecError
from envs import make_env, records
from envs.notation import go
from envs.notation.chess_moves import action_to_move, move_to_action


# --- GTP (Go) ---------------------------------------------------------------------------------------------------------
def _go_color(state) -> str:
    return "black" if int(state._x.color) == 0 else "white"


class GTPSession:
    """A GTP engine playing one side of pgx Go games (Tromp-Taylor area scoring, board size and komi from the pgx
    env)."""

    def __init__(self, command: list[str], game: str):
        self.engine = GTPEngine(command)
        env = make_env(game)[0]
        self.game, self.size, self.komi = game, int(env._game.size), float(env._game.komi)

    def new_game(self, state) -> None:
        self.engine.boardsize(self.size)
        self.engine.komi(self.komi)
        self.engine.clear_board()

    def observe(self, state, action: int, own: bool) -> None:
        if not own:  # genmove already played the engine's own move on its board
            self.engine.play(_go_color(state), go.action_to_vertex(action, self.size))

    def genmove(self, state) -> int:
        move = self.engine.genmove(_go_color(state))
        if move.lower() == "resign":
            return RESIGN
        return go.vertex_to_action(move, self.size)

    def final_info(self, state) -> dict:
        text = self.engine.final_score()
        return {
            "engine_final_score": text,
            "engine_margin_black": go.parse_score(text),
            "pgx_margin_black": records.go_margin(self.game, state),
        }

    def close(self) -> None:
        self.engine.close()


def gtp_player(command: list[str], game: str, name: str | None = None) -> EnginePlayer:
    if not game.startswith("go_"):
        raise PlayerSpecError(f"GTP engines play Go; {game} is not a Go game")
    label = name or "gtp_" + re.sub(r"[^A-Za-z0-9]+", "_", " ".join(command[:1] + command[1:]).split("/")[-1])[:40]
    return EnginePlayer(label, lambda: GTPSession(list(command), game))


# --- UCI (chess) ------------------------------------------------------------------------------------------------------
class UCISession:
    """A UCI engine playing one side of pgx chess games, on a python-chess board kept in step with pgx."""

    def __init__(self, command: list[str], options: dict, limits: dict):
        self.engine = UCIEngine(command, options=options)
        self.limits = limits
        self.board: chess.Board | None = None  # set by new_game

    def new_game(self, state) -> None:
        self.board = chess.Board()

    def observe(self, state, action: int, own: bool) -> None:
        assert self.board is not None
        self.board.push(action_to_move(action, self.board))

    def genmove(self, state) -> int:
        assert self.board is not None
        move = self.engine.play(self.board, **self.limits)
        return move_to_action(move, self.board)

    def final_info(self, state) -> dict:
        assert self.board is not None
        outcome = self.board.outcome(claim_draw=True)
        return {"python_chess_outcome": outcome.result() if outcome else "*"}

    def close(self) -> None:
        self.engine.close()


def uci_player(command: list[str], game: str, options: dict, limits: dict, name: str) -> EnginePlayer:
    """A UCI engine (`command`, its executable found) with UCI `options`, searching each move within `limits`
    (python-chess's: nodes, time, depth)."""
    if game != "chess":
        raise PlayerSpecError(f"UCI engines play chess here; {game} is not chess")
    return EnginePlayer(name, lambda: UCISession(command, options, limits))
