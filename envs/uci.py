"""UCI chess engines (Stockfish, ...) through python-chess, and pgx chess actions <-> UCI moves.

pgx chess convention (read from `pgx/_src/games/chess.py` and `pgx/experimental/chess.py`):

* A square index is `s = file * 8 + rank` (a1 = 0, a2 = 1, ..., h8 = 63). Note python-chess uses
  `rank * 8 + file` (a1 = 0, b1 = 1, ...).
* pgx stores the board from the side to move's point of view: after every move the board is
  mirrored top-bottom (rank -> 7 - rank; files are NOT mirrored), so when black is to move pgx
  square `file * 8 + r` is the real square on rank `7 - r`.
* An action is `from_square * 73 + plane` (64 x 73 = 4,672, AlphaZero style), in the side to
  move's coordinates:
  - planes 0..8 are under-promotions: `plane // 3` picks rook / bishop / knight and `plane % 3`
    picks the direction: straight ahead (`+1`), capture towards file + 1 (`+9`), capture towards
    file - 1 (`-7`);
  - planes 9..72 are "queen" moves (56: 8 directions x 7 distances) then knight moves (8);
    a pawn reaching the last rank with a queen-move plane promotes to a queen;
  - castling is the king's two-square move (e1g1 = 32 -> 48, e1c1 = 32 -> 16), as in UCI.

Conversions take a `chess.Board` for the side to move and for the piece on the from-square
(needed to tell a queen promotion from a plain pawn move). `pgx_state_to_board` builds that board
from a pgx state with pgx's own FEN writer (repetition history is not carried; it does not affect
move legality).

Engine errors reuse the hierarchy of `envs/gtp.py` (`EngineCrashed`, `EngineTimeout`,
`EngineProtocolError`, base `EngineError`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shlex
import signal
import weakref
from typing import Any, Mapping, Sequence

import chess
import chess.engine
import numpy as np

from envs.gtp import EngineCrashed, EngineError, EngineProtocolError, EngineTimeout, find_executable

__all__ = [
    "NUM_ACTIONS",
    "UCIEngine",
    "action_to_move",
    "action_to_uci",
    "find_executable",
    "legal_action_set",
    "move_to_action",
    "pgx_state_to_board",
    "strength_options",
    "uci_to_action",
]

NUM_ACTIONS = 64 * 73  # 4,672
DEFAULT_TIMEOUT_S = 30.0  # per command, on top of any time limit of the search itself
QUIT_GRACE_S = 2.0

# -- static tables, built in plain Python at import (same construction as pgx's FROM_PLANE) ------
# Directions of planes 9..72: down, up, left, right, down-left, down-right, up-right, up-left
# (7 distances each) then the 8 knight jumps; (dr, dc) = (rank delta, file delta).
_ZEROS, _SEQ, _RSEQ = [0] * 7, list(range(1, 8)), list(range(-7, 0))
_DR = _RSEQ + _SEQ + _ZEROS + _ZEROS + _RSEQ + _SEQ + _SEQ[::-1] + _RSEQ[::-1] + [-1, +1, -2, +2, -1, +1, -2, +2]
_DC = _ZEROS + _ZEROS + _RSEQ + _SEQ + _RSEQ + _SEQ + _RSEQ + _SEQ + [-2, -2, -1, -1, +2, +2, +1, +1]
_UNDERPROMOTION_STEP = (+1, +9, -7)  # plane % 3: ahead, towards file + 1, towards file - 1
_UNDERPROMOTION_PIECE = (chess.ROOK, chess.BISHOP, chess.KNIGHT)  # plane // 3

FROM_PLANE = -np.ones((64, 73), dtype=np.int32)  # [from, plane] -> to (pgx squares), -1 = off board
TO_PLANE = -np.ones((64, 64), dtype=np.int32)  # [from, to] -> plane 9..72 (no under-promotions)
for _from in range(64):
    for _plane in range(73):
        if _plane < 9:
            _to = _from + _UNDERPROMOTION_STEP[_plane % 3] if _from % 8 == 6 else -1
            if 0 <= _to < 64:
                FROM_PLANE[_from, _plane] = _to
        else:
            _r, _c = _from % 8 + _DR[_plane - 9], _from // 8 + _DC[_plane - 9]
            if 0 <= _r < 8 and 0 <= _c < 8:
                FROM_PLANE[_from, _plane] = _c * 8 + _r
                TO_PLANE[_from, _c * 8 + _r] = _plane
FROM_PLANE.setflags(write=False)
TO_PLANE.setflags(write=False)


def _pgx_to_chess_square(sq: int, turn: chess.Color) -> chess.Square:
    """pgx square (side-to-move coordinates) -> python-chess square."""
    file, rank = divmod(int(sq), 8)
    return chess.square(file, rank if turn == chess.WHITE else 7 - rank)


def _chess_to_pgx_square(sq: chess.Square, turn: chess.Color) -> int:
    """python-chess square -> pgx square in the side to move's coordinates."""
    file, rank = chess.square_file(sq), chess.square_rank(sq)
    return file * 8 + (rank if turn == chess.WHITE else 7 - rank)


