"""The GTP engine's searches (mixed into GoEngine, az_jax/frontends/gtp_engine.py): the tree kept between moves,
genmove's search (to a number of simulations, or to a share of GTP's Canadian byo-yomi clock) and its choice of move
or resignation, and the analysis commands of Leela Zero and KataGo (lz-analyze, kata-analyze and their genmove_analyze
forms). gtp_engine.py's docstring states the decisions (genmove, resignation, the analysis lines).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable

import jax
import pgx

from az_jax.frontends import gtp_protocol as protocol
from az_jax.frontends.clock import move_budget
from az_jax.frontends.gtp_game import GoGame
from az_jax.frontends.tree_search import MoveInfo, TreeSearch, think
from envs import go_scoring
from envs.notation import go

_CHECKED_PASS = jax.jit(go_scoring.checked_pass)
DEFAULT_INTERVAL_CS = 100  # analysis output interval when the controller gives none (centiseconds)
MAX_PV = 40  # moves of a principal variation an analysis line shows


@dataclasses.dataclass
class _Clock:
    """GTP's Canadian byo-yomi (the spec's time_settings and time_left), as the controller last reported it."""

    main_s: float  # main time, seconds
    byo_yomi_s: float  # one byo-yomi period, seconds
    byo_yomi_stones: int  # stones to play in each period; 0: no byo-yomi (absolute time)
    left_s: list[float | None]  # per colour: time left as time_left reported it (None: not yet: main_s)
    left_stones: list[int]  # per colour: 0 while in main time, else stones left in the current period

    def budget(self, colour: int) -> float:
        """Seconds to think about `colour`'s move (clock.move_budget)."""
        left = self.left_s[colour]
        if self.left_stones[colour] > 0 and left is not None:  # in byo-yomi: `left` seconds for that many stones
            return move_budget(0.0, byo_yomi_s=left, byo_yomi_stones=self.left_stones[colour])
        remaining = self.main_s if left is None else left
        return move_budget(remaining, byo_yomi_s=self.byo_yomi_s, byo_yomi_stones=self.byo_yomi_stones)

    def spend(self, colour: int, seconds: float) -> None:
        """Counts our own time until the controller reports it again (time_left)."""
        if self.left_stones[colour] == 0:
            left = self.main_s if self.left_s[colour] is None else self.left_s[colour]
            assert left is not None
            self.left_s[colour] = max(0.0, left - seconds)


@dataclasses.dataclass
class _Analysis:
    """The arguments of an analysis command."""

    colour: int | None = None
    interval_s: float = DEFAULT_INTERVAL_CS / 100
    max_moves: int | None = None


