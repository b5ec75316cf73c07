"""A GTP (Go Text Protocol, version 2) client for external Go engines such as GNU Go.

The engine runs as a subprocess with pipes, in its own process group (az_jax/engines/process.py), so that ending
it also ends anything it spawned. Every command has a deadline; replies are read by a background thread into a
queue, so a hung engine cannot block the caller, and an engine that exits is noticed at once even when a child of it
still holds its output open.

Failure policy (one exception type per failure, all subclasses of `EngineError`, az_jax/engines/errors.py):

* `GTPError`            -- the engine answered `? message` (a failed command). The engine is
                           still in a known state and stays usable.
* `EngineTimeout`       -- no complete reply before the deadline. The engine is killed.
* `EngineCrashed`       -- the engine exited or closed stdout (EOF) or its stdin broke. The
                           engine's group is killed (if anything is left of it) and reaped.
* `EngineProtocolError` -- the reply is not GTP (does not start with `=` / `?`), or a move reply
                           is not a vertex / pass / resign. The engine is killed, since the
                           stream can no longer be trusted to be in sync.

Every message is one line. `close()` (also the context manager's exit, and a `weakref.finalize` hook run at
garbage collection or interpreter exit) sends `quit`, then ends the process group (SIGTERM, then SIGKILL after a
short grace) and reaps the engine, so no engine process outlives its client. A command interrupted by anything else
(Ctrl-C's `KeyboardInterrupt`, say) ends the group before the interruption goes on.

`az_jax/engines/uci.py` raises the same classes (all but `GTPError`), so evaluation code can catch one hierarchy.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import queue
import shutil
import subprocess
import threading
import time
import weakref
from collections.abc import Sequence
from typing import IO

from az_jax.engines.errors import EngineCrashed, EngineError, EngineProtocolError, EngineTimeout
from az_jax.engines.process import KILL_GRACE_S, launch_settings, seconds, tail, terminate_group
from envs.notation import go

DEFAULT_TIMEOUT_S = 30.0  # per command
DEFAULT_START_TIMEOUT_S = 30.0  # for the first reply, which waits for the engine's start-up
DEFAULT_MOVE_TIMEOUT_S = 120.0  # per genmove
QUIT_GRACE_S = 1.0  # how long close() waits for a clean exit after `quit` before ending the group
_EOF = None  # queue sentinel: the engine closed stdout
_POLL_S = 0.1  # how often a waiting command checks that the engine still runs (and lets Ctrl-C in)
_EXIT_DRAIN_S = 0.2  # after the engine exited, how long to wait for the rest of its output


class GTPError(EngineError):
    """The engine answered a command with a GTP failure response (`? message`)."""

    def __init__(self, command: str, message: str):
        super().__init__(f"GTP command {command!r} failed: {message}")
        self.command = command
        self.message = message


@dataclasses.dataclass(frozen=True)
class GTPResponse:
    """One parsed GTP reply."""

    success: bool  # True for '=', False for '?'
    text: str  # reply body without the '='/'?' marker and id; lines joined by '\n'


def find_executable(name: str, extra_dirs: Sequence[str] = ("/usr/games", "/usr/local/games")) -> str | None:
    """`shutil.which(name)`, also looking in `extra_dirs` (Debian installs gnugo/stockfish in /usr/games)."""
    found = shutil.which(name)
    if found:
        return found
    for d in extra_dirs:
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def normalize_color(color: str) -> str:
    """'b' / 'B' / 'black' -> 'black'; 'w' / 'W' / 'white' -> 'white'."""
    c = str(color).strip().lower()
    if c in ("b", "black"):
        return "black"
    if c in ("w", "white"):
        return "white"
    raise ValueError(f"not a GTP color: {color!r}")


def _end_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """End the engine's process group (it leads its own session: SIGTERM, then SIGKILL), then reap the engine."""
    terminate_group(proc.pid, grace=grace, reap=proc.poll)
    try:
        proc.kill()  # only if it somehow left its group
    except OSError:
        pass
    try:
        proc.wait(timeout=10.0)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
        pass


def _read_lines(stream, sink, on_eof=None) -> None:
    """Background reader: decode lines from `stream` into `sink`; call `on_eof(_EOF)` at the end."""
    try:
        for raw in iter(stream.readline, b""):
            sink(raw.decode("utf-8", errors="replace").rstrip("\r\n").replace("\r", ""))
    except (OSError, ValueError):
        pass
    finally:
        if on_eof is not None:
            on_eof(_EOF)


