"""A trained Go agent as a GTP engine (Go Text Protocol version 2, G. Farnebäck, "Specification of the Go Text
Protocol, version 2, draft 2", 2002; https://www.lysator.liu.se/~gunnar/gtp/), behind `az-jax gtp`.

    engine = GoEngine(agent, simulations=200)
    engine.handle("1 genmove b")        # -> "=1 E5\\n\\n": one input line in, its whole response out
    serve(engine, sys.stdin.buffer, sys.stdout)   # the stdin/stdout loop, with live analysis

The engine is in three modules: this one (the protocol's dispatch and the commands), gtp_game.py (the positions of
the game under the current komi, move legality, the area score) and gtp_search.py (the tree kept between moves,
genmove's search with the clock, and the analysis commands); gtp_protocol.py parses lines, formats responses and
runs the stdin/stdout loop.

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
  move's value for the side to move are below `resign_threshold` (AlphaGo Zero's rule, az_jax/core/resign.py; -1 never
  resigns) and `pass` when the most visited move is pass. An AlphaZero agent's pass is then checked against that
  Tromp-Taylor count, the result if the game ends now (`Config.pass_check`, on by default; envs/go_scoring.py,
  `checked_pass`): after the opponent's pass it passes when the count is its win, and it does not pass while the count
  is its loss and it has another move (then the most visited other move). reg_genmove searches the same way but plays
  nothing.
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

import importlib.metadata
import math
import re
import sys
import traceback
from collections.abc import Callable

import numpy as np
import pgx

from az_jax.frontends import gtp_protocol as protocol
from az_jax.frontends.gtp_search import GoSearch, _Clock
from az_jax.frontends.tree_search import TreeSearch
from envs import notation
from envs.notation import go

GO_GAMES = ("go_9x9", "go_19x19")
NAME = "az_jax"
DEFAULT_RESIGN_THRESHOLD = -0.8  # AlphaGo's resignation value (config.v_resign_init); -1 never resigns
MAX_KOMI = 1000.0
MAX_SECONDS = 1e9  # time_settings / time_left beyond this are treated as this (31 years)


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


class GoEngine(GoSearch):
    """The GTP engine's state (the game, the clock, the search tree kept between moves) and its commands. The game's
    positions are GoGame's (gtp_game.py); the search and the analysis commands, GoSearch's (gtp_search.py).

    Args:
      agent: an az_jax.runtime.agent.Agent of go_9x9 or go_19x19, or an AlphaGo agent (az_jax/alphago/play_agent.py;
        its tree_evaluator gives the kept tree its priors and leaf values, and `search` must then be "alphago").
      simulations: visits per genmove with no clock (the kept subtree's count); the cap with a clock. Default: the
        agent's (config.eval_simulations or num_simulations) with no clock, no cap with one.
      resign_threshold: resign when the root's value and the chosen move's value (in [-1, 1], for the side to move)
        are both below it; -1 never resigns.
      capacity, chunk, seed: of the TreeSearch (nodes kept, None for tree_search.default_capacity; simulations per
        jitted call; tie-break noise).
      leaves: with the search "alphago", leaves per step under virtual loss (az_jax/core/virtual_loss.py): one game
        then fills a batch of that many evaluations; genmove may search up to leaves − 1 visits past `simulations`.
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
        search: str = "puct",
        leaves: int = 1,
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
        if leaves < 1 or (leaves > 1 and search != "alphago"):
            raise ValueError(f"leaves per step (virtual loss) must be 1, or > 1 with the search alphago: {leaves}")
        self.capacity, self.chunk, self.seed, self.search, self.leaves = capacity, chunk, seed, search, leaves
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

    # -- commands ----------------------------------------------------------------------------------------------------

    def _version(self, args, stream) -> str:
        try:
            version = importlib.metadata.version("az-jax")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        label = getattr(self.agent, "label", None) or f"checkpoint {self.agent.step}"  # an AlphaGo agent: its label
        return f"{version} ({self.game}, {label})"

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
