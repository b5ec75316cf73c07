"""A UCI client for chess engines (Stockfish, ...) on python-chess's UCI protocol.

Moves are `chess.Move`s on a `chess.Board`; pgx chess actions convert to and from them with
`envs.notation.chess_moves` (`action_to_move`, `move_to_action`, `pgx_state_to_board`).

Engine errors are those of az_jax/engines/errors.py (`EngineCrashed`, `EngineTimeout`,
`EngineProtocolError`, base `EngineError`); every message is one line and names the engine's reason: its exit code
and the tail of its stderr, or its last output when it timed out, or python-chess's complaint.

The engine process is started here, on an asyncio event loop of its own (one background thread per engine), as the
leader of a new process group (az_jax/engines/process.py). Its pid is known from the first instant, so the whole
group (the engine and anything it spawned) is ended on every exit path: `close()`, the context manager's exit, a
failed start-up or command, an interrupted command (Ctrl-C), garbage collection and interpreter exit
(`weakref.finalize`). When the engine exits by itself, what is left of its group is ended at once. python-chess's
`SimpleEngine` is not used: it hides the process until the handshake has succeeded and ends only the engine.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import signal
import subprocess
import threading
import time as _time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NoReturn

import chess
import chess.engine

from az_jax.engines.errors import EngineCrashed, EngineError, EngineProtocolError, EngineTimeout
from az_jax.engines.process import (
    KILL_GRACE_S,
    group_members,
    launch_settings,
    reason,
    seconds,
    signal_group,
    tail,
    terminate_group,
)

__all__ = ["UCIEngine", "strength_options"]

DEFAULT_TIMEOUT_S = 30.0  # per command (configure, quit)
DEFAULT_START_TIMEOUT_S = 30.0  # for the start-up: spawning the engine and its `uci` ... `uciok` handshake
DEFAULT_MOVE_TIMEOUT_S = 120.0  # per move, on top of the search's own `time` limit
QUIT_GRACE_S = 2.0  # how long close() waits for the engine to exit after `quit` before ending its group
_POLL_S = 0.1  # how often a waiting caller wakes up (so Ctrl-C is not held up)
_LOOP_MARGIN_S = 2.0  # extra wait for the event loop itself, beyond a command's deadline
_REAP_S = 5.0  # how long to wait for asyncio to reap an ended engine before giving up on a clean loop close


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


class _UciProtocol(chess.engine.UciProtocol):
    """python-chess's UCI protocol that keeps the engine's stderr and last stdout lines for error messages (instead
    of logging them), and ends the rest of the engine's process group as soon as the engine exits (a child holding
    the pipes open would otherwise keep python-chess from ever seeing the exit)."""

    kill_grace = KILL_GRACE_S

    def __init__(self) -> None:
        super().__init__()
        self.stderr_lines: collections.deque[str] = collections.deque(maxlen=20)
        self.stdout_lines: collections.deque[str] = collections.deque(maxlen=3)

    def error_line_received(self, line: str) -> None:
        self.stderr_lines.append(line)

    def _line_received(self, line: str) -> None:
        self.stdout_lines.append(line)
        super()._line_received(line)

    def process_exited(self) -> None:
        super().process_exited()
        assert self.transport is not None
        pgid = self.transport.get_pid()
        signal_group(pgid, signal.SIGTERM)
        self.loop.call_later(self.kill_grace, _kill_rest, pgid)


def _kill_rest(pgid: int) -> None:
    """SIGKILL what is left of an exited engine's process group."""
    if group_members(pgid):
        signal_group(pgid, signal.SIGKILL)


