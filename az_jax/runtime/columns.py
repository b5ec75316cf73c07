"""Append-only column stores: a data set larger than memory, written a part at a time and read a minibatch at a time.

A store is a directory: one raw file per column (`NAME.bin`: its rows back to back, C order, no header) and
`columns.json`, which names each column's dtype and row shape, the caller's metadata, and how many rows are committed.

    columns.create(d, {"board": (np.int8, (81,)), "action": (np.int32, ())}, meta={"size": 9})
    columns.append(d, {"board": boards, "action": actions})       # k more rows, committed when it returns
    rows, meta = columns.read(d)                                   # {name: read-only np.memmap [M, ...]}, meta
    rows["board"][np.array([5, 2, 9])]                             # reads those three rows from the file

`append` writes the new rows at the end of every column file, flushes them, and only then rewrites `columns.json`
(a temporary file renamed over it) with the new count: a crash in between leaves rows past the count, which readers
ignore and the next `append` cuts off. Nothing already committed is rewritten. A column file shorter than the count
(a damaged store) is a ColumnsError, one line. Reading maps the files (`np.memmap`), so only the rows a minibatch
gathers are read from disk (or the page cache).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from az_jax.runtime import files

FORMAT = 1
INDEX = "columns.json"
Schema = Mapping[str, tuple[Any, tuple[int, ...]]]  # column name -> (dtype, row shape)


class ColumnsError(Exception):
    """A store that is missing, damaged, or not the one asked for: one line, for the CLI."""


def is_store(path: str | os.PathLike) -> bool:
    """Whether `path` is a directory holding a column store."""
    return os.path.isfile(os.path.join(path, INDEX))


def _index(path: str | os.PathLike) -> dict:
    index_path = os.path.join(path, INDEX)
    try:
        with open(index_path, encoding="utf-8") as f:
            index = json.load(f)
    except FileNotFoundError:
        raise ColumnsError(f"no column store at {path} (no {INDEX})") from None
    except (OSError, ValueError) as e:
        raise ColumnsError(f"{index_path} cannot be read ({' '.join(str(e).split())})") from None
    ok = (
        isinstance(index, dict)
        and index.get("format") == FORMAT
        and isinstance(index.get("rows"), int)
        and isinstance(index.get("columns"), dict)
        and all(isinstance(c, dict) and {"dtype", "shape"} <= c.keys() for c in index["columns"].values())
    )
    if not ok:
        raise ColumnsError(f"{index_path} is not a column store index (format {FORMAT})")
    return index


def _write_index(path: str | os.PathLike, index: dict) -> None:
    with files.replaced_whole(os.path.join(path, INDEX)) as f:
        json.dump(index, f, indent=1, sort_keys=True)


def _row_bytes(column: dict) -> int:
    return int(np.dtype(column["dtype"]).itemsize * np.prod(column["shape"], dtype=np.int64))


def create(path: str | os.PathLike, schema: Schema, meta: dict | None = None) -> None:
    """An empty store at `path` (a new or empty directory) with these columns and metadata."""
    if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
        raise ColumnsError(f"{path} exists and is not an empty directory (nothing was written)")
    os.makedirs(path, exist_ok=True)
    columns = {name: {"dtype": np.dtype(dtype).str, "shape": list(shape)} for name, (dtype, shape) in schema.items()}
    for name in columns:
        open(os.path.join(path, f"{name}.bin"), "wb").close()
    _write_index(path, {"format": FORMAT, "rows": 0, "columns": columns, "meta": meta or {}})


def meta(path: str | os.PathLike) -> tuple[dict, int]:
    """(the caller's metadata, rows committed) of the store at `path`."""
    index = _index(path)
    return index["meta"], index["rows"]


def append(path: str | os.PathLike, rows: Mapping[str, np.ndarray], meta: dict | None = None) -> int:
    """Appends the same number of rows to every column (each array [k, *row shape], cast to the column's dtype) and
    commits them, with `meta` replacing the metadata when given; returns the rows committed now."""
    index = _index(path)
    columns = index["columns"]
    if set(rows) != set(columns):
        raise ColumnsError(f"{path}: append gives columns {sorted(rows)}, the store has {sorted(columns)}")
    counts = {len(a) for a in rows.values()}
    if len(counts) != 1:
        raise ColumnsError(f"{path}: append gives columns of different lengths {sorted(counts)}")
    k = counts.pop()
    committed = index["rows"]
    arrays = {}
    for name, column in columns.items():  # every column checked before any is written
        arrays[name] = np.ascontiguousarray(rows[name], dtype=np.dtype(column["dtype"]))
        if arrays[name].shape[1:] != tuple(column["shape"]):
            shape = tuple(column["shape"])
            raise ColumnsError(f"{path}: column {name} takes rows of shape {shape}, not {arrays[name].shape[1:]}")
    for name, column in columns.items():
        with open(os.path.join(path, f"{name}.bin"), "r+b") as f:
            f.truncate(committed * _row_bytes(column))  # rows past the count: a crashed append's, never committed
            f.seek(0, os.SEEK_END)
            f.write(arrays[name].tobytes())
            f.flush()
            os.fsync(f.fileno())
    index["rows"] = committed + k
    if meta is not None:
        index["meta"] = meta
    _write_index(path, index)
    return index["rows"]


def read(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict]:
    """({column: read-only array [M, *row shape]}, metadata) of the committed rows; arrays map the files."""
    index = _index(path)
    m = index["rows"]
    out = {}
    for name, column in index["columns"].items():
        dtype, shape = np.dtype(column["dtype"]), (m, *column["shape"])
        file = os.path.join(path, f"{name}.bin")
        try:
            size = os.path.getsize(file)
        except OSError:
            raise ColumnsError(f"{path} is damaged: its column file {name}.bin is missing") from None
        if size < m * _row_bytes(column):
            raise ColumnsError(
                f"{path} is damaged: {name}.bin holds {size // max(_row_bytes(column), 1)} rows, {INDEX} says {m}"
            )
        out[name] = np.memmap(file, dtype, "r", shape=shape) if m and _row_bytes(column) else np.zeros(shape, dtype)
    return out, index["meta"]


def truncate(path: str | os.PathLike, rows: int, meta: dict) -> None:
    """Takes back the commits past the first `rows` rows (for a caller that committed to two stores and died between
    them), with `meta` as the metadata; the rows past the count are cut off by the next append."""
    index = _index(path)
    if not 0 <= rows <= index["rows"]:
        raise ColumnsError(f"{path}: cannot truncate {index['rows']} rows to {rows}")
    index["rows"], index["meta"] = rows, meta
    _write_index(path, index)
