"""Game records (SGF / PGN / JSON) written, read back and replayed; pictures of positions; `az-jax render`.

Random games are played with pgx directly (their own jitted step, random legal actions from a NumPy RNG), so the
replay in `envs.records` is checked against an independent run, and the SGF / PGN files are also read by an independent
program (sgfmill's board with captures, python-chess) and compared with pgx's final position.
"""

import json
import os
import re
import struct
import subprocess
import sys

import chess
import chess.pgn
import jax
import numpy as np
import pytest

from az_jax.apps import cli
from envs import notation, records, render
from envs.notation import go
from envs.records import GameRecord, RecordError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def play_random(game: str, seed: int, max_plies: int, first_player: int):
    """A random legal game of at most `max_plies` plies in which pgx player id `first_player` moves first.
    Returns (actions, final state)."""
    _, init, step = records.env_functions(game)  # pgx's init and step, jitted once (shared with the replay)
    key = jax.random.key(seed)
    while True:  # pgx draws the first mover's id from the key: take the next key until it is first_player
        key, init_key = jax.random.split(key)
        state = init(init_key)
        if int(state.current_player) == first_player:
            break
    rng = np.random.default_rng(seed)
    actions: list[int] = []
    while len(actions) < max_plies and not bool(state.terminated):
        action = int(rng.choice(np.flatnonzero(np.asarray(state.legal_action_mask))))
        actions.append(action)
        state = step(state, action)
    return actions, state


# (game, plies at most, first mover's pgx id, expected format): connect_four and othello are played to the end.
CASES = [
    ("go_9x9", 60, 1, ".sgf"),
    ("chess", 80, 0, ".pgn"),
    ("connect_four", 42, 1, ".json"),
    ("othello", 130, 0, ".json"),
]


@pytest.mark.parametrize("game, max_plies, first_player, ext", CASES)
def test_random_game_round_trip_and_replay(tmp_path, game, max_plies, first_player, ext):
    actions, final = play_random(game, seed=7, max_plies=max_plies, first_player=first_player)
    over = bool(final.terminated)
    if game in ("connect_four", "othello"):
        assert over  # the rules end these games within the cap
    result = records.first_mover_result(final, first_player)
    assert result == (float(np.asarray(final.rewards)[first_player]) if over else 0.0)
    meta = {"seed": 7} if over else {"seed": 7, "termination": records.UNTERMINATED}
    record = GameRecord(game, actions, result, ("alice", "bob"), first_player, meta)

    path = records.write_record(tmp_path / "game", record)
    assert path == str(tmp_path / "game") + ext
    back = records.read_record(path)
    assert back == record  # game, actions, result, players, first player, meta
    assert back.actions == tuple(actions) and back.result == result and back.meta_dict["seed"] == "7"

    states = records.replay(back)
    assert len(states) == len(actions) + 1
    np.testing.assert_array_equal(np.asarray(states[-1].observation), np.asarray(final.observation))
    np.testing.assert_array_equal(np.asarray(states[-1].rewards), np.asarray(final.rewards))
    assert int(states[-1].current_player) == int(final.current_player)
    assert bool(states[-1].terminated) == over

    with open(path) as f:
        text = f.read()
    if game == "go_9x9":
        _check_sgf_against_sgfmill_board(text, final)
    if game == "chess":
        board = chess.pgn.read_game(open(path)).end().board()  # python-chess's own reading of the moves
        from pgx.experimental.chess import to_fen

        placement, side = to_fen(final).split()[:2]
        assert (board.board_fen(), "w" if board.turn else "b") == (placement, side)
        assert '[Result "*"]' in text and '[White "alice"]' in text
    if ext == ".json":  # the move text of each ply, in the game's notation
        moves = json.loads(text)["moves"]
        assert len(moves) == len(actions)
        assert [notation.parse_move(game, s, m) for s, m in zip(states, moves)] == actions


def _check_sgf_against_sgfmill_board(text: str, final) -> None:
    """Play the SGF's moves on sgfmill's board (it applies captures itself) and compare the stones with pgx's."""
    from sgfmill import boards, common, sgf

    game = sgf.Sgf_game.from_bytes(text.encode())
    board = boards.Board(9)
    for node in game.get_main_sequence()[1:]:
        colour, move = node.get_move()
        if move is not None:
            board.play(*move, colour)
    stones = {c: {common.format_vertex(p) for colour, p in board.list_occupied_points() if colour == c} for c in "bw"}
    black, white = go.board_to_vertices(np.asarray(final._x.board), 9)
    assert (stones["b"], stones["w"]) == (set(black), set(white))
    assert black and white


