"""Clients of external game engines, each a subprocess behind a deadline: GTP for Go (`az_jax.engines.gtp`, e.g. GNU
Go) and UCI for chess (`az_jax.engines.uci`, e.g. Stockfish). Every failure is an `EngineError`."""

from az_jax.engines.errors import EngineCrashed, EngineError, EngineProtocolError, EngineTimeout

__all__ = ["EngineCrashed", "EngineError", "EngineProtocolError", "EngineTimeout"]
