"""The errors of the external-engine clients (az_jax/engines/gtp.py, az_jax/engines/uci.py): one hierarchy under
`EngineError`, so evaluation code catches every engine failure with one except clause."""


class EngineError(RuntimeError):
    """Base class of every error raised by an external-engine client (GTP or UCI)."""


class EngineTimeout(EngineError):
    """The engine did not reply within the deadline; it has been killed."""


class EngineCrashed(EngineError):
    """The engine process exited, closed its output, or cannot be written to."""


class EngineProtocolError(EngineError):
    """The engine sent something that is not a valid reply (or not a valid move)."""