def test_sgf_of_a_three_move_game_literally():
    # pgx 9x9 actions: 40 = row 4 (from the top), column 4 -> SGF "ee" (x = column, y = row from the top: a = 0);
    # 20 = row 2, column 2 -> "cc"; 81 = 9 * 9 = pass -> an empty move. Black moves first, colours alternate.
    record = GameRecord("go_9x9", (40, 20, 81), 1, ("alice", "bob"), meta={"margin": 3.5})
    text = records.to_sgf(record).replace("\n", "")
    assert text.endswith(";B[ee];W[cc];B[])")
    for prop in ("SZ[9]", "KM[7.5]", "RU[Tromp-Taylor]", "PB[alice]", "PW[bob]", "RE[B+3.5]", "GM[1]", "FF[4]"):
        assert prop in text
    assert records.from_sgf(text) == record
    # The same moves in GTP coordinates (row 1 at the bottom): E5, C7, pass.
    assert [go.action_to_vertex(a, 9) for a in record.actions] == ["E5", "C7", "pass"]
    # Black E5, then two passes: pgx ends the game and scores it by area (Tromp-Taylor). The one black stone's empty
    # region touches only black, so Black has all 81 points and White 0: margin 81 - 0 - komi 7.5 = 73.5.
    final = records.replay(GameRecord("go_9x9", (40, 81, 81), 0, ("a", "b")))[-1]
    assert bool(final.terminated) and records.first_mover_result(final, 0) == 1.0
    assert records.go_margin("go_9x9", final) == 73.5
    scored = GameRecord("go_9x9", (40, 81, 81), 1, ("a", "b"), meta={"margin": records.go_margin("go_9x9", final)})
    assert "RE[B+73.5]" in records.to_sgf(scored)
    assert "RE[W+R]" in records.to_sgf(GameRecord("go_9x9", (40,), -1, ("a", "b"), meta={"resigned": "true"}))
    # A white win without a margin, and an unfinished game.
    assert "RE[W+]" in records.to_sgf(GameRecord("go_9x9", (40,), -1, ("a", "b")))
    assert "RE[?]" in records.to_sgf(GameRecord("go_9x9", (40,), 0, ("a", "b"), meta={"termination": "unterminated"}))


def test_pgn_move_text_literally():
    # pgx chess actions are from_square * 73 + plane with square = file * 8 + rank from the mover's side:
    #   e2e4: from e2 = 4 * 8 + 1 = 33, two squares "up" = plane 9 + 7 (the "down" planes) + 1 = 17 -> 33*73+17 = 2426
    #   e7e5: Black's board is mirrored, so e7 is again 33 and the move again 2426
    #   g1f3: from g1 = 6 * 8 + 0 = 48, knight jump (rank +2, file -1) = knight plane 3 -> 9 + 56 + 3 = 68
    #         -> 48*73+68 = 3572
    record = GameRecord(
        "chess",
        (2426, 2426, 3572),
        0,
        ("White engine", "Black engine"),
        meta={"termination": "unterminated", "Event": "unit test"},
    )
    text = records.to_pgn(record)
    assert text.strip().endswith("1. e4 e5 2. Nf3 *")
    assert '[White "White engine"]' in text and '[Black "Black engine"]' in text and '[Event "unit test"]' in text
    assert records.from_pgn(text) == record
    won = records.to_pgn(GameRecord("chess", (2426,), 1, ("a", "b")))
    assert won.strip().endswith("1. e4 1-0") and '[Result "1-0"]' in won
    assert records.to_pgn(GameRecord("chess", (), 0, ("a", "b"))).strip().endswith("1/2-1/2")


def test_illegal_actions_and_bad_files_are_one_line_errors(tmp_path):
    # connect_four: column 1 (action 0) holds six discs, so a seventh at ply 7 is illegal.
    record = GameRecord("connect_four", (0, 0, 0, 0, 0, 0, 0), 0, ("a", "b"))
    with pytest.raises(RecordError, match=r"^ply 7: illegal action 0"):
        records.replay(record)
    with pytest.raises(RecordError, match="ply 7"):
        records.write_record(tmp_path / "bad", record)
    assert not os.path.exists(tmp_path / "bad.json")  # nothing written
    # 2426 is e2e4 for White and e7e5 for Black (the board is mirrored); a third 2426 is e2e4 again, with e2 empty.
    with pytest.raises(RecordError, match=r"ply 3: illegal action 2426 \(e2e4\)"):
        records.to_pgn(GameRecord("chess", (2426, 2426, 2426), 0, ("a", "b")))
    with pytest.raises(RecordError, match="unknown game"):
        GameRecord("checkers", (), 0, ("a", "b"))
    with pytest.raises(RecordError, match="result must be"):
        GameRecord("chess", (), 0.5, ("a", "b"))
    (tmp_path / "junk.sgf").write_text("not sgf at all")
    (tmp_path / "junk.pgn").write_text('[Event "x"]\n\n1. e4 e5 2. Ke3 *\n')
    for name, needle in [
        ("junk.sgf", "not a valid SGF"),
        ("junk.pgn", "illegal san: 'Ke3'"),
        ("missing.json", "cannot read record"),
        ("game.txt", "ends in .sgf, .pgn or .json"),
    ]:
        with pytest.raises(RecordError, match=needle) as info:
            records.read_record(tmp_path / name)
        assert "\n" not in str(info.value)


