"""Games for az_jax: a registry over pgx's two-player perfect-information environments."""
from envs.registry import GAMES, GameSpec, UnknownGameError, game_names, get_game, make_env

__all__ = ["GAMES", "GameSpec", "UnknownGameError", "game_names", "get_game", "make_env"]
