"""Tests for az_jax.files: JSON Lines round trip, a missing file, and CSV files that are
replaced whole or not at all."""

import os

import pytest

from az_jax.files import append_jsonl, read_jsonl, write_csv


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