def connect_four_position():
    # Columns 4 4 3 5 4: the first player (X) has 4 (bottom), 3 (bottom), 4 (third from the bottom) -> 3 discs;
    # the second player (O) has 4 (second from the bottom) and 5 (bottom) -> 2 discs.
    return render.position_from_moves("connect_four", "4 4 3 5 4")


def test_svg_of_a_connect_four_position_has_the_right_pieces(tmp_path):
    svg = render.render_svg("connect_four", connect_four_position())
    circles = re.findall(r"<circle [^>]*>", svg)
    black = [c for c in circles if 'fill="black"' in c]  # pgx draws the first player black, the second white
    white = [c for c in circles if 'fill="white"' in c]
    assert (len(black), len(white), len(circles)) == (3, 2, 5)
    # pgx's grid is 35 px: the first disc (column 4, bottom row 6) is centred at (3*35 + 17.5, 5*35 + 17.5).
    assert any('cx="122.5"' in c and 'cy="192.5"' in c for c in black)
    # The same position from a record at ply 5 of a longer game.
    record = GameRecord("connect_four", (3, 3, 2, 4, 3, 0, 0), 0, ("a", "b"))
    game, state = render.position_from_record(records.write_record(tmp_path / "c4", record), 5)
    assert game == "connect_four" and render.render_svg(game, state) == svg


def test_png_has_the_png_signature_and_pgx_size(tmp_path):
    path = render.render_png("connect_four", connect_four_position(), tmp_path / "c4.png")
    data = open(path, "rb").read()
    assert data[:8] == PNG_SIGNATURE
    # IHDR: width and height as big-endian uint32 at bytes 16..24. pgx's connect_four drawing is
    # (7 columns + 1) * 35 px square = 280 x 280, and cairosvg draws one SVG px as one pixel.
    assert struct.unpack(">II", data[16:24]) == (280, 280)


def test_position_selection_errors(tmp_path):
    path = records.write_record(tmp_path / "g", GameRecord("connect_four", (3, 3), 0, ("a", "b")))
    with pytest.raises(RecordError, match=r"ply 3 out of range: the record has 2 plies \(0..2\)"):
        render.position_from_record(path, 3)
    with pytest.raises(RecordError, match=r"move 2 \('8'\): malformed move"):
        render.position_from_moves("connect_four", "4 8")
    with pytest.raises(RecordError, match="unknown game 'chekers'"):
        render.position_from_moves("chekers", "")


def test_cli_render_writes_a_picture(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")  # JAX already runs in this process
    out = tmp_path / "pos.svg"
    assert cli.main(["render", "--game", "connect_four", "--moves", "4 4 3 5 4", "--out", str(out)]) == 0
    assert len(re.findall(r"<circle ", out.read_text())) == 5
    record = records.write_record(tmp_path / "g", GameRecord("chess", (2426, 2426, 3572), 0, ("a", "b")))
    png = tmp_path / "chess.png"
    assert cli.main(["render", "--record", record, "--ply", "2", "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    assert cli.main(["render", "--record", record, "--ply", "9", "--out", str(tmp_path / "x.svg")]) == 2
    assert cli.main(["render", "--game", "chess", "--out", str(tmp_path / "x.gif")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2:] == [
        "az-jax: error: ply 9 out of range: the record has 3 plies (0..3)",
        f"az-jax: error: cannot write {str(tmp_path / 'x.gif')!r}: the output must end in .svg or .png",
    ]
    assert not (tmp_path / "x.svg").exists() and not (tmp_path / "x.gif").exists()


def test_cli_bad_move_is_exit_2_and_writes_nothing(tmp_path):
    # Column 1 holds six discs after six moves, so the seventh "1" is illegal; the real entry point, in a fresh process.
    out = tmp_path / "pos.png"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "az_jax.apps.cli",
            "--devices",
            "1",
            "render",
            "--game",
            "connect_four",
            "--moves",
            "1 1 1 1 1 1 1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XLA_FLAGS": ""},
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("az-jax: error: move 7 ('1'): illegal move '1'"), lines
    assert not out.exists()