class _Runtime:
    """One engine's event-loop thread, process and protocol; `shutdown` ends them (it is also the finalizer, so it
    must not refer to the `UCIEngine`)."""

    def __init__(self, name: str, kill_grace: float):
        self.kill_grace = kill_grace
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"uci-{name}", daemon=True)
        self.thread.start()
        self.transport: asyncio.SubprocessTransport | None = None
        self.protocol: _UciProtocol | None = None
        self.pid: int | None = None
        self.done = False

    async def spawn(self, argv: Sequence[str], cwd: str | None, env: Mapping[str, str] | None) -> None:
        """Start the engine in a new process group and run the `uci` handshake."""
        transport, protocol = await self.loop.subprocess_exec(
            _UciProtocol,
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # own process group: ending it ends everything the engine spawned
        )
        protocol.kill_grace = self.kill_grace
        self.transport, self.protocol, self.pid = transport, protocol, transport.get_pid()
        await protocol.initialize()

    def run(self, make: Callable[[], Awaitable[Any]], timeout: float) -> Any:
        """Await `make()` on the loop under a `timeout`-second deadline; raises TimeoutError when it passes."""

        async def guarded():
            return await asyncio.wait_for(make(), timeout)

        coro = guarded()
        try:
            fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:  # the loop is closed
            coro.close()
            raise chess.engine.EngineTerminatedError("engine event loop closed") from None
        deadline = _time.monotonic() + timeout + _LOOP_MARGIN_S
        try:
            while True:
                try:
                    return fut.result(timeout=min(_POLL_S, max(deadline - _time.monotonic(), 0.0)))
                except concurrent.futures.TimeoutError:
                    if fut.done() or _time.monotonic() >= deadline:
                        raise
        except BaseException:
            fut.cancel()
            raise

    def returncode(self) -> int | None:
        return None if self.transport is None else self.transport.get_returncode()

    def exited(self) -> bool:
        return self.protocol is not None and self.protocol.returncode.done()

    def shutdown(self, quit_first: bool, quit_grace: float = QUIT_GRACE_S) -> None:
        """Ask the engine to quit (if `quit_first`), end its process group, wait for it to be reaped and stop the
        loop. Idempotent; never raises (but lets a KeyboardInterrupt through after the group has been ended)."""
        if self.done:
            return
        self.done = True
        if threading.current_thread() is self.thread:  # a finalizer on the loop's own thread: it cannot wait on it
            if self.pid is not None:
                signal_group(self.pid, signal.SIGKILL)
            return
        try:
            if quit_first and self.protocol is not None and not self.exited():
                protocol = self.protocol
                try:
                    self.run(protocol.quit, quit_grace)
                except Exception:  # noqa: BLE001 - best effort; ending the group below is the guarantee
                    pass
        finally:
            if self.pid is not None:
                terminate_group(self.pid, grace=self.kill_grace)
            self._stop_loop()

    def _stop_loop(self) -> None:
        """Wait for asyncio to reap the engine, close the transport, cancel what is left and stop the loop; close
        the loop only once the engine has been reaped (else asyncio's child watcher would warn)."""
        reaped = self.protocol is None
        if self.protocol is not None:
            protocol = self.protocol
            try:
                self.run(lambda: asyncio.shield(protocol.returncode), _REAP_S)
                reaped = True
            except Exception:  # noqa: BLE001
                pass

        async def finish():
            if self.transport is not None:
                self.transport.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=1.0)

        try:
            asyncio.run_coroutine_threadsafe(finish(), self.loop).result(timeout=3.0)
        except Exception:  # noqa: BLE001
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=3.0)
        if reaped and not self.thread.is_alive():
            self.loop.close()