class GoSearch(GoGame):
    """genmove's search and the analysis commands (a mixin of GoEngine, which sets these attributes)."""

    simulations: int | None
    resign_threshold: float
    clock: _Clock | None
    _id: str  # the id of the command being run

    def _tree(self, actions: tuple[int, ...], state: pgx.State) -> TreeSearch:
        """The TreeSearch with its root at the position of `actions` (`state`): the kept tree moved on by the actions
        played since (tree reuse), or a fresh root if the position is not a continuation of the tree's."""
        ts = self._env()[3]
        old = self._tree_actions
        if old is not None and ts.state is not None and actions[: len(old)] == old and len(actions) - len(old) <= 4:
            for action in actions[len(old) :]:
                ts.play(action)
        elif old != actions or ts.state is None:
            ts.reset(state)
        self._tree_actions = actions
        return ts

    def _think(self, ts: TreeSearch, colour: int, on_chunk: Callable[[], None] | None = None) -> None:
        """genmove's search: to `simulations` visits with no clock; the clock's budget (capped) with one."""
        if self.clock is None:
            target = self.simulations or self.agent.default_simulations
            if on_chunk is None:
                ts.search(max(0, target - ts.visits))
            elif ts.visits < target:
                think(ts, max_visits=target, on_chunk=on_chunk)
            return
        start = time.monotonic()
        think(ts, seconds=self.clock.budget(colour), max_visits=self.simulations, on_chunk=on_chunk)
        self.clock.spend(colour, time.monotonic() - start)

    def _choose(self, ts: TreeSearch, colour: int) -> tuple[str, int | None, list[pgx.State] | None]:
        """('resign', None, None) or (vertex, action, the positions it leads to) after the search."""
        moves = ts.moves()
        if self.resign_threshold > -1.0 and moves:
            best_q = 2.0 * moves[0].winrate - 1.0
            if max(ts.value, best_q) < self.resign_threshold:
                return go.RESIGN, None, None
        if getattr(self.agent.config, "pass_check", False) and moves:  # the count decides a pass (Config.pass_check)
            others = [m.action for m in moves if m.action != self.size * self.size]
            best_other = others[0] if others else moves[0].action
            checked = int(_CHECKED_PASS(ts.state, moves[0].action, best_other))
            moves = sorted(moves, key=lambda m: m.action != checked)  # stable: the checked move first
        for move in moves:  # the most visited move that is not a superko repetition (pass never is)
            states = self._try(colour, move.action)
            if states is not None:
                return self._vertex(move.action), move.action, states
        raise AssertionError("pass is always legal")

    def _generate(self, colour: int, commit: bool, on_chunk: Callable[[TreeSearch], None] | None = None) -> str:
        if self._over():
            if commit:
                self._moves.append(())
                self._states.append(self.state)
            return go.PASS
        actions, state = self._actions(), self.state
        if self._to_move() != colour:
            passed = self._passed()
            if passed is None:
                raise protocol.CommandError("illegal move")  # the inserted pass would end the game
            actions, state = (*actions, self.size * self.size), passed
        ts = self._tree(actions, state)
        self._think(ts, colour, None if on_chunk is None else lambda: on_chunk(ts))
        vertex, action, states = self._choose(ts, colour)
        if commit and action is not None and states is not None:
            self._commit(action, states)
        return vertex

    # -- analysis ----------------------------------------------------------------------------------------------------

    def _analysis_args(self, args: list[str]) -> _Analysis:
        """`[colour] [interval] key value ...` (KataGo's docs/GTP_Extensions.md)."""
        a, rest = _Analysis(), list(args)
        if rest and rest[0].lower() in ("b", "w", "black", "white"):
            a.colour = protocol.colour(rest.pop(0))
        if rest and re.fullmatch(r"[0-9]+", rest[0]):
            a.interval_s = protocol.integer(rest.pop(0), "interval", 0, 10**9) / 100
        while rest:
            key = rest.pop(0)
            if key in ("avoid", "allow"):  # avoid PLAYER VERTICES UNTILDEPTH: not implemented, ignored
                del rest[:3]
                continue
            if not rest:
                raise protocol.CommandError(f"syntax error: {protocol.quote(key)} needs a value")
            value = rest.pop(0)
            if key == "interval":
                a.interval_s = protocol.integer(value, "interval", 0, 10**9) / 100
            elif key == "maxmoves":
                a.max_moves = protocol.integer(value, "maxmoves", 0, 10**9)
            # minmoves, ownership, pvVisits, ...: accepted and ignored
        return a

    def _info(self, ts: TreeSearch, kata: bool, max_moves: int | None) -> str:
        """One analysis line: `info move ... pv ...` for each visited move, most visited first."""
        moves: list[MoveInfo] = [m for m in ts.moves() if m.visits > 0][:max_moves]
        parts = []
        for order, m in enumerate(moves):
            if kata:
                winrate, prior = f"{m.winrate:.6f}", f"{m.prior:.6f}"
            else:
                winrate = str(min(10000, max(0, round(10000 * m.winrate))))
                prior = str(min(10000, max(0, round(10000 * m.prior))))
            pv = " ".join(self._vertex(a) for a in m.pv[:MAX_PV])
            parts.append(
                f"info move {self._vertex(m.action)} visits {m.visits} winrate {winrate} prior {prior} "
                f"order {order} pv {pv}"
            )
        return " ".join(parts)

    def _reporter(self, stream: protocol.Stream, kata: bool, a: _Analysis) -> Callable[[TreeSearch], None]:
        """on_chunk for analysis: an info line every interval (the first after one interval)."""
        last = [time.monotonic()]

        def report(ts: TreeSearch) -> None:
            now = time.monotonic()
            if now - last[0] >= a.interval_s:
                line = self._info(ts, kata, a.max_moves)
                if line:
                    stream.write(line + "\n")
                    last[0] = now

        return report

    def _analyze(self, args, stream: protocol.Stream, kata: bool) -> str:
        a = self._analysis_args(args)
        actions, state = self._actions(), self.state
        if a.colour is not None and a.colour != self._to_move() and not self._over():
            passed = self._passed()
            if passed is None:
                raise protocol.CommandError("illegal move")  # a pass would end the game: nothing to analyse
            actions, state = (*actions, self.size * self.size), passed
        stream.write(f"={self._id}\n")
        if not self._over(state):
            ts = self._tree(actions, state)
            report = self._reporter(stream, kata, a)
            think(ts, stop=stream.pending, on_chunk=lambda: report(ts))
            if not stream.pending():  # the tree is full: say so once more, then wait for the controller
                line = self._info(ts, kata, a.max_moves)
                if line:
                    stream.write(line + "\n")
        stream.wait()
        return "\n"

    def _genmove_analyze(self, args, stream: protocol.Stream, kata: bool) -> str:
        a = self._analysis_args(args)
        if a.colour is None:
            raise protocol.CommandError("syntax error: expected a colour")
        if not self._over() and self._to_move() != a.colour and self._passed() is None:
            raise protocol.CommandError("illegal move")  # the inserted pass would end the game
        stream.write(f"={self._id}\n")
        vertex = self._generate(a.colour, commit=True, on_chunk=self._reporter(stream, kata, a))
        return f"play {vertex}\n\n"
