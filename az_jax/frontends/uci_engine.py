"""A trained chess agent as a UCI engine: `UciEngine` turns the GUI's lines into the engine's lines, `serve` runs it
on stdin/stdout (`az-jax uci`). The protocol is the Universal Chess Interface as specified by Stefan Meyer-Kahlen
(the "UCI protocol" document of April 2006, distributed with Shredder and the chess GUIs).

    engine = UciEngine(agent, send=print)    # agent: az_jax.runtime.agent.Agent of a "chess" run
    engine.handle("position startpos moves e2e4 e7e5")
    engine.handle("go nodes 64")             # searches in a background thread; `info ...` lines, then `bestmove ...`
    engine.wait()                            # until that search has answered

The engine is in three modules: this one (the commands, the options, start-up and `serve`), uci_position.py (pgx
states from FENs and the tree brought to a `position`) and uci_search.py (a `go`'s search thread, its limits and its
`info` and `bestmove` lines); uci_protocol.py parses the commands.

Commands: `uci` (id, options, uciok), `isready` (readyok; waits for the start-up compilation), `ucinewgame`,
`position startpos|fen FEN [moves m1 m2 ...]`, `go [wtime btime winc binc movestogo movetime nodes infinite ponder
searchmoves depth mate]`, `stop`, `ponderhit`, `setoption name N [value V]`, `debug`, `register`, `quit`.

Decisions where the specification leaves room (each is NOT IN THE SPEC unless it says so):

* Rules and notation: python-chess parses and validates FENs and moves; pgx plays them (the search steps pgx's
  chess). A position is accepted only if pgx reaches it and pgx's legal moves there equal python-chess's; otherwise
  it is `info string error ...` and the previous position stays (UCI has no error reply). pgx has no Chess960
  castling, so a FEN whose castling rights are not those of standard chess is such an error, and so is any FEN that
  python-chess finds invalid (no king, pawns on the back rank, the side not to move in check, ...). A FEN position
  has no history: its repetition planes and earlier boards are empty, as at pgx's own start.
* Lines that are not supposed to come are ignored (spec: "If the engine or the GUI receives an unknown command or
  token it should just ignore it and try to parse the rest of the string in this line", so `joho debug on` is
  `debug on`), each with one `info string ...` saying what was ignored; nothing a GUI sends ends or crashes the
  engine except `quit` and the end of its input.
* While a search runs, `isready`, `stop`, `ponderhit`, `debug` and `quit` are answered at once; any other command
  first ends the search (its `bestmove` is sent), as if `stop` had come before it.
* `go` limits: `nodes N` stops when the tree holds N simulations (a reused subtree's visits count); `movetime T`
  searches T ms less the move overhead; `wtime/btime/winc/binc/movestogo` give the side to move's share of its clock
  (az_jax/frontends/clock.py, minus the `Move Overhead` option); `infinite` and `ponder` search until `stop` (or
  `ponderhit`, which starts the clock's share from then). With none of these the search adds simulations until the
  tree holds `Simulations` (the `--simulations` flag, or the run's evaluation simulations). `depth` and `mate` are
  accepted and ignored (an MCTS tree has no fixed depth): such a search is a `Simulations` search. `searchmoves`
  chooses the best move among those moves (the tree still searches all). The tree's capacity bounds every search;
  a full tree ends it (and `go infinite` then waits for `stop`).
* Tree reuse: a `position` that repeats the previous one with 0, 1 or 2 more moves continues its tree (TreeSearch.
  play); any other position starts a fresh tree.
* Options: `Simulations` (above), `MultiPV` (that many `info ... multipv k` lines, best first), `Move Overhead` (ms
  kept back per move for the reply to reach the GUI), `Ponder` (GUI hint; `go ponder`/`ponderhit` are supported
  either way). `Threads` is listed so that GUIs and lichess-bot configurations that set it work, and is ignored (with
  an `info string`): the search is one batch-of-one program on one JAX device, with no threads to set.
* `info` lines: after a search chunk, at most one every `info_interval_s` seconds, and one final line before
  `bestmove`: `depth` = the principal variation's length (an MCTS tree has no iteration depth), `nodes` = simulations
  in the tree, `nps` = simulations added per second in this search, `time` in ms, `score`, `pv`.
* Score: `score cp C` from the value v in [-1, 1] (for the side to move) of each line's first move (its child's Q;
  the root's value if it is unvisited), by Leela Chess Zero's conversion cp = 111.714640912 · tan(1.5620688421 · v)
  (lc0's documented Q-to-centipawn formula, "How does Lc0 calculate the cp eval?" in its FAQ, lczero.org; introduced
  in LeelaChessZero/lc0 pull request 841): v = 0 -> 0, v = 0.5 -> 111, v = 1 -> 12,800. A first move that
  checkmates is `score mate 1`. The tree's values are not proofs, so no other mate distance is claimed.
* No legal move (checkmate or stalemate): `info depth 0 score mate 0` or `score cp 0`, then `bestmove 0000` (spec: "a
  nullmove from the Engine to the GUI should be sent as 0000"). A position where pgx's rules have ended the game
  but chess has moves (pgx ends games at 512 plies, and at 50 moves without progress, a threefold repetition or too
  little material, which chess lets a player claim or ends later) restarts from its FEN, as pgx cannot step on from
  an ended game (its ply count and history start afresh, so a repetition is no longer seen). If pgx still ends it
  there (50 moves, material), the tree searches it anyway: every move scores as the game's end, so the network's
  prior decides; an `info string` says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import IO, Any

import chess
import jax.numpy as jnp

from az_jax.frontends import clock
from az_jax.frontends import uci_protocol as protocol
from az_jax.frontends.tree_search import TreeSearch
from az_jax.frontends.uci_position import UciPosition, _fen_state, _start, _step
from az_jax.frontends.uci_position import _legal_actions as _legal_actions
from az_jax.frontends.uci_search import Search, UciSearch
from az_jax.runtime.agent import Agent
from envs.notation import chess_moves as cm

ENGINE_NAME = "az-jax"
ENGINE_AUTHOR = "the az_jax authors"
MAX_SIMULATIONS = 1_000_000  # the `Simulations` option's maximum (as the CLI's --simulations)
MAX_MULTIPV = 256  # more than the legal moves of any chess position (at most 218)
MAX_OVERHEAD_MS = 60_000
DEFAULT_OVERHEAD_MS = int(round(clock.OVERHEAD_S * 1000))  # the `Move Overhead` option (ms)
MAX_THREADS = 1024
DEFAULT_CAPACITY = None  # tree nodes: None is tree_search.default_capacity (256 for chess); simulations a move holds
DEFAULT_CHUNK = 32  # simulations per jitted call: the granularity of `stop`, of the clock and of `info` lines
INFO_INTERVAL_S = 0.5  # at most one `info` line per this many seconds while searching (plus the final one)

# the commands of the spec (GUI to engine), and those answered while a search runs
COMMANDS = (
    "uci",
    "debug",
    "isready",
    "setoption",
    "register",
    "ucinewgame",
    "position",
    "go",
    "stop",
    "ponderhit",
    "quit",
)
WHILE_SEARCHING = ("isready", "stop", "ponderhit", "debug", "quit")  # answered at once during a search


def _check_chess(agent: Agent) -> Agent:
    if agent.config.game != "chess":
        raise ValueError(f"a UCI engine plays chess; this agent plays {agent.config.game}")
    return agent


# --- the engine -------------------------------------------------------------------------------------------------------
class UciEngine(UciPosition, UciSearch):
    """The UCI protocol over one chess Agent's TreeSearch. `handle(line)` for each input line (False after `quit`);
    the engine's lines go to `send`, from the calling thread or the search thread (one line at a time).

    One thread calls `handle`; a search runs in a background thread (`wait()` waits for its bestmove). The positions
    and the tree are UciPosition's (uci_position.py); the search, UciSearch's (uci_search.py)."""

    def __init__(
        self,
        agent: Agent | Callable[[], Agent],
        send: Callable[[str], None] = print,
        *,
        simulations: int | None = None,
        capacity: int | None = DEFAULT_CAPACITY,
        chunk: int = DEFAULT_CHUNK,
        seed: int = 0,
        search: str = "puct",
        info_interval_s: float = INFO_INTERVAL_S,
    ):
        """`agent`: a chess Agent, or a function that loads one (called by the warm-up, or by the first command that
        needs it: `isready`, `position`, `go`; its error is raised there). `simulations`: the Simulations option's
        default; without it, the agent's default_simulations (shown as 0, "the run's own", when `agent` is a
        loader, since `uci` is answered before it has run)."""
        if isinstance(agent, Agent):
            _check_chess(agent)
        self._load: Callable[[], Agent] = agent if not isinstance(agent, Agent) else (lambda: agent)
        self._tree_options: dict[str, Any] = {"capacity": capacity, "chunk": chunk, "seed": seed, "search": search}
        self.agent: Agent | None = None
        self.env: Any = None
        self.tree: TreeSearch | None = None
        self._send_fn = send
        self._send_lock = threading.RLock()  # also held by a search's end: its bestmove and `searching` turning false
        if simulations:
            self.default_simulations = int(simulations)
        else:
            self.default_simulations = agent.default_simulations if isinstance(agent, Agent) else 0
        self.simulations = self.default_simulations  # 0: the agent's default_simulations
        self.multipv = 1
        self.move_overhead_ms = DEFAULT_OVERHEAD_MS
        self.info_interval_s = info_interval_s
        self.position = protocol.Position(chess.STARTING_FEN, ())
        self._synced: protocol.Position | None = None  # the position the tree is at (None: rebuild it before using it)
        self._lock = threading.Lock()
        self._search: Search | None = None
        self._search_thread: threading.Thread | None = None
        self._warm_up_thread: threading.Thread | None = None
        self._warm_up_error: BaseException | None = None
        self.debug = False
        self.closed = False  # the output has gone (broken pipe): nothing more is written

    def _setup(self) -> None:
        """Loads the agent and makes its tree (no compilation yet)."""
        agent = _check_chess(self._load())
        self.agent, self.env = agent, agent.env
        self.tree = TreeSearch(agent, agent.env, **self._tree_options)

    @property
    def _tree(self) -> TreeSearch:
        assert self.tree is not None, "the engine is not set up"
        return self.tree

    def _ready(self) -> None:
        """Waits for the warm-up (raising its error, if any); sets up the agent and tree if nothing has yet."""
        self._join_warm_up()
        if self.tree is None:
            self._setup()

    # -- output ------------------------------------------------------------------------------------------------------
    def send(self, line: str) -> None:
        with self._send_lock:
            if self.closed:
                return
            try:
                self._send_fn(line)
            except (BrokenPipeError, ValueError, OSError):  # the GUI has gone: write nothing more, read on to EOF
                self.closed = True

    def note(self, message: str) -> None:
        self.send(f"info string {message}")

    def error(self, message: str) -> None:
        self.send(f"info string error: {message}")

    # -- input -------------------------------------------------------------------------------------------------------
    def handle(self, line: str) -> bool:
        """One input line; False when the engine is to exit (`quit`)."""
        tokens = line.split()
        if not tokens:
            return True
        start = next((i for i, t in enumerate(tokens) if t in COMMANDS), None)
        if start is None:
            self.note(f"ignored unknown command {protocol.echo(tokens[0])!r}")
            return True
        if start > 0:
            self.note(f"ignored unknown tokens before {tokens[start]!r}: {protocol.echo(' '.join(tokens[:start]))!r}")
        command, args = tokens[start], tokens[start + 1 :]
        if command not in WHILE_SEARCHING and self.searching:
            self.note(f"{command} while searching: the search stops first")
            self.stop()
        return getattr(self, f"_cmd_{command}")(args)

    @property
    def searching(self) -> bool:
        with self._lock:
            return self._search is not None

    def _cmd_uci(self, args) -> bool:
        self.send(f"id name {ENGINE_NAME} chess")
        self.send(f"id author {ENGINE_AUTHOR}")
        self.send(f"option name Simulations type spin default {self.default_simulations} min 0 max {MAX_SIMULATIONS}")
        self.send(f"option name MultiPV type spin default 1 min 1 max {MAX_MULTIPV}")
        self.send(f"option name Move Overhead type spin default {DEFAULT_OVERHEAD_MS} min 0 max {MAX_OVERHEAD_MS}")
        self.send("option name Ponder type check default false")
        self.send(f"option name Threads type spin default 1 min 1 max {MAX_THREADS}")
        self.send("uciok")
        return True

    def _cmd_debug(self, args) -> bool:
        if args[:1] in (["on"], ["off"]):
            self.debug = args[0] == "on"
        else:
            self.note("ignored debug: expected 'debug on' or 'debug off'")
        return True

    def _cmd_isready(self, args) -> bool:
        self._ready()
        self.send("readyok")
        return True

    def _cmd_register(self, args) -> bool:
        self.note("no registration needed")
        return True

    def _cmd_setoption(self, args) -> bool:
        if len(args) < 2 or args[0] != "name":
            self.note("ignored setoption: expected 'setoption name NAME [value VALUE]'")
            return True
        end = args.index("value") if "value" in args else len(args)
        name, value = " ".join(args[1:end]), " ".join(args[end + 1 :])
        key = name.lower()

        def integer(low: int, high: int) -> int | None:
            if protocol.INTEGER.fullmatch(value) and low <= int(value) <= high:
                return int(value)
            self.note(f"ignored setoption {protocol.echo(name)}: the value must be an integer from {low} to {high}")
            return None

        if key == "simulations":
            if (n := integer(0, MAX_SIMULATIONS)) is not None:
                self.simulations = n
        elif key == "multipv":
            if (n := integer(1, MAX_MULTIPV)) is not None:
                self.multipv = n
        elif key == "move overhead":
            if (n := integer(0, MAX_OVERHEAD_MS)) is not None:
                self.move_overhead_ms = n
        elif key == "ponder":
            if value.lower() not in ("true", "false"):
                self.note("ignored setoption Ponder: the value must be true or false")
        elif key == "threads":
            if integer(1, MAX_THREADS) is not None:
                self.note("Threads has no effect: the search is one program on one JAX device")
        else:
            self.note(f"ignored setoption: no option {protocol.echo(name)!r}")
        return True

    def _cmd_ucinewgame(self, args) -> bool:
        self.position = protocol.Position(chess.STARTING_FEN, ())
        self._synced = None  # a new game: no tree from the last one
        return True

    def _cmd_position(self, args) -> bool:
        try:
            new = protocol.parse_position(args)
        except protocol.PositionError as e:
            self.error(f"{e}; the position is unchanged")
            return True
        self._ready()
        old, self.position = self.position, new
        try:
            self._sync()
        except protocol.PositionError as e:
            self.position, self._synced = old, None
            self.error(f"{e}; the position is unchanged")
        return True

    def _cmd_go(self, args) -> bool:
        command, notes = protocol.parse_go(args)
        for message in notes:
            self.note(message)
        if command.depth is not None or command.mate is not None:
            self.note("go depth and go mate are not used (an MCTS tree has no fixed depth)")
        self._ready()
        board = self._board()
        try:
            self._sync()
        except (
            protocol.PositionError
        ) as e:  # cannot happen for a position `position` accepted; still, always a bestmove
            self.error(str(e))
            self.send("bestmove 0000")
            return True
        if not any(board.legal_moves):
            self.send(f"info depth 0 score {'mate 0' if board.is_checkmate() else 'cp 0'}")
            self.send("bestmove 0000")
            return True
        if bool(self._state().terminated):
            self.note("pgx's rules end the game here (50 moves or material): every move scores as its end")
        self._start_search(command, board)
        return True

    def _cmd_stop(self, args) -> bool:
        self.stop()
        return True

    def _cmd_ponderhit(self, args) -> bool:
        with self._lock:
            search = self._search
            if search is not None and search.pondering:
                search.pondering = False
                search.deadline = time.monotonic() + search.budget_s
                search.wake.set()
                return True
        self.note("ignored ponderhit: not pondering")
        return True

    def _cmd_quit(self, args) -> bool:
        self.close()
        return False

    # -- start-up and shutdown -----------------------------------------------------------------------------------------
    def start_warm_up(self) -> None:
        """Loads the agent (when given a loader) and compiles the search's programs in a background thread (pgx chess
        takes tens of seconds on a CPU), so that `uci` is answered at once; `isready`, `position` and `go` wait for
        it, and raise its error."""
        self._warm_up_thread = threading.Thread(target=self._warm_up, name="uci-warm-up", daemon=True)
        self._warm_up_thread.start()

    def _warm_up(self) -> None:
        try:
            self._setup()
            tree = self._tree
            start = _start(self.env)
            e2e4 = cm.move_to_action(chess.Move.from_uci("e2e4"), chess.Board())
            _step(self.env)(start, jnp.int32(e2e4))
            tree.reset(start)
            for _ in range(2):  # a reused tree's arrays may differ from a fresh one's: both shapes, searched and played
                tree.search(tree.chunk)
                tree.play(tree.best_action())
            tree.search(tree.chunk)
            tree.moves()
            _fen_state(chess.Board())
        except BaseException as e:  # raised again in the thread that reads the commands
            self._warm_up_error = e
        self._synced = None

    def _join_warm_up(self) -> None:
        """Waits for the warm-up, if one runs; raises its error (once)."""
        if self._warm_up_thread is not None:
            self._warm_up_thread.join()
            self._warm_up_thread = None
        if self._warm_up_error is not None:
            error, self._warm_up_error = self._warm_up_error, None
            raise error

    def close(self) -> None:
        """Stops any search (its bestmove is sent) and waits for the background threads (a warm-up's error is not
        raised: the engine is ending)."""
        self.stop()
        if self._warm_up_thread is not None:
            self._warm_up_thread.join()
            self._warm_up_thread = None


def line_writer(stream: IO[str]) -> Callable[[str], None]:
    """A `send` for UciEngine: each line written and flushed at once (a GUI reads the pipe line by line)."""

    def write(line: str) -> None:
        stream.write(line + "\n")
        stream.flush()

    return write


def serve(
    agent: Agent | Callable[[], Agent], stdin: IO[str], stdout: IO[str], *, warm_up: bool = True, **options
) -> int:
    """`agent` (or its loader, run by the warm-up) as a UCI engine reading `stdin` until `quit` or the end of input,
    answering on `stdout`; `options` are UciEngine's. Returns the exit status, 0. A line that does not decode is
    ignored (the CLI reads stdin with errors="replace", so none should reach here)."""
    engine = UciEngine(agent, line_writer(stdout), **options)
    if warm_up:
        engine.start_warm_up()
    try:
        while True:
            try:
                line = stdin.readline()
            except UnicodeDecodeError:
                engine.note("ignored input that is not UTF-8")
                continue
            if not line or not engine.handle(line):
                break
    finally:
        engine.close()
    return 0
