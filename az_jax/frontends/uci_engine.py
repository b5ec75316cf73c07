"""A trained chess agent as a UCI engine: `UciEngine` turns the GUI's lines into the engine's lines, `serve` runs it
on stdin/stdout (`az-jax uci`). The protocol is the Universal Chess Interface as specified by Stefan Meyer-Kahlen
(the "UCI protocol" document of April 2006, distributed with Shredder and the chess GUIs).

    engine = UciEngine(agent, send=print)    # agent: az_jax.agent.Agent of a "chess" run
    engine.handle("position startpos moves e2e4 e7e5")
    engine.handle("go nodes 64")             # searches in a background thread; `info ...` lines, then `bestmove ...`
    engine.wait()                            # until that search has answered

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

import dataclasses
import functools
import math
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import IO, Any

import chess
import jax
import jax.numpy as jnp
import numpy as np

from az_jax.agent import Agent
from az_jax.frontends import clock
from az_jax.frontends import uci_protocol as protocol
from az_jax.frontends.tree_search import MoveInfo, TreeSearch, think
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


# --- pgx states -------------------------------------------------------------------------------------------------------
@functools.cache
def _step(env):
    return jax.jit(env.step)


@functools.cache
def _start(env):
    return jax.jit(env.init)(jax.random.key(0))


@functools.cache
def _finish_fen_state():
    """A jitted function: pgx chess's game state fields (in pgx's layout, see `_fen_state`) -> the pgx `State`.

    What pgx.experimental.chess.from_fen does after parsing, with two differences: one compiled program (from_fen
    makes new jitted functions on every call: 0.4 s a position on a CPU), and a history of the position alone, as
    pgx's own start has (from_fen keeps its default history, the standard start position: an earlier board in the
    observation, and its hash counted as seen once)."""
    from pgx._src.games.chess import Game, GameState, _legal_action_mask, _zobrist_hash  # local: JAX arrays at import
    from pgx.chess import State

    game = Game()

    def finish(board, color, castling_rights, en_passant, halfmove_count, fullmove_count):
        x = GameState(
            board=board,
            color=color,
            castling_rights=castling_rights,
            en_passant=en_passant,
            halfmove_count=halfmove_count,
            fullmove_count=fullmove_count,
        )
        x = x._replace(legal_action_mask=_legal_action_mask(x))
        x = x._replace(
            board_history=jnp.zeros_like(x.board_history).at[0].set(x.board),
            hash_history=jnp.zeros_like(x.hash_history).at[0].set(_zobrist_hash(x)),
        )
        order = jnp.int32([0, 1])  # player 0 plays White
        return State(
            _player_order=order,
            _x=x,
            current_player=order[x.color],
            legal_action_mask=x.legal_action_mask,
            terminated=game.is_terminal(x),
            rewards=game.rewards(x)[order],
            observation=game.observe(x, x.color),
        )

    return jax.jit(finish)


def _fen_state(board: chess.Board):
    """The pgx chess state of `board`'s position, with no history (pgx.experimental.chess.from_fen's layout: square
    file·8 + rank and the pieces seen from the side to move, ranks mirrored and signs swapped for Black; castling
    rights [mover, opponent] × [queen side, king side]; the en passant square in the mover's view, only when an en
    passant capture is legal, as python-chess writes FENs). The halfmove clock is clamped to 100 (pgx ends its game
    there either way), the move number to 10⁶ (int32 fields)."""
    white = board.turn == chess.WHITE
    squares = np.zeros(64, np.int32)
    for square, piece in board.piece_map().items():
        rank = chess.square_rank(square) if white else 7 - chess.square_rank(square)
        squares[chess.square_file(square) * 8 + rank] = piece.piece_type * (1 if piece.color == board.turn else -1)
    rights = [
        [board.has_queenside_castling_rights(color), board.has_kingside_castling_rights(color)]
        for color in (board.turn, not board.turn)
    ]
    ep = -1
    if board.ep_square is not None and board.has_legal_en_passant():
        rank = chess.square_rank(board.ep_square)
        ep = chess.square_file(board.ep_square) * 8 + (rank if white else 7 - rank)
    return _finish_fen_state()(
        squares,
        np.int32(0 if white else 1),
        np.array(rights, bool),
        np.int32(ep),
        np.int32(min(board.halfmove_clock, 100)),
        np.int32(min(board.fullmove_number, 1_000_000)),
    )


def _check_chess(agent: Agent) -> Agent:
    if agent.config.game != "chess":
        raise ValueError(f"a UCI engine plays chess; this agent plays {agent.config.game}")
    return agent


def _legal_actions(state) -> frozenset[int]:
    return frozenset(int(a) for a in np.flatnonzero(np.asarray(state.legal_action_mask)))


# --- the engine -------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Search:
    """One `go` in progress. `pondering` and `deadline` change under the engine's lock (ponderhit)."""

    command: protocol.GoCommand
    board: chess.Board  # the root position
    max_visits: int | None  # the tree's simulations at which the search ends (None: no such limit)
    budget_s: float  # seconds for this move from when the clock runs (math.inf: no clock)
    pondering: bool
    start_visits: int
    started: float = dataclasses.field(default_factory=time.monotonic)
    deadline: float = math.inf  # time.monotonic() when the clock's share is spent
    last_info: float = -math.inf
    info_visits: int = -1  # the tree's simulations at the last info line
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    wake: threading.Event = dataclasses.field(default_factory=threading.Event)  # set by stop and ponderhit


