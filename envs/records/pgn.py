"""Chess records as PGN (via python-chess); the format is described in envs/records/__init__.py."""

from __future__ import annotations

import io
import re

import chess
import chess.pgn

from envs.notation.chess_moves import action_to_move, move_to_action
from envs.records.record import PGN_RESERVED, GameRecord, RecordError, unterminated

_PGN_ROSTER = ("Event", "Site", "Date", "Round")  # the roster tags a meta item may fill
_RESULT_PGN = {1.0: "1-0", -1.0: "0-1", 0.0: "1/2-1/2"}


def _pgn_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _pgn_unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def to_pgn(record: GameRecord) -> str:
    """PGN text of a chess record (see the module docstring for the tags written)."""
    if record.game != "chess":
        raise RecordError(f"PGN is for chess, not {record.game}")
    game = chess.pgn.Game()
    meta = record.meta_dict
    for tag in _PGN_ROSTER:
        if tag in meta:
            game.headers[tag] = _pgn_escape(meta.pop(tag))
    game.headers["White"] = _pgn_escape(record.players[0])
    game.headers["Black"] = _pgn_escape(record.players[1])
    game.headers["Result"] = "*" if unterminated(record) else _RESULT_PGN[record.result]
    game.headers["PgxFirstPlayer"] = str(record.first_player)
    for key, value in meta.items():
        game.headers[key] = _pgn_escape(value)
    board = chess.Board()
    node: chess.pgn.GameNode = game
    for ply, action in enumerate(record.actions, start=1):
        try:
            move = action_to_move(action, board)
        except ValueError as e:
            raise RecordError(f"ply {ply}: {e}") from None
        if move not in board.legal_moves:
            raise RecordError(f"ply {ply}: illegal action {action} ({move.uci()}) in {board.fen()}")
        node = node.add_variation(move)
        board.push(move)
    return game.accept(chess.pgn.StringExporter(headers=True, variations=False, comments=False)) + "\n"


_PGN_EXTRA_TOKEN = re.compile(r"[0-9]+\.*|[+#]+")  # move numbers and check marks, which python-chess skips


def _pgn_movetext_tokens(line: str, number: int, depth: int) -> tuple[list[str], int, bool]:
    """(SAN tokens of the main line, variation depth after the line, whether a '{' comment stays open) of one line of
    movetext at variation `depth`; RecordError naming the line on text that is not PGN movetext."""
    moves: list[str] = []
    i = 0
    while i < len(line):
        if line[i].isspace():
            i += 1
        elif line[i] == "{":
            close = line.find("}", i)
            if close < 0:
                return moves, depth, True
            i = close + 1
        elif line[i] == ";":
            break
        elif match := chess.pgn.MOVETEXT_REGEX.match(line, i) or _PGN_EXTRA_TOKEN.match(line, i):
            token = match.group(0)
            depth += (token == "(") - (token == ")")
            if depth < 0:
                raise RecordError(f"PGN line {number}: ')' closes no variation")
            if depth == 0 and match.re is chess.pgn.MOVETEXT_REGEX and match.group(1):
                moves.append(token)
            i = match.end()
        else:
            raise RecordError(f"PGN line {number}: {line[i:].split()[0]!r} is not a move, move number or result")
    return moves, depth, False


def _pgn_main_line(text: str) -> list[tuple[int, str]]:
    """(line number, SAN) of each main-line move of the first game in PGN text. Checks what python-chess skips
    silently: a malformed tag line or a word that is not a move is a RecordError naming its line."""
    moves: list[tuple[int, str]] = []
    depth, in_comment, in_movetext, comment_line = 0, False, False, 0
    for number, line in enumerate(text.splitlines(), start=1):
        if in_comment:
            close = line.find("}")
            if close < 0:
                continue
            line, in_comment = line[close + 1 :], False
        elif not line.strip():
            if in_movetext:  # an empty line ends the first game
                break
            continue
        elif line.startswith(("%", ";")):
            continue
        elif line.lstrip().startswith("[") and not in_movetext:
            if not chess.pgn.TAG_REGEX.match(line.strip()):
                raise RecordError(f'PGN line {number}: a tag must look like [Name "value"], got {line.strip()!r}')
            continue
        in_movetext = True
        tokens, depth, in_comment = _pgn_movetext_tokens(line, number, depth)
        moves.extend((number, token) for token in tokens)
        comment_line = number if in_comment else comment_line
    if in_comment:
        raise RecordError(f"PGN line {comment_line}: a '{{' comment is never closed")
    return moves


def _check_pgn_moves(moves: list[tuple[int, str]]) -> None:
    """Plays the main line's SAN on a board: an illegal or ambiguous move is a RecordError naming its line."""
    board = chess.Board()
    for ply, (number, san) in enumerate(moves, start=1):
        try:
            board.push(board.parse_san(san))
        except ValueError as e:
            raise RecordError(f"PGN line {number}, ply {ply}: {e}") from None


def from_pgn(text: str) -> GameRecord:
    """A chess record from PGN text (the first game's main line, from the standard starting position). RecordError
    with one line, naming the line, on text that is not PGN or a move that is not legal."""
    moves = _pgn_main_line(text)

    class _Builder(chess.pgn.GameBuilder):
        def handle_error(self, error):  # collect, do not log: the caller reports one line
            self.game.errors.append(error)

    game = chess.pgn.read_game(io.StringIO(text), Visitor=_Builder)
    if game is None:
        raise RecordError("no game in the PGN text")
    headers = {k: _pgn_unescape(v) for k, v in game.headers.items()}
    if "FEN" in headers or headers.get("SetUp") == "1":
        raise RecordError("PGN starts from a set-up position (FEN); pgx chess games start from the initial position")
    _check_pgn_moves(moves)
    if game.errors:  # e.g. an illegal move in a variation
        raise RecordError(f"PGN: {game.errors[0]}")
    board, actions = chess.Board(), []
    for ply, move in enumerate(game.mainline_moves(), start=1):
        try:
            actions.append(move_to_action(move, board))
        except ValueError as e:
            raise RecordError(f"ply {ply}: {e}") from None
        board.push(move)
    result = {"1-0": 1.0, "0-1": -1.0}.get(headers.get("Result", "*"), 0.0)
    try:
        first_player = int(headers.get("PgxFirstPlayer", "0"))
    except ValueError:
        raise RecordError(f"PGN tag PgxFirstPlayer must be 0 or 1, got {headers['PgxFirstPlayer']!r}") from None
    defaults = {"Event": "?", "Site": "?", "Date": "????.??.??", "Round": "?"}
    meta = {k: v for k, v in headers.items() if k not in PGN_RESERVED and defaults.get(k) != v}
    players = (headers.get("White", "?"), headers.get("Black", "?"))
    return GameRecord("chess", tuple(actions), result, players, first_player, tuple(meta.items()))
