"""The Go Text Protocol's side of `az-jax gtp` that knows nothing of Go: parsing a line as the spec's section 3.1
has it, formatting responses, the argument checks every command shares, and the stdin/stdout loop that feeds an engine
and lets a streaming command (analysis) learn that the controller has sent another line (G. Farnebäck, "Specification
of the Go Text Protocol, version 2, draft 2", 2002). The engine, its commands and its decisions: gtp_engine.py."""

from __future__ import annotations

import math
import os
import queue
import re
import threading
import time
from typing import IO, Protocol

MAX_LINE = 1 << 16  # bytes of an input line kept (the rest of a longer line is dropped)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # every control character but HT (spec 3.1)
COMMAND_ID = re.compile(r"[0-9]+")  # a command id (spec 2.5)
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class Engine(Protocol):
    """What `serve` drives: GoEngine."""

    finished: bool

    def handle(self, line: str, stream: Stream | None = None) -> str: ...


class CommandError(Exception):
    """A command that fails: its message is the `? message` response."""


def preprocess(line: str) -> str:
    """A raw input line as the spec's section 3.1 has it parsed: control characters but HT removed, the comment from
    `#` on removed, HT turned into a space; '' for a line to ignore."""
    line = _CONTROL.sub("", line).split("#", 1)[0].replace("\t", " ")
    return line.strip()


def quote(text: str, limit: int = 40) -> str:
    """A controller's token in an error message: printable ASCII, short."""
    return ascii(text[:limit] + ("..." if len(text) > limit else ""))


def response(ok: bool, id_: str, text: str) -> str:
    """`=id text` or `?id text` and the empty line that ends a response; no empty line inside (an empty line ends a
    response)."""
    body = "\n".join(line for line in text.split("\n") if line.strip()) if "\n" in text else text
    if text.startswith("\n"):  # a multi-line result starts on the line after '=' (showboard, list_commands)
        body = "\n" + body
    return f"{'=' if ok else '?'}{id_} {body}\n\n"


def colour(text: str) -> int:
    """'b' / 'black' -> 0, 'w' / 'white' -> 1 (GTP colours are case-insensitive); CommandError otherwise."""
    low = text.lower()
    if low in ("b", "black"):
        return 0
    if low in ("w", "white"):
        return 1
    raise CommandError(f"syntax error: not a colour: {quote(text)}")


def number(text: str, what: str, low: float, high: float) -> float:
    """A finite decimal number in [low, high]; CommandError ('syntax error ...') otherwise."""
    if len(text) > 40 or not _NUMBER.fullmatch(text):
        raise CommandError(f"syntax error: {what} must be a number, got {quote(text)}")
    value = float(text)
    if not (math.isfinite(value) and low <= value <= high):
        raise CommandError(f"syntax error: {what} must be from {low:g} to {high:g}, got {quote(text)}")
    return value


def integer(text: str, what: str, low: int, high: int) -> int:
    if len(text) > 40 or not re.fullmatch(r"[+-]?[0-9]+", text):
        raise CommandError(f"syntax error: {what} must be an integer, got {quote(text)}")
    value = int(text)
    if not low <= value <= high:
        raise CommandError(f"syntax error: {what} must be from {low} to {high}, got {quote(text)}")
    return value


def arguments(args: list[str], count: int, usage: str) -> list[str]:
    if len(args) != count:
        raise CommandError(f"syntax error: expected {usage}")
    return args


def format_score(margin: float) -> str:
    """Black's margin -> GTP final_score text: 'B+3.5', 'W+0.5', '0'."""
    if margin == 0:
        return "0"
    return f"{'B' if margin > 0 else 'W'}+{abs(margin):g}"


class Stream(Protocol):
    """Where a streaming command (analysis) writes and how it learns that the controller has sent another line."""

    def write(self, text: str) -> None: ...  # writes and flushes

    def pending(self) -> bool: ...  # another input line (or the end of input) is waiting

    def wait(self) -> None: ...  # blocks until pending() is true


class Collect:
    """The stream of a command run without one (`GoEngine.handle(line)`): collects the output, and says a line is
    pending once one `info` line was written, so that analysis stops after its first report."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)

    def pending(self) -> bool:
        return any(part.startswith("info") for part in self.parts)

    def wait(self) -> None:
        return None


class QueueStream:
    """The stream of `serve`: writes to stdout; input lines wait in the reader thread's queue."""

    def __init__(self, lines: queue.Queue, stdout: IO[str]):
        self.lines, self.stdout = lines, stdout

    def write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def pending(self) -> bool:
        return not self.lines.empty()

    def wait(self) -> None:
        while self.lines.empty():
            time.sleep(0.01)


def read_lines(stdin, lines: queue.Queue) -> None:
    """Reader thread: every input line, decoded as UTF-8 with bad bytes replaced, at most MAX_LINE bytes of it kept;
    None at the end. A real file is read with os.read, so that the thread holds no lock of Python's buffered stdin
    when the interpreter exits while it waits."""
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):  # an in-memory stream (io.StringIO, io.BytesIO)
        fd = None
    try:
        if fd is None:
            while raw := stdin.readline():
                text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
                lines.put(text[:MAX_LINE])
            return
        buffer = b""
        while chunk := os.read(fd, 1 << 16):
            *complete, buffer = (buffer + chunk).split(b"\n")
            for raw in complete:
                lines.put(raw[:MAX_LINE].decode("utf-8", errors="replace"))
            buffer = buffer[:MAX_LINE]  # a line that never ends is cut, not kept whole in memory
        if buffer:
            lines.put(buffer.decode("utf-8", errors="replace"))
    except (OSError, ValueError):
        pass
    finally:
        lines.put(None)


def serve(engine: Engine, stdin, stdout: IO[str]) -> int:
    """Runs the engine on `stdin` (bytes or text lines) and `stdout` until `quit` or the end of input; 0."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=read_lines, args=(stdin, lines), name="gtp-stdin", daemon=True).start()
    stream = QueueStream(lines, stdout)
    try:
        while not engine.finished:
            line = lines.get()
            if line is None:
                break
            text = engine.handle(line, stream)
            if text:
                stream.write(text)
    except BrokenPipeError:  # the controller went away: nothing more can be said, not even at exit's flush
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
        except (AttributeError, OSError, ValueError):
            pass
    return 0