class UCIEngine:
    """A running UCI engine. Not thread-safe: one caller at a time.

    Args:
      command: the engine's command line (list, or a string split with `shlex`).
      options: UCI options to set at start, e.g. `{"Threads": 1, "Hash": 16}` or
        `strength_options(skill_level=0)`.
      timeout: per-command deadline in seconds (default `DEFAULT_TIMEOUT_S`, 30 s) of `configure`
        and `quit`; on expiry the engine is killed and `EngineTimeout` raised.
      start_timeout: deadline in seconds of the start-up, i.e. spawning the engine and its `uci`
        handshake (default `DEFAULT_START_TIMEOUT_S`, 30 s).
      move_timeout: deadline in seconds of `play`, added to the search's own `time` limit (default
        `DEFAULT_MOVE_TIMEOUT_S`, 120 s); `play(timeout=...)` overrides it.
      kill_grace: seconds the process group gets to exit after SIGTERM before SIGKILL (default
        `KILL_GRACE_S` of az_jax/engines/process.py, 0.5 s).
      cwd, env: the engine's working directory and environment.
    """

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        options: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        move_timeout: float = DEFAULT_MOVE_TIMEOUT_S,
        kill_grace: float = KILL_GRACE_S,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ):
        self.argv, self.timeout, self.start_timeout, self.move_timeout, self.kill_grace = launch_settings(
            command, timeout, start_timeout, move_timeout, kill_grace
        )
        self._closed = False
        self._dead_reason: str | None = None
        self._rt = _Runtime(os.path.basename(self.argv[0]), self.kill_grace)
        self._finalizer = weakref.finalize(self, self._rt.shutdown, False)
        try:
            self._rt.run(lambda: self._rt.spawn(self.argv, cwd, env), self.start_timeout)
        except BaseException as e:
            self._finalizer.detach()
            self._rt.shutdown(quit_first=False)
            if isinstance(e, OSError) and not isinstance(e, TimeoutError) and self._rt.pid is None:
                raise EngineCrashed(f"cannot start UCI engine {self.argv!r}: {reason(e)}") from e
            self._raise_engine_error(e, "start-up (the 'uci' handshake)", self.start_timeout)
        assert self._rt.protocol is not None  # set by spawn()
        self._protocol = self._rt.protocol
        self.pid: int = self._rt.pid if self._rt.pid is not None else -1
        self.name = self._protocol.id.get("name", self.argv[0])  # from the engine's `id name` line
        if options:
            try:
                self.configure(options)
            except BaseException:  # a bad option: no engine is left running behind the error
                self.close()
                raise

    def is_alive(self) -> bool:
        return not self._closed and self._dead_reason is None and not self._rt.exited()

    def stderr_tail(self) -> str:
        """The last lines the engine wrote to stderr (for error messages)."""
        protocol = self._rt.protocol
        return "" if protocol is None else "\n".join(protocol.stderr_lines)

    def _raise_engine_error(self, exc: BaseException, what: str, limit: float) -> NoReturn:
        """Raise `exc` as the `EngineError` it means, with the engine's reason on one line; re-raise anything that
        is not an engine failure (KeyboardInterrupt, bugs) unchanged. The engine has been ended already."""
        who = f"UCI engine {self.argv[0]!r} (pid {self._rt.pid})"
        protocol = self._rt.protocol
        stderr = tail(protocol.stderr_lines) if protocol is not None else ""
        note = f"; stderr: {stderr}" if stderr else ""
        if isinstance(exc, EngineError):
            raise exc
        if isinstance(exc, TimeoutError):  # asyncio's and concurrent.futures' time-outs are this class too
            last = tail(protocol.stdout_lines, count=1, width=120) if protocol is not None else ""
            output = f"; its last output: {last!r}" if last else "; it wrote nothing"
            raise EngineTimeout(f"{who} did not finish {what} within {limit:g} s; killed{output}{note}") from None
        if isinstance(exc, chess.engine.EngineTerminatedError):
            code = self._rt.returncode()
            exit_text = f"with exit code {code}" if code is not None else f"({reason(exc)})"
            raise EngineCrashed(f"{who} terminated {exit_text} during {what}{note}") from exc
        if isinstance(exc, chess.engine.EngineError):
            raise EngineProtocolError(f"{who} sent an invalid reply during {what}: {reason(exc)}{note}") from exc
        if isinstance(exc, OSError):
            raise EngineCrashed(f"{who} failed during {what}: {reason(exc)}{note}") from exc
        raise exc

    def _call(self, make: Callable[[], Awaitable[Any]], what: str, timeout: float) -> Any:
        """Run `make()` (a protocol coroutine) on the engine's loop with a hard deadline; any failure ends the
        engine's process group and raises an `EngineError` (or re-raises a KeyboardInterrupt)."""
        if self._closed:
            raise EngineError(f"UCI engine {self.argv[0]!r} is closed")
        if self._dead_reason is None and self._rt.exited():
            stderr = tail(self._protocol.stderr_lines)
            self._kill(f"terminated with exit code {self._rt.returncode()}" + (f"; stderr: {stderr}" if stderr else ""))
        if self._dead_reason is not None:
            raise EngineCrashed(f"UCI engine {self.argv[0]!r} (pid {self.pid}) is dead: {self._dead_reason}")
        try:
            return self._rt.run(make, timeout)
        except BaseException as e:
            self._kill(f"{type(e).__name__} during {what}")
            self._raise_engine_error(e, what, timeout)

    def _kill(self, why: str) -> None:
        self._dead_reason = why
        self._rt.shutdown(quit_first=False)
        self._finalizer.detach()

    def configure(self, options: Mapping[str, Any]) -> None:
        """Set UCI options; an unknown option or out-of-range value raises `EngineError`."""
        known = self._protocol.options  # case-insensitive mapping name -> chess.engine.Option
        for key, value in options.items():
            if key not in known:
                raise EngineError(f"UCI engine {self.argv[0]!r} has no option {key!r}")
            try:
                known[key].parse(value)
            except chess.engine.EngineError as e:
                raise EngineError(str(e)) from e
        self._call(lambda: self._protocol.configure(dict(options)), "configure", self.timeout)

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
        is `timeout` (default: the engine's `move_timeout`) plus `time`.
        """
        if nodes is None and time is None and depth is None:
            raise ValueError("give a search limit: nodes, time or depth")
        if board.is_game_over(claim_draw=False):
            raise ValueError("the game is over; there is no move to ask for")
        limit = chess.engine.Limit(nodes=nodes, time=time, depth=depth)
        base = self.move_timeout if timeout is None else seconds("timeout", timeout)
        deadline = base + (time or 0.0)
        result = self._call(lambda: self._protocol.play(board, limit), "play", deadline)
        move = result.move
        if move is None or move not in board.legal_moves:
            self._kill("illegal move")
            raise EngineProtocolError(
                f"UCI engine {self.argv[0]!r} returned {move.uci() if move else 'no move'!r}, "
                f"not a legal move in {board.fen()}"
            )
        return move

    def close(self) -> None:
        """Send `quit`, wait briefly, end the process group and reap the engine. Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        self._rt.shutdown(quit_first=self._dead_reason is None)

    def __enter__(self) -> UCIEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