class GTPEngine:
    """A running GTP engine. Not thread-safe: one caller issues commands one at a time.

    Args:
      command: the engine's command line, as a list of arguments or a shell-like string (it is
        split with `shlex`, never run through a shell), e.g.
        `["gnugo", "--mode", "gtp", "--level", "0", "--chinese-rules"]`.
      timeout: per-command deadline in seconds (default `DEFAULT_TIMEOUT_S`, 30 s); each method
        also takes `timeout=`.
      start_timeout: seconds added to the deadline of the first command, which also waits for the
        engine to start up (default `DEFAULT_START_TIMEOUT_S`, 30 s).
      move_timeout: deadline in seconds of `genmove` (default `DEFAULT_MOVE_TIMEOUT_S`, 120 s).
      kill_grace: seconds the process group gets to exit after SIGTERM before SIGKILL (default
        `KILL_GRACE_S` of az_jax/engines/process.py, 0.5 s).
      cwd, env: passed to `subprocess.Popen`.
    """

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        move_timeout: float = DEFAULT_MOVE_TIMEOUT_S,
        kill_grace: float = KILL_GRACE_S,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ):
        self.argv, self.timeout, self.start_timeout, self.move_timeout, self.kill_grace = launch_settings(
            command, timeout, start_timeout, move_timeout, kill_grace
        )
        self._size: int | None = None  # set by boardsize(); used to validate genmove replies
        self._closed = False
        self._answered = False  # whether any command has been answered (start_timeout applies until then)
        self._dead_reason: str | None = None  # set once the engine was killed after an error
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,  # own process group: close() kills the whole tree
            )
        except OSError as e:
            raise EngineCrashed(f"cannot start engine {self.argv!r}: {e}") from e
        self._finalizer = weakref.finalize(self, _end_group, self._proc, self.kill_grace)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._stdout_thread = threading.Thread(
            target=_read_lines,
            args=(self._proc.stdout, self._lines.put, self._lines.put),
            name=f"gtp-stdout-{self._proc.pid}",
            daemon=True,
        )
        self._stderr_thread = threading.Thread(
            target=_read_lines,
            args=(self._proc.stderr, self._stderr_tail.append),
            name=f"gtp-stderr-{self._proc.pid}",
            daemon=True,
        )
        self._stdout_thread.start()
        self._stderr_thread.start()

    # -- process management -------------------------------------------------------------------

    @property
    def pid(self) -> int:
        """The engine's process id (also its process-group id)."""
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The engine's exit status once it has been reaped, else None."""
        return self._proc.poll()

    def is_alive(self) -> bool:
        return not self._closed and self._dead_reason is None and self._proc.poll() is None

    @property
    def _stdin(self) -> IO[bytes]:
        stdin = self._proc.stdin
        assert stdin is not None  # Popen(stdin=PIPE)
        return stdin

    def stderr_tail(self) -> str:
        """The last lines the engine wrote to stderr (for error messages)."""
        return "\n".join(self._stderr_tail)

    def _stderr_note(self) -> str:
        """'; stderr: <last lines>' on one line, or '' when the engine wrote nothing to stderr."""
        text = tail(self._stderr_tail)
        return f"; stderr: {text}" if text else ""

    def _kill(self, reason: str) -> None:
        self._dead_reason = reason
        _end_group(self._proc, self.kill_grace)
        self._join_readers()

    def _join_readers(self) -> None:
        threads = {self._proc.stdout: self._stdout_thread, self._proc.stderr: self._stderr_thread}
        for t in threads.values():
            t.join(timeout=1.0)
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            assert stream is not None  # all three are pipes (Popen(..., PIPE))
            reader = threads.get(stream)
            if reader is not None and reader.is_alive():
                continue  # closing would block on the reader's lock; a process outside the group holds the pipe
            try:
                stream.close()
            except (OSError, ValueError):
                pass

    def _crashed(self, what: str) -> EngineCrashed:
        # The engine may still be exiting; give it a moment so the exit code is known.
        try:
            rc: int | None = self._proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            rc = None
        self._stderr_thread.join(timeout=0.2)  # its last lines (the thread ends early unless a child holds the pipe)
        note = self._stderr_note()
        self._kill(f"crashed ({what})")
        code = self._proc.returncode if rc is None else rc
        return EngineCrashed(f"engine {self.argv[0]!r} (pid {self.pid}) {what}; exit code {code}{note}")

    def close(self) -> None:
        """Send `quit`, then end the process group and reap the engine. Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        if self._dead_reason is None and self._proc.poll() is None:
            try:
                self._stdin.write(b"quit\n")
                self._stdin.flush()
                self._proc.wait(timeout=QUIT_GRACE_S)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        _end_group(self._proc, self.kill_grace)  # also ends anything left in the group
        self._join_readers()
        self._finalizer.detach()

    def __enter__(self) -> GTPEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- protocol -----------------------------------------------------------------------------

    def _next_line(self, deadline: float, limit: float, command: str) -> str:
        """The next line of the reply to `command`; waits in short slices, so an engine that exits (even while a
        child of it keeps the pipe open) is noticed at once and Ctrl-C is not held up."""
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=min(max(remaining, 0.0), _POLL_S))
                break
            except queue.Empty:
                pass
            if self._proc.poll() is not None:  # exited: take what it wrote last, else report the exit
                try:
                    line = self._lines.get(timeout=_EXIT_DRAIN_S)
                    break
                except queue.Empty:
                    raise self._crashed(f"exited while answering {command!r}") from None
            if remaining <= 0:
                note = self._stderr_note()
                self._kill(f"timed out on {command!r}")
                raise EngineTimeout(
                    f"engine {self.argv[0]!r} (pid {self.pid}) did not answer {command!r} within {limit:g} s; "
                    f"killed{note}"
                )
        if line is _EOF:
            raise self._crashed(f"closed its output while answering {command!r}")
        return line

    def request(self, command: str, *, timeout: float | None = None) -> GTPResponse:
        """Send one command and return the parsed reply, whether success or failure.

        The deadline is `timeout`, else the engine's `timeout`, plus its `start_timeout` until the engine has
        answered once. Any exception but a failure reply ends the engine's process group."""
        return self._request(command, timeout, self.timeout)

    def _request(self, command: str, timeout: float | None, default: float) -> GTPResponse:
        """`request` with `default` as the deadline when `timeout` is None."""
        if self._closed:
            raise EngineError("engine is closed")
        if self._dead_reason is not None:
            raise EngineCrashed(f"engine {self.argv[0]!r} (pid {self.pid}) is dead: {self._dead_reason}")
        if "\n" in command or "\r" in command:
            raise ValueError(f"GTP command must be a single line: {command!r}")
        limit = default if timeout is None else seconds("timeout", timeout)
        if not self._answered:
            limit += self.start_timeout
        try:
            response = self._exchange(command, time.monotonic() + limit, limit)
        except EngineError:
            raise  # the engine has been dealt with
        except BaseException:  # Ctrl-C or a bug mid-reply: the stream is out of step, so end the engine
            if self._dead_reason is None:
                self._kill(f"interrupted during {command!r}")
            raise
        self._answered = True
        return response

    def _exchange(self, command: str, deadline: float, limit: float) -> GTPResponse:
        """Write `command` and read its reply (GTP 2 section 3.4) before `deadline`."""
        try:
            self._stdin.write(command.encode("utf-8") + b"\n")
            self._stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._crashed(f"could not be sent {command!r}") from None
        # GTP 2 §3.4: a reply is '=' or '?' [id] text, continued on more lines, ended by an empty line.
        first = self._next_line(deadline, limit, command)
        while first == "":  # tolerate stray blank lines before a reply
            first = self._next_line(deadline, limit, command)
        if first[0] not in "=?":
            self._kill(f"protocol error on {command!r}")
            raise EngineProtocolError(
                f"reply of engine {self.argv[0]!r} to {command!r} does not start with '=' or '?': {first[:200]!r}"
            )
        success = first[0] == "="
        head = first[1:]
        head = head.lstrip("0123456789") if head[:1].isdigit() else head  # optional numeric id
        lines = [head.strip()]
        while True:
            line = self._next_line(deadline, limit, command)
            if line == "":
                break
            lines.append(line)
        if len(lines) > 1 and lines[0] == "":
            lines = lines[1:]  # multi-line replies (showboard) start on the line after '='
        text = "\n".join(lines).rstrip()
        return GTPResponse(success=success, text=text)

    def send(self, command: str, *, timeout: float | None = None) -> str:
        """Send one command; return the reply text, or raise `GTPError` on a failure reply."""
        response = self.request(command, timeout=timeout)
        if not response.success:
            raise GTPError(command, response.text)
        return response.text

    # -- GTP commands -------------------------------------------------------------------------

    def protocol_version(self) -> str:
        return self.send("protocol_version")

    def name(self) -> str:
        return self.send("name")

    def version(self) -> str:
        return self.send("version")

    def boardsize(self, size: int) -> None:
        self.send(f"boardsize {int(size)}")
        self._size = int(size)

    def komi(self, komi: float) -> None:
        self.send(f"komi {float(komi):g}")

    def clear_board(self) -> None:
        self.send("clear_board")

    def play(self, color: str, vertex: str) -> None:
        """Play `vertex` ('D4' or 'pass') for `color`; an illegal move raises `GTPError`."""
        self.send(f"play {normalize_color(color)} {vertex}")

    def genmove(self, color: str, *, timeout: float | None = None) -> str:
        """Ask the engine for a move: an upper-case vertex ('D4'), 'pass' or 'resign'.

        The deadline is `timeout`, else the engine's `move_timeout` (plus `start_timeout` when this is
        the first command). A reply that is none of those
        (or a vertex off the board set by `boardsize`) raises `EngineProtocolError` and kills the engine.
        """
        command = f"genmove {normalize_color(color)}"
        response = self._request(command, timeout, self.move_timeout)
        if not response.success:
            raise GTPError(command, response.text)
        text = response.text
        move = text.strip()
        low = move.lower()
        if low in (go.PASS, go.RESIGN):
            return low
        if go.is_vertex(move, self._size):
            return move.upper()
        self._kill(f"bad genmove reply {move!r}")
        raise EngineProtocolError(f"reply to {command!r} is not a vertex, pass or resign: {move[:200]!r}")

    def final_score(self) -> str:
        """The engine's score of the current position, e.g. 'B+3.5', 'W+7.5' or '0'."""
        return self.send("final_score")

    def list_stones(self, color: str) -> frozenset[str]:
        """Upper-case vertices of `color`'s stones (GNU Go extension `list_stones`)."""
        return go.normalize_vertices(self.send(f"list_stones {normalize_color(color)}").split())

    def showboard(self) -> str:
        return self.send("showboard")
