"""The UCI engine's searches (mixed into UciEngine, az_jax/frontends/uci_engine.py): one `go` in progress
(`Search`), its limits from the `go` command and the clock, the search thread, and its `info` and `bestmove` lines.
uci_engine.py's docstring states the decisions (`go` limits, `info` lines, the score).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
import traceback
from collections.abc import Iterable
from typing import TYPE_CHECKING

import chess

from az_jax.frontends import clock
from az_jax.frontends import uci_protocol as protocol
from az_jax.frontends.tree_search import MoveInfo, TreeSearch, think
from az_jax.runtime.agent import Agent
from envs.notation import chess_moves as cm


@dataclasses.dataclass
class Search:
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


class UciSearch:
    """`go`, `stop` and `ponderhit`'s search in a background thread (a mixin of UciEngine, which sets these
    attributes)."""

    agent: Agent | None
    simulations: int  # the Simulations option (0: the agent's default_simulations)
    multipv: int
    move_overhead_ms: int
    info_interval_s: float
    _synced: object  # UciPosition's: None after a failed search (the tree is rebuilt)
    _lock: threading.Lock  # guards `_search` and its `pondering` and `deadline`
    _send_lock: threading.RLock
    _search: Search | None
    _search_thread: threading.Thread | None

    if TYPE_CHECKING:  # UciEngine's

        @property
        def _tree(self) -> TreeSearch: ...

        def send(self, line: str) -> None: ...

        def note(self, message: str) -> None: ...

        def error(self, message: str) -> None: ...

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
        search = Search(
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

    def _limit_reached(self, search: Search) -> bool:
        """The search's own limits (not pondering): its time, its simulations, a full tree."""
        if time.monotonic() >= search.deadline or self._tree.full:
            return True
        return search.max_visits is not None and self._tree.visits >= search.max_visits

    def _run(self, search: Search) -> None:
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

    def _search_until_answer(self, search: Search) -> None:
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

    def _candidates(self, search: Search) -> list[MoveInfo]:
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

    def _maybe_info(self, search: Search) -> None:
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

    def _info(self, search: Search, moves: list[MoveInfo]) -> None:
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
