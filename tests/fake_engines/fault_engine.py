"""A fake GTP or UCI engine that misbehaves on purpose, for the engine-fault tests in tests/test_engines.py.

Usage: python fault_engine.py PROTOCOL BEHAVIOUR [PIDFILE]

PROTOCOL is `gtp` or `uci`. BEHAVIOUR is one of:
  exit        write "fatal: out of cheese" to stderr and exit with code 3 at once
  hang        read commands, never answer
  garbage     answer every line with text that is no protocol at all
  badmove     answer correctly, but with a move that does not exist ('Z99' / 'z9z9')
  child-work  spawn a child that sleeps (it inherits the pipes), then answer correctly
  child-hang  spawn a child that sleeps, answer correctly, but hang when asked for a move
  child-exit  spawn a child that sleeps, then exit with code 4 (the child keeps the pipes open)

When PIDFILE is given, "ENGINE_PID CHILD_PID" (0 when there is no child) is written to it before anything else.
Correct answers: GTP `= ...` replies (`genmove` passes), UCI `id`/`uciok`, `readyok` and `bestmove e2e4` (legal from
the start position only).
"""

import os
import subprocess
import sys
import time


def say(*lines: str) -> None:
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def answer_gtp(words: list[str], behaviour: str) -> None:
    command = words[0] if words else ""
    if command == "quit":
        say("=", "")
        sys.exit(0)
    if command == "genmove":
        if behaviour == "child-hang":
            time.sleep(600)
        say("= Z99" if behaviour == "badmove" else "= pass", "")
    elif command == "protocol_version":
        say("= 2", "")
    elif command == "name":
        say("= fake", "")
    else:
        say("=", "")


def answer_uci(words: list[str], behaviour: str) -> None:
    command = words[0] if words else ""
    if command == "quit":
        sys.exit(0)
    if command == "uci":
        say("id name fake", "option name Hash type spin default 16 min 1 max 1024", "uciok")
    elif command == "isready":
        say("readyok")
    elif command == "go":
        if behaviour == "child-hang":
            time.sleep(600)
        say("bestmove z9z9" if behaviour == "badmove" else "bestmove e2e4")


def main() -> None:
    protocol, behaviour = sys.argv[1], sys.argv[2]
    child = subprocess.Popen(["sleep", "600"]) if behaviour.startswith("child-") else None
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            f.write(f"{os.getpid()} {child.pid if child else 0}")
    if behaviour in ("exit", "child-exit"):
        sys.stderr.write("fatal: out of cheese\n")
        sys.stderr.flush()
        sys.exit(3 if behaviour == "exit" else 4)
    for line in sys.stdin:
        if behaviour == "hang":
            time.sleep(600)
        elif behaviour == "garbage":
            say("hello, I am not an engine")
        elif protocol == "gtp":
            answer_gtp(line.split(), behaviour)
        else:
            answer_uci(line.split(), behaviour)


if __name__ == "__main__":
    main()
