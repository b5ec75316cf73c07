"""Process groups of external engines (az_jax/engines/gtp.py, az_jax/engines/uci.py).

Every engine is started as the leader of a new session (`start_new_session=True`), so its process group holds the
engine and everything it spawns, and a Ctrl-C in the terminal reaches az-jax but not the engine. Ending an engine
means ending its group: SIGTERM to the group, a short grace for it to empty, then SIGKILL to whatever is left.
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import time
from collections.abc import Callable, Iterable, Sequence

KILL_GRACE_S = 0.5  # how long a SIGTERMed group may take to exit before it is SIGKILLed
_POLL_S = 0.01
_KILLED_WAIT_S = 1.0  # how long to wait for SIGKILLed processes to disappear from the process table


def seconds(name: str, value: float) -> float:
    """`value` as a float number of seconds, checked to be finite and > 0 (a time-out argument called `name`)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, not {value!r}") from None
    if not math.isfinite(out) or out <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, not {value!r}")
    return out


def launch_settings(
    command: Sequence[str] | str, timeout: float, start_timeout: float, move_timeout: float, kill_grace: float
) -> tuple[tuple[str, ...], float, float, float, float]:
    """An engine's command line as argv (a string is split like a shell would) and its four time-outs, checked:
    (argv, timeout, start_timeout, move_timeout, kill_grace). ValueError for an empty command or a bad time-out."""
    argv = tuple(shlex.split(command) if isinstance(command, str) else [str(a) for a in command])
    if not argv:
        raise ValueError("empty engine command")
    return (
        argv,
        seconds("timeout", timeout),
        seconds("start_timeout", start_timeout),
        seconds("move_timeout", move_timeout),
        seconds("kill_grace", kill_grace),
    )


def _stat_fields(stat: str) -> tuple[str, int]:
    """(state, process group id) from the text of /proc/PID/stat (the command name may hold spaces and parens)."""
    rest = stat.rsplit(")", 1)[1].split()
    return rest[0], int(rest[2])


def group_members(pgid: int) -> list[int]:
    """The running (not zombie) processes of process group `pgid`, from /proc; without /proc, `[pgid]` while any
    process of the group (zombies included) exists, else `[]`."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    try:
        names = os.listdir("/proc")
    except OSError:
        return [pgid]
    members = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                state, group = _stat_fields(f.read())
        except (OSError, IndexError, ValueError):  # exited meanwhile, or not a process entry
            continue
        if group == pgid and state not in ("Z", "X"):
            members.append(int(name))
    return members


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to process group `pgid`; nothing if the group is gone (or not ours)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate_group(pgid: int, *, grace: float = KILL_GRACE_S, reap: Callable[[], object] | None = None) -> None:
    """End process group `pgid`: SIGTERM, up to `grace` seconds for it to empty, then SIGKILL what is left (and
    wait briefly for it to be gone).

    `reap` (e.g. `Popen.poll`) is called while waiting so that an exited leader is reaped rather than kept as a
    zombie. Never raises for a group that is already gone.
    """
    signal_group(pgid, signal.SIGTERM)
    signal_group(pgid, signal.SIGCONT)  # a stopped process acts on SIGTERM only once continued
    deadline = time.monotonic() + grace
    while True:
        if reap is not None:
            reap()
        if not group_members(pgid):
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(_POLL_S)
    signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + _KILLED_WAIT_S
    while group_members(pgid) and time.monotonic() < deadline:  # SIGKILL takes effect soon, not at once
        if reap is not None:
            reap()
        time.sleep(_POLL_S)


def tail(lines: Iterable[str], *, count: int = 3, width: int = 300) -> str:
    """The last `count` of `lines` joined on one line with ' | ', cut to `width` characters from the end."""
    text = " | ".join(line.strip() for line in list(lines)[-count:] if line.strip())
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def reason(exc: BaseException) -> str:
    """`str(exc)`, or its type name (with repr) when that is empty, e.g. for a bare `TimeoutError()`."""
    text = str(exc).strip()
    return " ".join(text.split()) if text else repr(exc)
