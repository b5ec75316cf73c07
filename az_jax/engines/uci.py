"""A UCI client for chess engines (Stockfish, ...) through python-chess.

Moves are `chess.Move`s on a `chess.Board`; pgx chess actions convert to and from them with
`envs.notation.chess_moves` (`action_to_move`, `move_to_action`, `pgx_state_to_board`).

Engine errors are those of az_jax/engines/errors.py (`EngineCrashed`, `EngineTimeout`,
`EngineProtocolError`, base `EngineError`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shlex
import signal
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import chess
import chess.engine

from az_jax.engines.errors import EngineCrashed, EngineError, EngineProtocolError, EngineTimeout

__all__ = ["UCIEngine", "strength_options"]

DEFAULT_TIMEOUT_S = 30.0  # per command, on top of any time limit of the search itself
QUIT_GRACE_S = 2.0


def strength_options(*, skill_level: int | None = None, elo: int | None = None) -> dict[str, Any]:
    """Stockfish strength options: `Skill Level` (0..20) and/or `UCI_LimitStrength` + `UCI_Elo`.

    Stockfish 15.1 accepts UCI_Elo in [1350, 2850]; other engines may differ (configure() checks).
    """
    options: dict[str, Any] = {}
    if skill_level is not None:
        options["Skill Level"] = int(skill_level)
    if elo is not None:
        options["UCI_LimitStrength"] = True
        options["UCI_Elo"] = int(elo)
    return options


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _submit(engine: chess.engine.SimpleEngine, make_coro, timeout: float | None) -> concurrent.futures.Future:
    """Schedule `make_coro()` under `asyncio.wait_for(timeout)` on python-chess's event loop.

    Raises RuntimeError (after closing the coroutine, so nothing is left un-awaited) when the loop
    is already closed, i.e. the engine has terminated.
    """
    inner = make_coro()

    async def runner():
        return await asyncio.wait_for(inner, timeout)

    outer = runner()
    try:
        return asyncio.run_coroutine_threadsafe(outer, engine.protocol.loop)
    except RuntimeError:
        outer.close()
        inner.close()
        raise


def _shutdown(engine: chess.engine.SimpleEngine, pid: int, quit_first: bool) -> None:
    """Quit (politely, briefly), close the transport, wait for the exit and SIGKILL as a last resort."""
    if quit_first and not engine.returncode.done():
        try:
            _submit(engine, engine.protocol.quit, QUIT_GRACE_S).result(timeout=QUIT_GRACE_S + 1.0)
        except BaseException:  # noqa: BLE001 - best effort; the kill below is the guarantee
            pass
    try:
        engine.close()  # asyncio's transport.close() kills a still-running child
    except BaseException:  # noqa: BLE001
        pass
    try:
        engine.returncode.result(timeout=5.0)  # set once asyncio has reaped the process
        return
    except BaseException:  # noqa: BLE001
        pass
    # Not reaped yet, so the pid is still ours: kill it directly.
    if _pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        engine.returncode.result(timeout=5.0)
    except BaseException:  # noqa: BLE001
        pass


class UCIEngine:
    """A running UCI engine. Not thread-safe: one caller at a time.

    Args:
      command: the engine's command line (list, or a string split with `shlex`).
      options: UCI options to set at start, e.g. `{"Threads": 1, "Hash": 16}` or
        `strength_options(skill_level=0)`.
      timeout: per-command deadline in seconds (added to a search's own `time` limit); on expiry
        the engine is killed and `EngineTimeout` raised.
    """

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        options: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ):
        argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise ValueError("empty engine command")
        self.argv = tuple(argv)
        self.timeout = float(timeout)
        self._closed = False
        self._dead_reason: str | None = None
        try:
            self._engine = chess.engine.SimpleEngine.popen_uci(argv, timeout=self.timeout)
        except (OSError, chess.engine.EngineTerminatedError) as e:
            raise EngineCrashed(f"cannot start UCI engine {argv!r}: {e}") from e
        except (concurrent.futures.TimeoutError, TimeoutError) as e:
            raise EngineTimeout(f"UCI engine {argv!r} did not finish the 'uci' handshake in {timeout} s") from e
        self.pid = self._engine.transport.get_pid()
        self.name = self._engine.id.get("name", self.argv[0])  # from the engine's `id name` line
        self._finalizer = weakref.finalize(self, _shutdown, self._engine, self.pid, False)
        if options:
            self.configure(options)

    def is_alive(self) -> bool:
        return not self._closed and self._dead_reason is None and not self._engine.returncode.done()

    def _call(self, make_coro, what: str, timeout: float | None):
        """Run `make_coro()` (a protocol coroutine) on python-chess's event loop with a hard deadline."""
        if self._closed:
            raise EngineError("engine is closed")
        if self._dead_reason is None and self._engine.returncode.done():
            self._kill("exited")
        if self._dead_reason is not None:
            raise EngineCrashed(f"UCI engine {self.argv[0]!r} (pid {self.pid}) is dead: {self._dead_reason}")
        try:
            fut = _submit(self._engine, make_coro, timeout)
        except RuntimeError as e:  # the event loop is gone: the engine has terminated
            self._kill("event loop closed")
            raise EngineCrashed(f"UCI engine {self.argv[0]!r} (pid {self.pid}) terminated during {what}") from e
        try:
            # The extra margin only matters if the event loop itself stops answering.
            return fut.result(timeout=None if timeout is None else timeout + 5.0)
        except (concurrent.futures.TimeoutError, TimeoutError):
            self._kill(f"timed out during {what}")
            raise EngineTimeout(
                f"UCI engine {self.argv[0]!r} did not finish {what} within {timeout} s; killed"
            ) from None
        except chess.engine.EngineTerminatedError as e:
            self._kill(f"terminated during {what}")
            raise EngineCrashed(f"UCI engine {self.argv[0]!r} (pid {self.pid}) terminated during {what}: {e}") from e
        except chess.engine.EngineError as e:
            self._kill(f"protocol error during {what}")
            raise EngineProtocolError(f"UCI engine {self.argv[0]!r} sent an invalid reply during {what}: {e}") from e

    def _kill(self, reason: str) -> None:
        self._dead_reason = reason
        _shutdown(self._engine, self.pid, quit_first=False)

    def configure(self, options: Mapping[str, Any]) -> None:
        """Set UCI options; an unknown option or out-of-range value raises `EngineError`."""
        known = self._engine.options  # case-insensitive mapping name -> chess.engine.Option
        for key, value in options.items():
            if key not in known:
                raise EngineError(f"UCI engine {self.argv[0]!r} has no option {key!r}")
            try:
                known[key].parse(value)
            except chess.engine.EngineError as e:
                raise EngineError(str(e)) from e
        self._call(lambda: self._engine.protocol.configure(dict(options)), "configure", self.timeout)

    def play(
        self,
        board: chess.Board,
        *,
        nodes: int | None = None,
        time: float | None = None,
        depth: int | None = None,
        timeout: float | None = None,
    ) -> chess.Move:
        """Search `board` under the given limit and return the engine's move, checked to be legal.

        At least one of `nodes`, `time` (seconds per move) or `depth` must be given. The deadline
        is `timeout` (default: the engine's) plus `time`.
        """
        if nodes is None and time is None and depth is None:
            raise ValueError("give a search limit: nodes, time or depth")
        if board.is_game_over(claim_draw=False):
            raise ValueError("the game is over; there is no move to ask for")
        limit = chess.engine.Limit(nodes=nodes, time=time, depth=depth)
        deadline = (self.timeout if timeout is None else float(timeout)) + (time or 0.0)
        result = self._call(lambda: self._engine.protocol.play(board, limit), "play", deadline)
        move = result.move
        if move is None or move not in board.legal_moves:
            self._kill("illegal move")
            raise EngineProtocolError(
                f"UCI engine {self.argv[0]!r} returned {move.uci() if move else 'no move'!r}, "
                f"not a legal move in {board.fen()}"
            )
        return move

    def close(self) -> None:
        """Send `quit`, wait briefly, kill if needed, and reap. Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        _shutdown(self._engine, self.pid, quit_first=self._dead_reason is None)
        self._finalizer.detach()

    def __enter__(self) -> UCIEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
