"""Tests for az_jax.runtime.metrics: a run resumed at a checkpoint logs each iteration once, in metrics.jsonl and
TensorBoard.

TensorBoard's own reader is not installed, so the event files are read here (TFRecord framing) and TensorBoard's rule
for a restart is applied: a `SessionLog.START` event at step S hides every event of a step >= S read before it."""

import glob
import json
import os
import struct

from tensorboardX.proto.event_pb2 import Event, SessionLog

from az_jax.runtime.metrics import MetricsWriter, kept_lines, read_metrics


def _record(iteration: int, loss: float) -> str:
    return json.dumps({"iteration": iteration, "time": 0.0, "train/loss": loss}) + "\n"


def _events(path: str) -> list[Event]:
    """The events of one TensorBoard event file (TFRecords: length, its CRC, data, its CRC)."""
    events = []
    with open(path, "rb") as f:
        while header := f.read(12):
            (length,) = struct.unpack("<Q", header[:8])
            events.append(Event.FromString(f.read(length)))
            f.read(4)
    return events


def _scalars(log_dir: str, tag: str) -> list[tuple[int, float]]:
    """(step, value) of every event of `tag` TensorBoard shows: files in name order, purged at each restart."""
    shown: list[tuple[int, float]] = []
    for path in sorted(glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))):
        for event in _events(path):
            if event.HasField("session_log") and event.session_log.status == SessionLog.START:
                shown = [(step, value) for step, value in shown if step < event.step]
            shown += [(event.step, v.simple_value) for v in event.summary.value if v.tag == tag]
    return shown


def _backdate(log_dir: str, seconds: int) -> None:
    """Renames the event files of `log_dir` as if written `seconds` earlier (a file name holds its creation second;
    a second writer in the same second would reuse the name)."""
    for path in glob.glob(os.path.join(log_dir, "events.out.tfevents.*")):
        parts = os.path.basename(path).split(".", 4)  # events, out, tfevents, seconds, host name
        parts[3] = str(int(parts[3]) - seconds)
        os.rename(path, os.path.join(log_dir, ".".join(parts)))


def test_kept_lines():
    text = _record(1, 1.0) + "junk\n" + _record(2, 2.0) + _record(4, 4.0) + _record(2, 2.5) + '{"iteration": 3}'
    # Iteration 2's last record wins, iteration 4 is past the checkpoint, the unterminated iteration 3 was cut short.
    assert kept_lines(text, 3) == [_record(1, 1.0), _record(2, 2.5)]
    assert kept_lines(text, 0) == []
    assert kept_lines('{"iteration": "1"}\n[1]\n{"iteration": true}\n', 9) == []  # no integer iteration


def test_resume_logs_each_iteration_once(tmp_path):
    run_dir = str(tmp_path)
    path = os.path.join(run_dir, "metrics.jsonl")
    # The interrupted run: iterations 1..6 logged, a kill during iteration 7's line, checkpoint 4 the newest.
    first = MetricsWriter(run_dir, total=8, progress=False)
    for it in range(1, 7):
        first.write(it, {"train/loss": float(it)})
    first.close()
    with open(path, "a") as f:
        f.write('{"iteration": 7, "time": 1.0, "train/lo')
    _backdate(os.path.join(run_dir, "tensorboard"), 10)

    resumed = MetricsWriter(run_dir, total=8, initial=4, progress=False)
    assert [r["iteration"] for r in read_metrics(run_dir)] == [1, 2, 3, 4]  # trimmed on opening
    for it in (5, 6):
        resumed.write(it, {"train/loss": 10.0 * it})
    resumed.close()
    records = read_metrics(run_dir)
    assert [(r["iteration"], r["train/loss"]) for r in records] == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 50), (6, 60)]
    assert set(records[0]) == {"iteration", "time", "train/loss"}  # the records' format is unchanged
    assert not glob.glob(path + ".*")  # no temporary file left

    files = sorted(glob.glob(os.path.join(run_dir, "tensorboard", "events.out.tfevents.*")))
    assert len(files) == 2
    restart = [e.step for e in _events(files[1]) if e.session_log.status == SessionLog.START]
    assert restart == [5]  # purge_step = initial + 1
    assert _scalars(os.path.join(run_dir, "tensorboard"), "train/loss") == [
        (1, 1.0),
        (2, 2.0),
        (3, 3.0),
        (4, 4.0),
        (5, 50.0),
        (6, 60.0),
    ]


def test_new_run_and_restart_from_zero(tmp_path):
    run_dir = str(tmp_path / "run")
    writer = MetricsWriter(run_dir, total=2, progress=False)  # no run dir, no file yet
    writer.write(1, {"train/loss": 1.0})
    writer.close()
    assert [r["iteration"] for r in read_metrics(run_dir)] == [1]
    # Killed before its first checkpoint: the run starts again at 0 and forgets iteration 1.
    again = MetricsWriter(run_dir, total=2, initial=0, progress=False)
    assert read_metrics(run_dir) == []
    again.write(1, {"train/loss": 2.0})
    again.close()
    assert [(r["iteration"], r["train/loss"]) for r in read_metrics(run_dir)] == [(1, 2.0)]


def test_inactive_writer_touches_nothing(tmp_path):
    run_dir = str(tmp_path)
    with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
        f.write(_record(1, 1.0) + _record(2, 2.0))
    writer = MetricsWriter(run_dir, total=4, initial=1, progress=False, active=False)
    writer.write(2, {"train/loss": 3.0})
    writer.close()
    assert open(os.path.join(run_dir, "metrics.jsonl")).read() == _record(1, 1.0) + _record(2, 2.0)
    assert sorted(os.listdir(run_dir)) == ["metrics.jsonl"]
