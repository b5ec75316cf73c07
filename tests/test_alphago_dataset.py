"""The expert-game corpus and position data set of AlphaGo's supervised policy network (az_jax/alphago/corpus.py,
az_jax/alphago/dataset.py): SGF coordinates to pgx actions, handicap set-up, captures, labels, outcomes, duplicates,
skipped and cut records, the held-out split by game, files; and the real professional games of /usr/share/goban."""

import hashlib
import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from az_jax.alphago import corpus, dataset

# SGF points are [column row] with "a" = 0, row 0 the TOP row, so pgx action = row * 9 + column on 9x9.
# One handicap stone AB[cc] (action 2*9+2 = 20); White moves first; Black's moves 2, 4, 6, 8 surround W[ee] and
# move 8 captures it; move 5 is a White pass.
HAND = b"""(;GM[1]FF[4]SZ[9]KM[0.5]PB[b]PW[w]RE[B+R]AB[cc]
;W[ee];B[de];W[ge];B[fe];W[];B[ed];W[ia];B[ef];W[ha];B[ee])"""
HAND_ACTIONS = (
    40,  # 1 W[ee]: 4*9+4
    39,  # 2 B[de]: 4*9+3
    42,  # 3 W[ge]: 4*9+6
    41,  # 4 B[fe]: 4*9+5
    81,  # 5 W[]  : pass = 9*9
    31,  # 6 B[ed]: 3*9+4
    8,  #  7 W[ia]: 0*9+8
    49,  # 8 B[ef]: 5*9+4, captures W[ee]
    7,  #  9 W[ha]: 0*9+7
    40,  # 10 B[ee]: 4*9+4, on the point just emptied
)
# The same game as an old .mgt record: FF[3] header, a line break inside a move's brackets, no trailing newline.
HAND_MGT = b"(;SZ[9]FF[3]RE[B+R]AB[cc];W[ee];B[d\r\ne];W[ge];B[fe];W[];B[ed];W[ia];B[ef];W[ha];B[ee])"
# Its first four moves only (the same game recorded less far): a prefix duplicate.
HAND_SHORT = b"(;SZ[9]RE[B+R]AB[cc];W[ee];B[de];W[ge];B[fe])"
# Occupied point: move 3 B[ee] is on Black's own stone of move 1. Moves 1, 2 stay.
OCCUPIED = b"(;SZ[9]RE[W+3.5];B[ee];W[dd];B[ee];W[cc])"
# Suicide: White's move 4 W[aa] fills its last liberty (B[ba], B[ab] around the corner). Moves 1-3 stay.
SUICIDE = b"(;SZ[9]RE[White wins by resignation];B[ba];W[ee];B[ab];W[aa];B[cc])"
# Ko: move 9 B[cb] (1*9+2 = 11) takes W[bb] (1*9+1 = 10), which B[ab], B[ba], B[bc] surround; White's move 10
# retakes at once, which pgx's simple-ko rule forbids. Moves 1-9 stay.
KO = b"(;SZ[9]RE[B+1.5];B[ab];W[bb];B[ba];W[ca];B[bc];W[db];B[ii];W[cc];B[cb];W[bb];B[gg])"
# White makes moves 2 and 3: the record is cut after move 2.
TWICE = b"(;SZ[9]RE[0];B[ce];W[gg];W[cc];B[ee])"
RECORDS = {
    "a_hand.sgf": HAND,
    "b_hand.mgt": HAND_MGT,
    "c_short.sgf": HAND_SHORT,
    "d_occupied.sgf": OCCUPIED,
    "e_ko.sgf": KO,
    "e_suicide.sgf": SUICIDE,
    "f_twice.sgf": TWICE,
    "g_garbage.sgf": b"this is not an SGF file",
    "h_big.sgf": b"(;SZ[19];B[pd];W[dp])",
    "i_white_first.sgf": b"(;SZ[9];W[ee];B[cc])",
    "j_setup.sgf": b"(;SZ[9]AB[cc]AW[gg];B[ee])",
    "notes.txt": b"not a record: ignored",
}


@pytest.fixture(scope="module")
def hand_corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("sgfs")
    for name, data in RECORDS.items():
        (directory / name).write_bytes(data)
    games, report = corpus.load_corpus([directory], 9)
    positions, cut = dataset.replay(games, 9, batch=4)
    return games, report, positions, cut


