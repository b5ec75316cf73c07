"""A trained Go agent as a GTP engine (Go Text Protocol version 2, G. Farnebäck, "Specification of the Go Text
Protocol, version 2, draft 2", 2002; https://www.lysator.liu.se/~gunnar/gtp/), behind `az-jax gtp`.

    engine = GoEngine(agent, simulations=200)
    engine.handle("1 genmove b")        # -> "=1 E5\\n\\n": one input line in, its whole response out
    serve(engine, sys.stdin.buffer, sys.stdout)   # the stdin/stdout loop, with live analysis

The protocol: a command line is `[id] name [arguments]`; before parsing (the spec's section 3.1, preprocessing),
control characters other than HT are removed, everything from a `#` on is a comment, HT becomes a space, and an
empty line is ignored (no response). A response is `=[id] result` or `?[id] error message`, possibly on several
lines, ended by an empty line. Every other line gets exactly one response; nothing the controller sends ends the
engine but `quit` or the end of its input (a bug in a command answers `? internal error: ...` and logs its traceback
on stderr).

Commands: the spec's required and tournament set (protocol_version, name, version, known_command, list_commands,
quit, boardsize, clear_board, komi, play, genmove, undo, final_score, final_status_list, time_settings, time_left,
showboard, reg_genmove, set_free_handicap) and the analysis extensions of Leela Zero and KataGo as Lizzie and
Sabaki read them (lz-analyze, kata-analyze, lz-genmove_analyze, kata-genmove_analyze; KataGo's
docs/GTP_Extensions.md describes the formats). KaTrain talks to KataGo's JSON analysis engine, not to GTP.

Decisions where pgx's rules or the network constrain GTP (pgx Go: Tromp-Taylor area scoring, positional superko,
strict alternation, the game over after two passes or 2·N² plies):

* boardsize: only the network's own size (go_9x9: 9, go_19x19: 19); any other is `? unacceptable size`.
* komi: accepted (any finite value with |komi| <= 1000). The game is played and scored with it: the search's
  terminal values and final_score use a pgx Go env built with the controller's komi. The network itself was trained
  with the run's komi (7.5 for pgx's go_9x9 and go_19x19) and its evaluations assume that; a different komi is said
  once on stderr.
* play of the colour that is not to move (handicap stones, a GUI's edits; GNU Go and KataGo let either colour play
  at any time, pgx alternates strictly): a pass of the other colour is inserted first, and undo takes both back.
  Where that pass would end the game (the previous move was a pass), the move is refused (`? illegal move`).
  genmove and set_free_handicap do the same.
* superko: a move that repeats an earlier position is illegal (`? illegal move`), as under Tromp-Taylor rules; pgx
  would end the game with the mover's loss. The engine never plays one.
* after the game is over (two passes, or pgx's cap of 2·N² plies): a pass (play or genmove) is accepted and changes
  nothing; any other move is `? illegal move`. final_score stays the score of the final position.
* final_score: the Tromp-Taylor area score of the current position (every stone counted alive), Black's area minus
  White's minus komi: `B+3.5`, `W+0.5` or `0`. final_status_list: every stone is alive, none dead or in seki.
* genmove: with no clock, the search grows the tree (the subtree kept from the previous moves counts) to
  `simulations` visits, then plays the most visited move; with a clock (time_settings / time_left), it searches
  until the move's share of the clock (az_jax.frontends.clock.move_budget) is spent or the tree holds `simulations`
  visits when that was given, or is full. It answers `resign` when both the root's search value and the chosen
  move's value for the side to move are below `resign_threshold` (AlphaGo Zero's rule, az_jax/resign.py; -1 never
  resigns) and `pass` when the most visited move is pass. reg_genmove searches the same way but plays nothing.
* analysis: `lz-analyze [colour] [interval] [interval N] [maxmoves N] [minmoves N]` and `kata-analyze ...` answer
  `=` at once, then every `interval` centiseconds (default 100) one line `info move D4 visits 123 winrate 5432
  prior 1234 order 0 pv D4 Q16 info move ...` of the visited moves, most visited first (lz-analyze: winrate and prior
  in 1/10000 as integers; kata-analyze: floats in [0, 1], and no scoreLead: the network has no score head), for the
  side to move, until the controller sends the next line (any line, as KataGo does), which ends the response with
  its empty line and is then run. A colour that is not to move analyses the position after a pass. Other key-value
  pairs (ownership, avoid, allow, ...) are ignored. lz-genmove_analyze / kata-genmove_analyze: genmove with those
  lines while it searches, then `play VERTEX`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import math
import re
import sys
import time
import traceback
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pgx
from pgx.go import Go

from az_jax.frontends import gtp_protocol as protocol
from az_jax.frontends.clock import move_budget
from az_jax.frontends.tree_search import MoveInfo, TreeSearch, think
from envs import notation
from envs.notation import go

GO_GAMES = ("go_9x9", "go_19x19")
NAME = "az_jax"
DEFAULT_RESIGN_THRESHOLD = -0.8  # AlphaGo's resignation value (config.v_resign_init); -1 never resigns
DEFAULT_INTERVAL_CS = 100  # analysis output interval when the controller gives none (centiseconds)
MAX_KOMI = 1000.0
MAX_SECONDS = 1e9  # time_settings / time_left beyond this are treated as this (31 years)
MAX_PV = 40  # moves of a principal variation an analysis line shows
KOMI_ENVS = 4  # komi values whose pgx env (and compiled search) are kept

COMMANDS = (
    "protocol_version",
    "name",
    "version",
    "known_command",
    "list_commands",
    "quit",
    "boardsize",
    "clear_board",
    "komi",
    "play",
    "genmove",
    "reg_genmove",
    "undo",
    "showboard",
    "final_score",
    "final_status_list",
    "time_settings",
    "time_left",
    "set_free_handicap",
    "lz-analyze",
    "kata-analyze",
    "lz-genmove_analyze",
    "kata-genmove_analyze",
)


@functools.cache
def _areas(size: int) -> Callable:
    """Jitted (Black's, White's) Tromp-Taylor area of a pgx Go game state: stones plus the empty points that reach
    only that colour (pgx's own count, envs.records.go_margin reads it too)."""
    from pgx._src.games.go import _count_scores  # local: private to pgx

    return jax.jit(lambda x: _count_scores(x, size))


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


class GoEngine:
    """The GTP engine's state (the game, the clock, the search tree kept between moves) and its commands.

    Args:
      agent: an az_jax.agent.Agent of go_9x9 or go_19x19.
      simulations: visits per genmove with no clock (the kept subtree's count); the cap with a clock. Default: the
        agent's (config.eval_simulations or num_simulations) with no clock, no cap with one.
      resign_threshold: resign when the root's value and the chosen move's value (in [-1, 1], for the side to move)
        are both below it; -1 never resigns.
      capacity, chunk, seed: of the TreeSearch (nodes kept, None for tree_search.default_capacity; simulations per
        jitted call; tie-break noise).
      log: where lines for the person running the engine go (stderr by default); never the protocol's stdout.
    """

    def __init__(
        self,
        agent,
        *,
        simulations: int | None = None,
        resign_threshold: float = DEFAULT_RESIGN_THRESHOLD,
        capacity: int | None = None,
        chunk: int = 32,
        seed: int = 0,
        log: Callable[[str], None] | None = None,
    ):
        game = agent.config.game
        if game not in GO_GAMES:
            raise ValueError(f"a GTP engine plays Go ({', '.join(GO_GAMES)}); this agent plays {game}")
        if simulations is not None and simulations < 1:
            raise ValueError(f"simulations must be >= 1, got {simulations}")
        if not -1.0 <= resign_threshold <= 1.0:
            raise ValueError(f"resign_threshold must be in [-1, 1], got {resign_threshold}")
        self.agent, self.game = agent, game
        self.size = int(agent.env._game.size)
        self.trained_komi = float(agent.env._game.komi)
        self.simulations, self.resign_threshold = simulations, resign_threshold
        self.capacity, self.chunk, self.seed = capacity, chunk, seed
        self.log = log or (lambda text: print(text, file=sys.stderr, flush=True))
        self.finished = False  # after quit
        self._id = ""  # the id of the command being run
        self.komi = self.trained_komi
        self._komi_said = False
        self._envs: dict[float, tuple[pgx.Env, Callable, Callable, TreeSearch]] = {}
        self.clock: _Clock | None = None
        # per play/genmove: the pgx actions it added (an inserted pass first; none for a pass after the game's end)
        self._moves: list[tuple[int, ...]] = []
        # the start position, then the position after each action (and the same position again for a () move)
        self._states: list[pgx.State] = []
        self._tree_actions: tuple[int, ...] | None = None  # the actions that lead to the tree's root
        self._clear()
        self._handlers: dict[str, Callable[[list[str], protocol.Stream], str]] = {
            "protocol_version": lambda args, s: "2",
            "name": lambda args, s: NAME,
            "version": self._version,
            "known_command": self._known_command,
            "list_commands": lambda args, s: "\n".join(COMMANDS),
            "quit": self._quit,
            "boardsize": self._boardsize,
            "clear_board": self._clear_board,
            "komi": self._komi,
            "play": self._play,
            "genmove": lambda args, s: self._genmove(args, s, commit=True),
            "reg_genmove": lambda args, s: self._genmove(args, s, commit=False),
            "undo": self._undo,
            "showboard": self._showboard,
            "final_score": self._final_score,
            "final_status_list": self._final_status_list,
            "time_settings": self._time_settings,
            "time_left": self._time_left,
            "set_free_handicap": self._set_free_handicap,
            "lz-analyze": lambda args, s: self._analyze(args, s, kata=False),
            "kata-analyze": lambda args, s: self._analyze(args, s, kata=True),
            "lz-genmove_analyze": lambda args, s: self._genmove_analyze(args, s, kata=False),
            "kata-genmove_analyze": lambda args, s: self._genmove_analyze(args, s, kata=True),
        }
        assert tuple(self._handlers) == COMMANDS

    # -- the protocol ------------------------------------------------------------------------------------------------

    def handle(self, line: str, stream: protocol.Stream | None = None) -> str:
        """The response to one raw input line ('' for a line to ignore). A streaming command writes its first lines
        through `stream` as it goes and returns the rest; without a stream the whole response is returned (analysis
        then stops after its first report)."""
        text = protocol.preprocess(line)
        if not text:
            return ""
        collect = protocol.Collect() if stream is None else None
        out: protocol.Stream = collect if collect is not None else stream  # type: ignore[assignment]
        tokens = text.split()
        id_ = ""
        if protocol.COMMAND_ID.fullmatch(tokens[0]):
            id_, tokens = tokens[0], tokens[1:]
        if not tokens:
            return protocol.response(False, id_, "unknown command")
        name, args = tokens[0], tokens[1:]
        handler = self._handlers.get(name)
        if handler is None:
            return protocol.response(False, id_, "unknown command")
        self._id = id_
        try:
            result = handler(args, out)
        except protocol.CommandError as e:
            return protocol.response(False, id_, str(e))
        except BrokenPipeError:  # the controller is gone (an analysis was writing): serve ends
            raise
        except Exception as e:  # a bug: the controller gets an answer and the engine goes on
            self.log(f"az-jax gtp: internal error in {name!r}:\n{traceback.format_exc().rstrip()}")
            self._tree_actions = None  # the tree may be half-updated: rebuilt on the next search
            return protocol.response(False, id_, f"internal error: {type(e).__name__}")
        if name in ("lz-analyze", "kata-analyze", "lz-genmove_analyze", "kata-genmove_analyze"):
            # the '=' line and the info lines were written through the stream; `result` ends the response
            return "".join(collect.parts) + result if collect is not None else result
        return protocol.response(True, id_, result)

    # -- the game ----------------------------------------------------------------------------------------------------

    def _env(self) -> tuple[pgx.Env, Callable, Callable, TreeSearch]:
        """(pgx env with the current komi, jitted init, jitted step, its TreeSearch), made once per komi."""
        if self.komi not in self._envs:
            if self.komi == self.trained_komi:
                env = self.agent.env
            else:
                base = self.agent.env._game
                env = Go(
                    size=self.size,
                    komi=self.komi,
                    history_length=base.history_length,
                    max_terminal_steps=base.max_termination_steps,
                )
            ts = TreeSearch(self.agent, env=env, capacity=self.capacity, chunk=self.chunk, seed=self.seed)
            init = jax.jit(env.init)
            step = jax.jit(lambda state, action: env.step(state, action))
            if len(self._envs) >= KOMI_ENVS:
                del self._envs[next(iter(self._envs))]
            self._envs[self.komi] = (env, init, step, ts)
        return self._envs[self.komi]

    def _clear(self) -> None:
        """An empty board: the history is the start position alone."""
        self._replay([])

    def _replay(self, moves: list[tuple[int, ...]]) -> None:
        """The positions of `moves` from the start, with the current komi's env."""
        _, init, step, _ = self._env()
        states = [init(jax.random.key(0))]
        for actions in moves:
            for action in actions:
                states.append(step(states[-1], jnp.int32(action)))
            if not actions:  # a pass after the game's end: the position again (undo takes it off)
                states.append(states[-1])
        self._moves, self._states, self._tree_actions = list(moves), states, None

    @property
    def state(self) -> pgx.State:
        return self._states[-1]

    def _actions(self) -> tuple[int, ...]:
        return tuple(a for actions in self._moves for a in actions)

    def _over(self, state=None) -> bool:
        state = self.state if state is None else state
        return bool(state.terminated) or bool(state.truncated)

    def _to_move(self, state=None) -> int:
        """0 when Black is to move, 1 for White."""
        return int((self.state if state is None else state)._x.color)

    def _try(self, colour: int, action: int) -> list[pgx.State] | None:
        """The positions after `colour` plays `action` (a pass of the other colour inserted first if needed), or None
        if that is illegal: an occupied point, suicide, ko, superko, or an inserted pass that would end the game."""
        _, _, step, _ = self._env()
        states, state = [], self.state
        if self._to_move(state) != colour:
            state = step(state, jnp.int32(self.size * self.size))
            if self._over(state):
                return None
            states.append(state)
        if not bool(np.asarray(state.legal_action_mask)[action]):
            return None
        state = step(state, jnp.int32(action))
        if bool(state._x.is_psk):  # the move repeats a position (positional superko)
            return None
        return [*states, state]

    def _passed(self) -> pgx.State | None:
        """The position after the side to move passes (to let the other colour move), or None if that ends the game
        (a second pass in a row, or pgx's cap on the game's length)."""
        state = self._env()[2](self.state, jnp.int32(self.size * self.size))
        return None if self._over(state) else state

    def _commit(self, action: int, states: list[pgx.State]) -> None:
        actions = (self.size * self.size, action) if len(states) == 2 else (action,)
        self._moves.append(actions)
        self._states.extend(states)

    def _vertex(self, action: int) -> str:
        return go.action_to_vertex(action, self.size).upper() if action != self.size * self.size else go.PASS

    def _parse_vertex(self, text: str) -> int:
        if text.lower() == go.PASS:
            return self.size * self.size
        if not go.is_vertex(text):
            raise protocol.CommandError(f"syntax error: not a vertex: {protocol.quote(text)}")
        if not go.is_vertex(text, self.size):
            raise protocol.CommandError("illegal move")  # a vertex off this board
        return go.vertex_to_action(text, self.size)

    def _margin(self, state=None) -> float:
        """Black's Tromp-Taylor area minus White's minus komi."""
        state = self.state if state is None else state
        black, white = (int(x) for x in np.asarray(_areas(self.size)(state._x)))
        return black - white - self.komi

    # -- the search --------------------------------------------------------------------------------------------------

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

    # -- commands ----------------------------------------------------------------------------------------------------

    def _version(self, args, stream) -> str:
        try:
            version = importlib.metadata.version("az-jax")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return f"{version} ({self.game}, checkpoint {self.agent.step})"

    def _known_command(self, args, stream) -> str:
        (name,) = protocol.arguments(args, 1, "known_command COMMAND")
        return "true" if name in self._handlers else "false"

    def _quit(self, args, stream) -> str:
        self.finished = True
        return ""

    def _boardsize(self, args, stream) -> str:
        (text,) = protocol.arguments(args, 1, "boardsize SIZE")
        if len(text) > 40 or not re.fullmatch(r"[+-]?[0-9]+", text):
            raise protocol.CommandError(f"syntax error: boardsize must be an integer, got {protocol.quote(text)}")
        if int(text) != self.size:
            raise protocol.CommandError("unacceptable size")
        self._clear()
        return ""

    def _clear_board(self, args, stream) -> str:
        protocol.arguments(args, 0, "clear_board")
        self._clear()
        return ""

    def _komi(self, args, stream) -> str:
        (text,) = protocol.arguments(args, 1, "komi KOMI")
        komi = protocol.number(text, "komi", -MAX_KOMI, MAX_KOMI)
        if komi != self.komi:
            self.komi = komi
            self._replay(self._moves)  # the same moves under the new komi's env (its terminal rewards)
            if komi != self.trained_komi and not self._komi_said:
                self._komi_said = True
                self.log(
                    f"az-jax gtp: komi {komi:g}: the game is played and scored with it, but the network was trained "
                    f"with komi {self.trained_komi:g} and its evaluations assume that"
                )
        return ""

    def _play(self, args, stream) -> str:
        colour_text, vertex = protocol.arguments(args, 2, "play COLOUR VERTEX")
        colour, action = protocol.colour(colour_text), self._parse_vertex(vertex)
        if self._over():
            if action != self.size * self.size:
                raise protocol.CommandError("illegal move")  # the game is over: only passes, which change nothing
            self._moves.append(())
            self._states.append(self.state)
            return ""
        states = self._try(colour, action)
        if states is None:
            raise protocol.CommandError("illegal move")
        self._commit(action, states)
        return ""

    def _set_free_handicap(self, args, stream) -> str:
        if not args:
            raise protocol.CommandError("syntax error: expected set_free_handicap VERTEX...")
        if self._moves:
            raise protocol.CommandError("board not empty")
        actions = [self._parse_vertex(v) for v in args]
        if len(set(actions)) != len(actions) or self.size * self.size in actions or len(actions) >= self.size**2:
            raise protocol.CommandError("bad vertex list")
        for action in actions:
            states = self._try(0, action)
            if states is None:
                self._clear()
                raise protocol.CommandError("bad vertex list")
            self._commit(action, states)
        return ""

    def _genmove(self, args, stream, commit: bool) -> str:
        (colour_text,) = protocol.arguments(args, 1, "genmove COLOUR")
        return self._generate(protocol.colour(colour_text), commit)

    def _undo(self, args, stream) -> str:
        protocol.arguments(args, 0, "undo")
        if not self._moves:
            raise protocol.CommandError("cannot undo")
        actions = self._moves.pop()
        if actions:
            del self._states[-len(actions) :]
        else:
            self._states.pop()
        return ""

    def _showboard(self, args, stream) -> str:
        protocol.arguments(args, 0, "showboard")
        board = notation.render(self.game, self.state)
        return f"\n{board}\nkomi {self.komi:g}, move {len(self._actions())}"

    def _final_score(self, args, stream) -> str:
        protocol.arguments(args, 0, "final_score")
        return protocol.format_score(self._margin())

    def _final_status_list(self, args, stream) -> str:
        (status,) = protocol.arguments(args, 1, "final_status_list alive|dead|seki")
        if status not in ("alive", "dead", "seki"):
            raise protocol.CommandError(f"syntax error: not a status: {protocol.quote(status)}")
        if status != "alive":
            return ""  # Tromp-Taylor: every stone on the board counts as alive
        black, white = go.board_to_vertices(np.asarray(self.state._x.board), self.size)
        return " ".join(sorted(v.upper() for v in black | white))

    def _time_settings(self, args, stream) -> str:
        main, byo, stones = protocol.arguments(args, 3, "time_settings MAIN_TIME BYO_YOMI_TIME BYO_YOMI_STONES")
        main_s = protocol.number(main, "main time", 0, math.inf)
        byo_s = protocol.number(byo, "byo-yomi time", 0, math.inf)
        n = protocol.integer(stones, "byo-yomi stones", 0, 10**9)
        main_s, byo_s = min(main_s, MAX_SECONDS), min(byo_s, MAX_SECONDS)
        if byo_s > 0 and n == 0:  # GTP: byo-yomi time > 0 with 0 stones means no time limit
            self.clock = None
        else:
            self.clock = _Clock(main_s, byo_s, n, [None, None], [0, 0])
        return ""

    def _time_left(self, args, stream) -> str:
        colour_text, seconds, stones = protocol.arguments(args, 3, "time_left COLOUR TIME STONES")
        colour = protocol.colour(colour_text)
        left = min(protocol.number(seconds, "time", -MAX_SECONDS, math.inf), MAX_SECONDS)
        n = protocol.integer(stones, "stones", 0, 10**9)
        if self.clock is None:  # a clock the controller did not set up: main time only
            self.clock = _Clock(0.0, 0.0, 0, [None, None], [0, 0])
        self.clock.left_s[colour] = max(0.0, left)
        self.clock.left_stones[colour] = n
        return ""

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
