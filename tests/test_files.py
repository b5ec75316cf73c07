"""Tests for az_jax.runtime.files: JSON Lines round trip, a missing file, and CSV files that are
replaced whole or not at all."""

import os

import pytest

from az_jax.runtime.files import append_jsonl, read_jsonl, replaced_whole_bytes, write_csv


def test_jsonl_round_trip(tmp_path):
    path = str(tmp_path / "sub" / "log.jsonl")  # the parent directory is created
    append_jsonl(path, {"a": 1, "b": "x"})
    append_jsonl(path, {"a": 2, "b": None})
    with open(path) as f:
        assert f.read() == '{"a": 1, "b": "x"}\n{"a": 2, "b": null}\n'
    with open(path, "a") as f:
        f.write("\n")  # a blank line is skipped
    assert read_jsonl(path) == [{"a": 1, "b": "x"}, {"a": 2, "b": None}]


def test_missing_jsonl_is_empty(tmp_path):
    assert read_jsonl(str(tmp_path / "nothing.jsonl")) == []


def test_unserialisable_record_leaves_jsonl_intact(tmp_path):
    path = str(tmp_path / "log.jsonl")
    append_jsonl(path, {"a": 1})
    with pytest.raises(TypeError):
        append_jsonl(path, {"a": object()})
    assert read_jsonl(path) == [{"a": 1}]


def test_write_csv(tmp_path):
    path = str(tmp_path / "t.csv")
    write_csv(path, [{"x": 1, "y": "a"}, {"x": 2.5, "y": None}])
    with open(path, newline="") as f:  # csv ends rows with \r\n
        assert f.read() == "x,y\r\n1,a\r\n2.5,\r\n"
    write_csv(path, [{"y": "b"}], columns=["x", "y"])  # columns in the given order, a missing value empty
    with open(path, newline="") as f:
        assert f.read() == "x,y\r\n,b\r\n"


def test_failed_csv_write_keeps_old_file(tmp_path):
    path = str(tmp_path / "t.csv")
    write_csv(path, [{"x": 1}])
    with pytest.raises(ValueError):  # the second row has a column the header lacks
        write_csv(path, [{"x": 2}, {"x": 3, "z": 4}])
    with open(path, newline="") as f:
        assert f.read() == "x\r\n1\r\n"
    assert os.listdir(tmp_path) == ["t.csv"]  # no temporary file left behind


def test_replaced_whole_bytes_has_open_permissions_and_keeps_old_file_on_error(tmp_path):
    # The bytes are written beside the target and renamed over it, with the permissions `open` gives a new file
    # (mkstemp's 0600 would hide an agent's rollout.npz from other users).
    reference = tmp_path / "reference"
    reference.write_bytes(b"")
    path = str(tmp_path / "p.npz")
    with replaced_whole_bytes(path) as f:
        f.write(b"first")
    assert open(path, "rb").read() == b"first"
    assert os.stat(path).st_mode & 0o777 == os.stat(reference).st_mode & 0o777
    with pytest.raises(RuntimeError), replaced_whole_bytes(path) as f:
        f.write(b"second, half")
        raise RuntimeError("crash while writing")
    assert open(path, "rb").read() == b"first"
    assert sorted(os.listdir(tmp_path)) == ["p.npz", "reference"]