def test_corpus_report_counts_skips_cuts_and_duplicates(hand_corpus):
    games, report, _, _ = hand_corpus
    assert report["files"] == 11  # the 11 .sgf/.mgt files, not notes.txt
    # parsed: hand, hand mgt, short, occupied, ko, suicide, twice = 7; skipped: the other 4
    assert report["parsed"] == 7
    assert report["skipped"] == {
        "board size 19, not 9": 1,
        "not SGF (parse error)": 1,
        "set-up stones other than handicap (AW/AE)": 1,
        "White moves first without handicap stones": 1,
    }
    assert report["cut"] == {"two moves of one colour in a row": 1}
    assert report["duplicates"] == 1  # b_hand.mgt is a_hand.sgf
    assert report["prefix_duplicates"] == 1  # c_short.sgf is its start
    assert report["unique_games"] == 5 == len(games)
    assert [g.name for g in games] == ["a_hand.sgf", "d_occupied.sgf", "e_ko.sgf", "e_suicide.sgf", "f_twice.sgf"]
    hand, occupied, _, suicide, twice = games
    assert hand.setup == (20,) and hand.actions == HAND_ACTIONS and hand.white_first and hand.winner == 1
    assert occupied.winner == -1 and suicide.winner == -1 and twice.winner == 0
    assert twice.actions == (38, 60)  # B[ce] = 4*9+2 = 38, W[gg] = 6*9+6 = 60; W[cc] cut


def test_handicap_setup_plies():
    n_pass = 81
    white_first = corpus.ExpertGame("s", "n", 9, (20, 60), (40,), 1, white_first=True)
    # stone, White pass, stone, then White's first recorded move
    assert corpus.replay_actions(white_first) == (20, n_pass, 60, 40) and white_first.setup_plies == 3
    black_first = corpus.ExpertGame("s", "n", 9, (20, 60), (40,), 1, white_first=False)
    # one more White pass so that Black makes the first recorded move
    assert corpus.replay_actions(black_first) == (20, n_pass, 60, n_pass, 40) and black_first.setup_plies == 4


def test_results():
    assert [corpus.winner_of(t) for t in ("B+R", "W+2.5", "White wins by resignation", "B+", "0", "Jigo", "?")] == [
        1,
        -1,
        -1,
        1,
        0,
        0,
        0,
    ]


def test_replayed_positions_labels_and_outcomes(hand_corpus):
    games, _, positions, cut = hand_corpus
    hand = positions.take(positions.game == 0)
    # 10 moves minus the pass (move 5); the set-up ply is never a label
    assert hand.move_number.tolist() == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert hand.action.tolist() == [40, 39, 42, 41, 31, 8, 49, 7, 40]
    black = hand.position.black_to_move.tolist()
    assert black == [False, True, False, True, True, False, True, False, True]  # W moves first; W passed at 5
    # Black won: +1 where Black is to move, -1 where White is
    assert hand.outcome.tolist() == [1 if b else -1 for b in black]

    # before move 1 (White to move): only the handicap stone, Black's, so -1 from White's view
    first = hand.position.board[0]
    assert np.flatnonzero(first).tolist() == [20] and first[20] == -1

    # before move 9, W[ha] (White to move), after Black's move 8 took W[ee] (point 40) off the board
    board, since = hand.position.board[7], hand.position.turns_since[7]
    white, black_stones = {42, 8}, {20, 39, 41, 31, 49}  # W[ge], W[ia]; AB[cc], B[de], B[fe], B[ed], B[ef]
    assert set(np.flatnonzero(board == 1).tolist()) == white  # +1: the player to move's (White's) stones
    assert set(np.flatnonzero(board == -1).tolist()) == black_stones
    assert board[40] == 0 and hand.position.ko[7] == -1  # captured; not a ko (B[ef] has an empty neighbour)
    # pgx plies: 0 AB[cc], then move k at ply k. Before ply 9, a stone of ply p was played 9 - p turns ago (8 = 8+):
    # ef ply 8 -> 1, ia 7 -> 2, ed 6 -> 3, fe 4 -> 5, ge 3 -> 6, de 2 -> 7, cc 0 -> 9, so 8
    assert {p: int(since[p]) for p in (49, 8, 31, 41, 42, 39, 20)} == {49: 1, 8: 2, 31: 3, 41: 5, 42: 6, 39: 7, 20: 8}
    assert since[40] == 0

    # the last position: Black to move, about to play on the emptied point 40
    assert hand.position.board[8][40] == 0 and hand.action[8] == 40


