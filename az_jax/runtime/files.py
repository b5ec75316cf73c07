"""Host file helpers: JSON Lines logs (one JSON object per line, appended, never rewritten) and CSV tables (written
whole to a temporary file beside the target, then renamed over it, so a crash never leaves half a file)."""

import contextlib
import csv
import json
import os
from collections.abc import Iterator
from typing import BinaryIO, TextIO


def read_jsonl(path: str) -> list[dict]:
    """Every record of the JSON Lines file `path`, in order (blank lines skipped); [] if the file does not exist."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def append_jsonl(path: str, record: dict) -> None:
    """Appends `record` as one line to `path` (created with its parent directories if missing)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    line = json.dumps(record) + "\n"  # serialised first: a record that cannot be written leaves the file as it was
    with open(path, "a") as f:
        f.write(line)


@contextlib.contextmanager
def replaced_whole(path: str, encoding: str = "utf-8") -> Iterator[TextIO]:
    """`with replaced_whole(path) as f: f.write(...)`: the text goes to a temporary file beside `path` (same file
    system, so os.replace is atomic), renamed over `path` when the block ends; if it raises, `path` is untouched and
    the temporary file removed."""
    with _replaced(path, "w", encoding=encoding, newline="") as f:
        yield f


@contextlib.contextmanager
def replaced_whole_bytes(path: str) -> Iterator[BinaryIO]:
    """`replaced_whole` for bytes (an .npz): the file gets the usual permissions, as `open` gives them."""
    with _replaced(path, "wb") as f:
        yield f


@contextlib.contextmanager
def _replaced(path: str, mode: str, **open_args) -> Iterator:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, mode, **open_args) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_csv(path: str, rows: list[dict], columns: list[str] | None = None) -> None:
    """Writes `rows` to the CSV file `path` with a header: `columns` (default: the first row's keys) in that order, a
    missing value written as an empty cell. The file is replaced only once every row is written."""
    with replaced_whole(path) as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if columns is None else columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
