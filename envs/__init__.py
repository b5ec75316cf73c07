"""Games for az_jax: a registry over pgx's two-player perfect-information environments."""

from envs.registry import GAMES, GameSpec, UnknownGameError, game_names, get_game, make_env
from envs.state import is_over

__all__ = ["GAMES", "GameSpec", "UnknownGameError", "game_names", "get_game", "is_over", "make_env"]