def action_to_move(action: int, board: chess.Board) -> chess.Move:
    """pgx chess action in [0, 4672) -> `chess.Move` for `board`'s side to move.

    Raises ValueError if the action points off the board. The move is not checked for legality.
    """
    action = int(action)
    if not 0 <= action < NUM_ACTIONS:
        raise ValueError(f"chess action {action} not in [0, {NUM_ACTIONS})")
    from_, plane = divmod(action, 73)
    to = int(FROM_PLANE[from_, plane])
    if to < 0:
        raise ValueError(f"chess action {action} (from {from_}, plane {plane}) leaves the board")
    from_sq = _pgx_to_chess_square(from_, board.turn)
    to_sq = _pgx_to_chess_square(to, board.turn)
    promotion = None
    if plane < 9:
        promotion = _UNDERPROMOTION_PIECE[plane // 3]
    elif board.piece_type_at(from_sq) == chess.PAWN and to % 8 == 7:
        promotion = chess.QUEEN  # a pawn reaching the last rank on a queen-move plane
    return chess.Move(from_sq, to_sq, promotion=promotion)


def move_to_action(move: chess.Move, board: chess.Board) -> int:
    """`chess.Move` (standard, non-960 castling e1g1 / e1c1) for `board`'s side to move -> pgx action."""
    from_ = _chess_to_pgx_square(move.from_square, board.turn)
    to = _chess_to_pgx_square(move.to_square, board.turn)
    if move.promotion in _UNDERPROMOTION_PIECE:
        step = to - from_
        if from_ % 8 != 6 or step not in _UNDERPROMOTION_STEP:
            raise ValueError(f"{move.uci()} is not a pawn promotion move")
        plane = _UNDERPROMOTION_PIECE.index(move.promotion) * 3 + _UNDERPROMOTION_STEP.index(step)
    else:
        plane = int(TO_PLANE[from_, to])
        if plane < 0:
            raise ValueError(f"{move.uci()} is not expressible as a pgx chess action")
    return from_ * 73 + plane


def action_to_uci(action: int, board: chess.Board) -> str:
    """pgx chess action -> UCI string ('e2e4', 'e7e8q')."""
    return action_to_move(action, board).uci()


def uci_to_action(uci: str, board: chess.Board) -> int:
    """UCI string -> pgx chess action for `board`'s side to move."""
    return move_to_action(chess.Move.from_uci(uci), board)


def legal_action_set(board: chess.Board) -> frozenset[int]:
    """The pgx actions of all of python-chess's legal moves in `board`."""
    return frozenset(move_to_action(m, board) for m in board.legal_moves)


def pgx_state_to_board(state: Any) -> chess.Board:
    """pgx chess `State` (unbatched) -> `chess.Board`, via pgx's own FEN writer."""
    from pgx.experimental.chess import to_fen  # local: imports jax, only needed here

    return chess.Board(to_fen(state))


def strength_options(*, skill_level: int | None = None, elo: int | None = None) -> dict[str, Any]:
    """Stockfish strength options: `Skill Level` (0..20) and/or `UCI_LimitStrength` + `UCI_Elo`.

    Stockfish 15.1 accepts UCI_Elo in [1350, 2850]; other engines may differ (configure() checks).
    """
    options: dict[str, Any] = {}
    if skill_level is not None:
        options["Skill Level"] = int(skill_level)
    if elo is not None:
        options["UCI_LimitStrength"] = True
        options["UCI_Elo"] = int(elo)
    return options


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _submit(engine: chess.engine.SimpleEngine, make_coro, timeout: float | None) -> concurrent.futures.Future:
    """Schedule `make_coro()` under `asyncio.wait_for(timeout)` on python-chess's event loop.

    Raises RuntimeError (after closing the coroutine, so nothing is left un-awaited) when the loop
    is already closed, i.e. the engine has terminated.
    """
    inner = make_coro()

    async def runner():
        return await asyncio.wait_for(inner, timeout)

    outer = runner()
    try:
        return asyncio.run_coroutine_threadsafe(outer, engine.protocol.loop)
    except RuntimeError:
        outer.close()
        inner.close()
        raise


def _shutdown(engine: chess.engine.SimpleEngine, pid: int, quit_first: bool) -> None:
    """Quit (politely, briefly), close the transport, wait for the exit and SIGKILL as a last resort."""
    if quit_first and not engine.returncode.done():
        try:
            _submit(engine, engine.protocol.quit, QUIT_GRACE_S).result(timeout=QUIT_GRACE_S + 1.0)
        except BaseException:  # noqa: BLE001 - best effort; the kill below is the guarantee
            pass
    try:
        engine.close()  # asyncio's transport.close() kills a still-running child
    except BaseException:  # noqa: BLE001
        pass
    try:
        engine.returncode.result(timeout=5.0)  # set once asyncio has reaped the process
        return
    except BaseException:  # noqa: BLE001
        pass
    # Not reaped yet, so the pid is still ours: kill it directly.
    if _pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        engine.returncode.result(timeout=5.0)
    except BaseException:  # noqa: BLE001
        pass


class UCIEngine:
    """A running UCI engine. Not thread-safe: one caller at a time.

    Args:
      command: the engine's command line (list, or a string split with `shlex`).
      options: UCI options to set at start, e.g. `{"Threads": 1, "Hash": 16}` or
        `strength_options(skill_level=0)`.
      timeout: per-command deadline in seconds (added to a search's own `time` limit); on expiry
        the engine is killed and `EngineTimeout` raised.
    """

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        options: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ):
        argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise ValueError("empty engine command")
        self.argv = tuple(argv)
        self.timeout = float(timeout)
        self._closed = False
        self._dead_reason: str | None = None
        try:
            self._engine = chess.engine.SimpleEngine.popen_uci(argv, timeout=self.timeout)
        except (OSError, chess.engine.EngineTerminatedError) as e:
            raise EngineCrashed(f"cannot start UCI engine {argv!r}: {e}") from e
        except (asyncio.TimeoutError, concurrent.futures.TimeoutError, TimeoutError) as e:
            raise EngineTimeout(f"UCI engine {argv!r} did not finish the 'uci' handshake in {timeout} s") from e
        self.pid = self._engine.transport.get_pid()
        self.name = self._engine.id.get("name", self.argv[0])  # from the engine's `id name` line
        self._finalizer = weakref.finalize(self, _shutdown, self._engine, self.pid, False)
        if options:
            self.configure(options)

    def is_alive(self) -> bool:
        return not self._closed and self._dead_reason is None and not self._engine.returncode.done()

    def _call(self, make_coro, what: str, timeout: float | None):
        """Run `make_coro()` (a protocol coroutine) on python-chess's event loop with a hard deadline."""
        if self._closed:
            raise EngineError("engine is closed")
        if self._dead_reason is None and self._engine.returncode.done():
            self._kill("exited")
        if self._dead_reason is not None:
            raise EngineCrashed(f"UCI engine {self.argv[0]!r} (pid {self.pid}) is dead: {self._dead_reason}")
        try:
            fut = _submit(self._engine, make_coro, timeout)
        except RuntimeError as e:  # the event loop is gone: the engine has terminated
            self._kill("event loop closed")
            raise EngineCrashed(f"UCI engine {self.argv[0]!r} (pid {self.pid}) terminated during {what}") from e
        try:
            # The extra margin only matters if the event loop itself stops answering.
            return fut.result(timeout=None if timeout is None else timeout + 5.0)
        except (asyncio.TimeoutError, concurrent.futures.TimeoutError, TimeoutError):
            self._kill(f"timed out during {what}")
            raise EngineTimeout(f"UCI engine {self.argv[0]!r} did not finish {what} within {timeout} s; killed") from None
        except chess.engine.EngineTerminatedError as e:
            self._kill(f"terminated during {what}")
            raise EngineCrashed(
                f"UCI engine {self.argv[0]!r} (pid {self.pid}) terminated during {what}: {e}"
            ) from e
        except chess.engine.EngineError as e:
            self._kill(f"protocol error during {what}")
            raise EngineProtocolError(f"UCI engine {self.argv[0]!r} sent an invalid reply during {what}: {e}") from e

    def _kill(self, reason: str) -> None:
        self._dead_reason = reason
        _shutdown(self._engine, self.pid, quit_first=False)

    def configure(self, options: Mapping[str, Any]) -> None:
        """Set UCI options; an unknown option or out-of-range value raises `EngineError`."""
        known = self._engine.options  # case-insensitive mapping name -> chess.engine.Option
        for key, value in options.items():
            if key not in known:
                raise EngineError(f"UCI engine {self.argv[0]!r} has no option {key!r}")
            try:
                known[key].parse(value)
            except chess.engine.EngineError as e:
                raise EngineError(str(e)) from e
        self._call(lambda: self._engine.protocol.configure(dict(options)), "configure", self.timeout)

    def play(
        self,
        board: chess.Board,
        *,
        nodes: int | None = None,
        time: float | None = None,
        depth: int | None = None,
        timeout: float | None = None,
    ) -> chess.Move:
        """Search `board` under the given limit and return the engine's move, checked to be legal.

        At least one of `nodes`, `time` (seconds per move) or `depth` must be given. The deadline
        is `timeout` (default: the engine's) plus `time`.
        """
        if nodes is None and time is None and depth is None:
            raise ValueError("give a search limit: nodes, time or depth")
        if board.is_game_over(claim_draw=False):
            raise ValueError("the game is over; there is no move to ask for")
        limit = chess.engine.Limit(nodes=nodes, time=time, depth=depth)
        deadline = (self.timeout if timeout is None else float(timeout)) + (time or 0.0)
        result = self._call(lambda: self._engine.protocol.play(board, limit), "play", deadline)
        move = result.move
        if move is None or move not in board.legal_moves:
            self._kill("illegal move")
            raise EngineProtocolError(
                f"UCI engine {self.argv[0]!r} returned {move.uci() if move else 'no move'!r}, "
                f"not a legal move in {board.fen()}"
            )
        return move

    def close(self) -> None:
        """Send `quit`, wait briefly, kill if needed, and reap. Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        _shutdown(self._engine, self.pid, quit_first=self._dead_reason is None)
        self._finalizer.detach()

    def __enter__(self) -> "UCIEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
