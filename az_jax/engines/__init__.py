"""Clients of external game engines, each a subprocess behind a deadline: GTP for Go (`az_jax.engines.gtp`, e.g. GNU
Go) and UCI for chess (`az_jax.engines.uci`, e.g. Stockfish). Every failure is an `EngineError` with a one-line
message. Each engine leads its own process group, which is ended on every exit path (`az_jax.engines.process`)."""

from az_jax.engines.errors import EngineCrashed, EngineError, EngineProtocolError, EngineTimeout

__all__ = ["EngineCrashed", "EngineError", "EngineProtocolError", "EngineTimeout"]