class UciEngine:
    """The UCI protocol over one chess Agent's TreeSearch. `handle(line)` for each input line (False after `quit`);
    the engine's lines go to `send`, from the calling thread or the search thread (one line at a time).

    One thread calls `handle`; a search runs in a background thread (`wait()` waits for its bestmove)."""

    def __init__(
        self,
        agent: Agent | Callable[[], Agent],
        send: Callable[[str], None] = print,
        *,
        simulations: int | None = None,
        capacity: int | None = DEFAULT_CAPACITY,
        chunk: int = DEFAULT_CHUNK,
        seed: int = 0,
        info_interval_s: float = INFO_INTERVAL_S,
    ):
        """`agent`: a chess Agent, or a function that loads one (called by the warm-up, or by the first command that
        needs it: `isready`, `position`, `go`; its error is raised there). `simulations`: the Simulations option's
        default; without it, the agent's default_simulations (shown as 0, "the run's own", when `agent` is a
        loader, since `uci` is answered before it has run)."""
        if isinstance(agent, Agent):
            _check_chess(agent)
        self._load: Callable[[], Agent] = agent if not isinstance(agent, Agent) else (lambda: agent)
        self._tree_options: dict[str, Any] = {"capacity": capacity, "chunk": chunk, "seed": seed}
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
        self._search: _Search | None = None
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

    # -- positions and the tree ----------------------------------------------------------------------------------------
    def _board(self, position: protocol.Position | None = None) -> chess.Board:
        position = position or self.position
        board = chess.Board(position.root)
        for move in position.moves:
            board.push(move)
        return board

    def _state(self):
        """The tree's (unbatched) pgx state."""
        assert self._tree.state is not None, "the tree has not been reset"
        return self._tree.state

    def _sync(self) -> None:
        """Brings the tree to `self.position`: the same tree with 0, 1 or 2 moves played on, or a fresh one.
        PositionError if pgx does not reach the position or its legal moves there differ from python-chess's."""
        new, old = self.position, self._synced
        self._synced = None  # until this has succeeded
        stepped = False  # pgx stepped to the tree's state in this call (an ended game it steps into is handled below)
        extra = len(new.moves) - len(old.moves) if old is not None else -1
        if old is not None and new.root == old.root and 0 <= extra <= 2 and new.moves[: len(old.moves)] == old.moves:
            board = self._board(old)
            for move in new.moves[len(old.moves) :]:
                action = cm.move_to_action(move, board)
                if action not in _legal_actions(self._state()):
                    raise protocol.PositionError(f"pgx does not allow {move.uci()} in {board.fen()}")
                self._tree.play(action)
                board.push(move)
                stepped = True
        else:
            board = chess.Board(new.root)
            state = _start(self.env) if new.root == chess.STARTING_FEN else _fen_state(board)
            for move in new.moves:
                action = cm.move_to_action(move, board)
                if action not in _legal_actions(state):
                    raise protocol.PositionError(f"pgx does not allow {move.uci()} in {board.fen()}")
                state = _step(self.env)(state, jnp.int32(action))
                board.push(move)
                stepped = True
            self._tree.reset(state)
        legal = cm.legal_action_set(board)
        if legal and stepped and bool(self._state().terminated):
            # pgx has ended the game where chess goes on: its 512-ply cap, or 50 moves without progress, a threefold
            # repetition or too little material, which chess lets a player claim (or ends later). A pgx step into
            # such an end marks all 4,672 actions legal; pgx's FEN reader computes the position's real moves.
            self.note(
                "pgx's rules have ended this game (512 plies, 50 moves, repetition or material): the tree "
                "restarts from the position's FEN"
            )
            self._tree.reset(_fen_state(board))
        if (_legal_actions(self._state()) != legal) if legal else not bool(self._state().terminated):
            raise protocol.PositionError(f"pgx's legal moves differ from those of chess in {board.fen()}")
        self._synced = new

    # -- searching -----------------------------------------------------------------------------------------------------
    def _limits(self, command: protocol.GoCommand, board: chess.Board) -> tuple[int | None, float]:
        """(max_visits, seconds) of a `go`: the tree's simulations and the time at which it ends."""
        overhead = self.move_overhead_ms / 1000
        mine, inc = (command.wtime, command.winc) if board.turn == chess.WHITE else (command.btime, command.binc)
        seconds = math.inf
        if command.movetime is not None:
            seconds = max(clock.MIN_BUDGET_S, command.movetime / 1000 - overhead)
        elif mine is not None:
            moves_to_go = command.movestogo if command.movestogo and command.movestogo > 0 else None
            seconds = clock.move_budget(max(0, mine) / 1000, max(0, inc or 0) / 1000, moves_to_go, overhead_s=overhead)
        max_visits = max(1, command.nodes) if command.nodes is not None else None
        if max_visits is None and seconds == math.inf and not command.infinite:
            assert self.agent is not None
            max_visits = self.simulations or self.agent.default_simulations
        return max_visits, seconds

    def _start_search(self, command: protocol.GoCommand, board: chess.Board) -> None:
        max_visits, seconds = self._limits(command, board)
        search = _Search(
            command=command,
            board=board,
            max_visits=max_visits,
            budget_s=seconds,
            pondering=command.ponder,
            start_visits=self._tree.visits,
        )
        if not command.ponder:
            search.deadline = search.started + seconds
        with self._lock:
            self._search = search
        self._search_thread = threading.Thread(target=self._run, args=(search,), name="uci-search", daemon=True)
        self._search_thread.start()

    def _limit_reached(self, search: _Search) -> bool:
        """The search's own limits (not pondering): its time, its simulations, a full tree."""
        if time.monotonic() >= search.deadline or self._tree.full:
            return True
        return search.max_visits is not None and self._tree.visits >= search.max_visits

    def _run(self, search: _Search) -> None:
        """The search thread: searches until the `go`'s limits (or stop), then sends the final info and bestmove."""
        try:
            self._search_until_answer(search)
            moves = self._candidates(search)
            if self._tree.visits != search.info_visits:  # the final info, unless the last one says it already
                self._info(search, moves)
            best = moves[0]
            line = f"bestmove {cm.action_to_uci(best.action, search.board)}"
            pv = self._pv_moves(search.board, best.pv)
            if len(pv) >= 2:
                line += f" ponder {pv[1]}"
        except Exception:  # a bug: loud on stderr, but the GUI still gets a move (it would wait for one forever)
            traceback.print_exc(file=sys.stderr)
            self.error("the search failed (a bug; see stderr): playing the first legal move")
            self._synced = None
            line = f"bestmove {next(iter(search.board.legal_moves)).uci()}"
        with self._send_lock:  # a command sent after this bestmove finds the search ended, not "while searching"
            with self._lock:
                self._search = None
            self.send(line)

    def _search_until_answer(self, search: _Search) -> None:
        """Searches chunk by chunk until a bestmove may be sent: `stop`, or the limits reached when neither
        pondering (before ponderhit) nor `go infinite`. Those two wait for `stop` when the tree cannot grow."""
        said_full = False
        while not search.stop.is_set():
            search.wake.clear()  # before reading `pondering`: a ponderhit from now on wakes what follows
            with self._lock:
                pondering = search.pondering
            if not pondering and self._limit_reached(search):
                if not search.command.infinite:
                    return
            elif not self._tree.full:
                think(
                    self._tree,
                    max_visits=None if pondering else search.max_visits,
                    stop=lambda: search.wake.is_set() or (not search.pondering and self._limit_reached(search)),
                    on_chunk=lambda: self._maybe_info(search),
                )
                continue
            if self._tree.full and not said_full:
                self.note(f"the tree is full ({self._tree.visits} simulations): waiting for stop")
                said_full = True
            search.wake.wait()  # go infinite, or pondering: no bestmove before stop / ponderhit

    def _candidates(self, search: _Search) -> list[MoveInfo]:
        """The root's moves, best first; only those of `go searchmoves` if it named any legal one."""
        moves = self._tree.moves()
        if search.command.searchmoves:
            allowed = set(search.command.searchmoves)
            chosen = [m for m in moves if cm.action_to_uci(m.action, search.board) in allowed]
            if chosen:
                return chosen
            if search.last_info == -math.inf:
                self.note("ignored searchmoves: none of them is a legal move here")
        return moves

    def _maybe_info(self, search: _Search) -> None:
        if time.monotonic() - search.last_info >= self.info_interval_s:
            self._info(search, self._candidates(search))

    @staticmethod
    def _pv_moves(board: chess.Board, actions: Iterable[int]) -> list[str]:
        """The UCI moves of a principal variation from `board` (cut before a move that would not be legal)."""
        board = board.copy(stack=False)
        moves = []
        for action in actions:
            try:
                move = cm.action_to_move(action, board)
            except ValueError:
                break
            if not board.is_legal(move):
                break
            moves.append(move.uci())
            board.push(move)
        return moves

    def _info(self, search: _Search, moves: list[MoveInfo]) -> None:
        """`info depth D [multipv K] score cp C|mate 1 nodes N nps X time T pv ...` for the best MultiPV moves."""
        now = time.monotonic()
        search.last_info = now
        elapsed = max(now - search.started, 1e-6)
        visits = search.info_visits = self._tree.visits
        counters = f"nodes {visits} nps {int((visits - search.start_visits) / elapsed)} time {int(elapsed * 1000)}"
        for k, info in enumerate(moves[: self.multipv], start=1):
            pv = self._pv_moves(search.board, info.pv)
            if not pv:
                continue
            after = search.board.copy(stack=False)
            after.push_uci(pv[0])
            score = "mate 1" if after.is_checkmate() else f"cp {protocol.score_cp(2 * info.winrate - 1)}"
            multipv = f" multipv {k}" if self.multipv > 1 else ""
            self.send(f"info depth {len(pv)}{multipv} score {score} {counters} pv {' '.join(pv)}")

    def stop(self) -> None:
        """Ends the search in progress, if any (after its current chunk); returns once its bestmove is sent."""
        with self._lock:
            search = self._search
            if search is not None:
                search.stop.set()
                search.wake.set()
        self.wait()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits for the search in progress to send its bestmove; True when none runs (False: `timeout` passed)."""
        thread = self._search_thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

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