def test_illegal_moves_cut_the_game(hand_corpus):
    games, _, positions, cut = hand_corpus
    counts = np.bincount(positions.game, minlength=len(games)).tolist()
    # occupied: moves 1, 2 (move 3 is on a stone); ko: moves 1-9; suicide: moves 1-3 (move 4 W[aa] = 0 has no
    # liberty); twice: both moves kept (it was cut when read)
    assert counts == [9, 2, 9, 3, 2]
    assert cut == {"illegal move in pgx (occupied point, suicide or ko)": 3}
    ko = positions.take(positions.game == 2)
    assert ko.action[-1] == 11 and ko.position.board[-1][10] == -1  # B[cb] = 1*9+2 = 11 takes W[bb] = 1*9+1 = 10
    occupied = positions.take(positions.game == 1)
    assert occupied.outcome.tolist() == [-1, 1]  # W won: Black to move loses, White to move wins


def test_held_out_split_keeps_games_whole(hand_corpus):
    games, _, positions, _ = hand_corpus
    train, test = dataset.split(positions, {0, 3})
    assert sorted(set(test.game.tolist())) == [0, 3] and sorted(set(train.game.tolist())) == [1, 2, 4]
    assert len(train) + len(test) == len(positions) and len(test) == 9 + 3
    # the side of a game depends on its moves only, not on which file it came from
    hand = games[0]
    again = corpus.ExpertGame("elsewhere", "other.sgf", 9, hand.setup, hand.actions, 0, hand.white_first)
    assert corpus.is_held_out(again) == corpus.is_held_out(hand)
    assert corpus.game_key(again) == corpus.game_key(hand)


def test_save_load_round_trip_and_errors(hand_corpus, tmp_path):
    _, _, positions, _ = hand_corpus
    path = tmp_path / "data" / "positions.npz"
    dataset.save(path, positions, test_games={3})
    loaded = dataset.load(path)
    for got, want in zip(_arrays(loaded), _arrays(positions), strict=True):
        assert got.dtype == want.dtype and np.array_equal(got, want)
    train, test = dataset.load_split(path)
    assert set(test.game.tolist()) == {3} and len(train) == len(positions) - 3  # game 3 (suicide): 3 positions
    assert [p.name for p in path.parent.iterdir()] == ["positions.npz"]  # no temporary file left

    dataset.save(path, positions, test_games={3})  # the same contents: nothing to do
    with pytest.raises(dataset.DatasetError, match="different data set"):
        dataset.save(path, positions.take(positions.game == 0), test_games={3})
    dataset.save(path, positions.take(positions.game == 0), overwrite=True)
    assert len(dataset.load(path)) == 9

    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(path.read_bytes()[:200])
    for bad, message in ((corrupt, "not a readable data set"), (tmp_path / "missing.npz", "no data set at")):
        with pytest.raises(dataset.DatasetError, match=message) as e:
            dataset.load(bad)
        assert "\n" not in str(e.value)


def _arrays(p: dataset.Positions) -> list[np.ndarray]:
    q = p.position
    return [q.board, q.turns_since, q.ko, q.black_to_move, p.action, p.outcome, p.game, p.move_number]


def test_real_professional_games():
    """Debian's goban-original-games (installed by `make test` from .ci/apt-packages.txt)."""
    start = time.perf_counter()
    games, report = corpus.load_corpus([corpus.GOBAN_DIR], 19)
    print("goban-original-games:", json.dumps(report))
    assert report["files"] >= 590  # 596 files in the package
    assert report["unique_games"] >= 500 and all(g.size == 19 for g in games)
    assert 0.02 < len(corpus.held_out(games)) / len(games) < 0.09  # ~5%
    shortest = sorted(games, key=lambda g: len(g.actions))[:3]
    positions, cut = dataset.replay(shortest, 19, batch=3)
    assert cut == {}
    assert len(positions) == sum(a != 19 * 19 for g in shortest for a in g.actions) > 0
    assert time.perf_counter() - start < 60


