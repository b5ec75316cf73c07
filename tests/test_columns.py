"""Append-only column stores (az_jax/runtime/columns.py): rows committed by append, read back as memory maps; a crashed
append's rows past the count ignored and cut off; damage and misuse as one-line errors."""

import json
import os

import numpy as np
import pytest

from az_jax.runtime import columns

SCHEMA = {"board": (np.int8, (3,)), "action": (np.int32, ())}


def test_append_commits_rows_that_read_back_as_maps(tmp_path):
    d = tmp_path / "store"
    columns.create(d, SCHEMA, meta={"size": 3})
    assert columns.is_store(d) and columns.meta(d) == ({"size": 3}, 0)
    rows, _ = columns.read(d)
    assert rows["board"].shape == (0, 3) and rows["action"].shape == (0,)
    first = {"board": np.arange(6).reshape(2, 3), "action": np.array([7, 8])}
    assert columns.append(d, first) == 2
    assert columns.append(d, {"board": np.full((1, 3), -1), "action": np.array([9])}, meta={"size": 3, "n": 1}) == 3
    rows, meta = columns.read(d)
    assert isinstance(rows["board"], np.memmap) and rows["board"].dtype == np.int8
    assert rows["board"].tolist() == [[0, 1, 2], [3, 4, 5], [-1, -1, -1]] and rows["action"].tolist() == [7, 8, 9]
    assert rows["board"][np.array([2, 0])].tolist() == [[-1, -1, -1], [0, 1, 2]]  # a minibatch gather
    assert meta == {"size": 3, "n": 1}
    # the files hold exactly the rows: 3 rows x 3 int8 = 9 bytes, 3 x 4 bytes = 12
    assert os.path.getsize(d / "board.bin") == 9 and os.path.getsize(d / "action.bin") == 12


def test_a_crashed_append_is_ignored_then_cut_off(tmp_path):
    d = tmp_path / "store"
    columns.create(d, SCHEMA)
    columns.append(d, {"board": np.ones((2, 3)), "action": np.array([1, 2])})
    with open(d / "board.bin", "ab") as f:  # an append that wrote one column and died before the index
        f.write(np.full((4, 3), 5, np.int8).tobytes())
    rows, _ = columns.read(d)
    assert len(rows["board"]) == 2 and rows["board"].tolist() == [[1, 1, 1]] * 2
    columns.append(d, {"board": np.zeros((1, 3)), "action": np.array([3])})
    rows, _ = columns.read(d)
    assert rows["board"].tolist() == [[1, 1, 1], [1, 1, 1], [0, 0, 0]] and rows["action"].tolist() == [1, 2, 3]
    assert os.path.getsize(d / "board.bin") == 9  # the 12 stray bytes are gone
    columns.truncate(d, 1, {"taken back": 2})  # a commit taken back: 1 row of 3 stays
    assert columns.meta(d) == ({"taken back": 2}, 1) and columns.read(d)[0]["action"].tolist() == [1]
    columns.append(d, {"board": np.zeros((1, 3)), "action": np.array([4])})
    assert columns.read(d)[0]["action"].tolist() == [1, 4] and os.path.getsize(d / "action.bin") == 8
    with pytest.raises(columns.ColumnsError, match="cannot truncate 2 rows to 3"):
        columns.truncate(d, 3, {})


def test_damage_and_misuse_are_one_line_errors(tmp_path):
    d = tmp_path / "store"
    columns.create(d, SCHEMA)
    columns.append(d, {"board": np.ones((2, 3)), "action": np.array([1, 2])})
    cases = [
        (lambda: columns.append(d, {"board": np.ones((1, 3))}), "columns"),
        (lambda: columns.append(d, {"board": np.ones((2, 3)), "action": np.array([1])}), "different lengths"),
        (lambda: columns.append(d, {"board": np.ones((1, 4)), "action": np.array([1])}), r"shape \(3,\)"),
        (lambda: columns.create(d, SCHEMA), "not an empty directory"),
        (lambda: columns.read(tmp_path / "none"), "no column store"),
    ]
    for call, message in cases:
        with pytest.raises(columns.ColumnsError, match=message) as e:
            call()
        assert "\n" not in str(e.value)
    assert columns.read(d)[0]["action"].tolist() == [1, 2]  # nothing was written by the refused calls
    with open(d / "action.bin", "r+b") as f:
        f.truncate(4)  # one row of the two committed
    with pytest.raises(columns.ColumnsError, match="damaged: action.bin holds 1 rows, columns.json says 2"):
        columns.read(d)
    (d / "columns.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(columns.ColumnsError, match="not a column store index"):
        columns.read(d)