def test_fetch_kombilo_uses_the_cache_and_checks_the_download(tmp_path, monkeypatch):
    """A cached sdist with the expected SHA-256 is used as it is (pip is not run); otherwise pip downloads it and the
    download must have that SHA-256 (pip itself is replaced here: the tests do not use the network)."""
    monkeypatch.setattr(corpus, "KOMBILO_SHA256", hashlib.sha256(b"good").hexdigest())
    runs = []

    def pip(contents, returncode=0, stderr=""):
        def run(command, **kwargs):
            runs.append(command)
            directory = Path(command[command.index("-d") + 1])
            if contents is not None:
                (directory / corpus.KOMBILO_SDIST).write_bytes(contents)
            return subprocess.CompletedProcess(command, returncode, "", stderr)

        return run

    cached = tmp_path / corpus.KOMBILO_SDIST
    cached.write_bytes(b"good")
    monkeypatch.setattr(corpus.subprocess, "run", pip(b"never"))
    assert corpus.fetch_kombilo(tmp_path) == cached and runs == []

    cached.write_bytes(b"stale")  # a different file: fetched again
    monkeypatch.setattr(corpus.subprocess, "run", pip(b"good"))
    assert corpus.fetch_kombilo(tmp_path) == cached and cached.read_bytes() == b"good" and len(runs) == 1
    assert runs[0][1:5] == ["-m", "pip", "download", "kombilo==0.8.4"]

    cached.unlink()
    monkeypatch.setattr(corpus.subprocess, "run", pip(b"evil"))
    with pytest.raises(corpus.CorpusError, match="SHA-256"):
        corpus.fetch_kombilo(tmp_path)
    monkeypatch.setattr(corpus.subprocess, "run", pip(None, 1, "Collecting kombilo\nERROR: No matching distribution"))
    with pytest.raises(corpus.CorpusError, match="failed: ERROR: No matching distribution$"):
        corpus.fetch_kombilo(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing left behind


def test_random_opening_plies_of_generated_games_are_not_labels(tmp_path):
    # An `az-jax alphago games` record declares its random opening in the az_jax game comment: here 2 plies, so the
    # labels start at move 3. Moves: B[ee] 40, W[cc] 20 (random), then B[gg] 6*9+6 = 60, W[dd] 3*9+3 = 30.
    meta = json.dumps({"first_player": 0, "meta": {"opening_plies": "2", "source": "gnugo"}})
    record = f"(;SZ[9]RE[B+5.5]GC[az_jax {meta}];B[ee];W[cc];B[gg];W[dd])".encode()
    (tmp_path / "game-000000.sgf").write_bytes(record)
    games, _ = corpus.load_corpus([tmp_path], 9)
    assert games[0].unlabelled == 2
    positions = dataset.positions_from_games(games, 9)
    assert positions.action.tolist() == [60, 30] and positions.move_number.tolist() == [3, 4]
    # a record without the comment labels every move
    (tmp_path / "game-000000.sgf").write_bytes(b"(;SZ[9]RE[B+5.5];B[ee];W[cc];B[gg];W[dd])")
    games, _ = corpus.load_corpus([tmp_path], 9)
    assert dataset.positions_from_games(games, 9).action.tolist() == [40, 20, 60, 30]


def _rows(p: dataset.Positions) -> list[tuple]:
    """Each position as a tuple of its fields, sorted: a set of positions whatever their order."""
    return sorted(zip(*[np.asarray(a).reshape(len(p), -1).tolist() for a in _arrays(p)], strict=True)) if len(p) else []


def test_a_directory_data_set_is_streamed_in_parts_and_read_as_maps(hand_corpus, tmp_path, monkeypatch):
    games, _, positions, _ = hand_corpus
    directory = tmp_path / "sgfs"
    directory.mkdir()
    for name, data in RECORDS.items():
        (directory / name).write_bytes(data)
    monkeypatch.setattr(dataset, "_FLUSH", 5)  # appended every 5 positions or more: several commits per part
    monkeypatch.setattr(corpus, "held_out", lambda games: {0, 3})  # games 0 and 3 held out (by hash: none of the 5)
    out = tmp_path / "go9"
    report = dataset.build([directory], 9, out)
    train, test = dataset.load_split(out)
    want_train, want_test = dataset.split(positions, {0, 3})
    assert len(want_test) == 12 and isinstance(train.position.board, np.memmap) and isinstance(test.action, np.memmap)
    assert _rows(train) == _rows(want_train) and _rows(test) == _rows(want_test)  # the same positions as in memory
    assert report["train_positions"] == len(want_train) and report["test_positions"] == len(want_test)
    assert report["positions"] == len(positions) == len(dataset.load(out))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["go9", "sgfs"]  # nothing left beside it
    with pytest.raises(dataset.DatasetError, match="exists; pass overwrite") as e:
        dataset.build([directory], 9, out)
    assert "\n" not in str(e.value) and len(dataset.load(out)) == len(positions)  # left as it was
    (directory / "f_twice.sgf").unlink()  # 2 positions fewer
    dataset.build([directory], 9, out, overwrite=True)
    assert len(dataset.load(out)) == len(positions) - 2
    (out / "train" / "board.bin").write_bytes(b"")
    with pytest.raises(dataset.DatasetError, match="damaged: board.bin") as e:
        dataset.load_split(out)
    assert "\n" not in str(e.value)
