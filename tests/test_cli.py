"""Bad input through the real CLI: a clear one-line error, non-zero exit, nothing already written is touched."""

import json
import os
import subprocess
import sys

import pytest

from conftest import FAST_COMPILES

TINY = [
    "--set",
    "num_blocks=1",
    "--set",
    "num_channels=8",
    "--set",
    "value_hidden=8",
    "--set",
    "num_simulations=4",
    "--set",
    "selfplay_batch_size=8",
    "--set",
    "selfplay_steps=3",
    "--set",
    "replay_capacity=256",
    "--set",
    "batch_size=16",
    "--set",
    "min_replay_size=16",
    "--set",
    "eval_every=0",
    "--set",
    "checkpoint_every=1",
    "--set",
    "train_ratio=0.5",
    "--set",
    "num_iterations=2",
]


def az(*args, timeout=300):
    """`az-jax ARGS` in a subprocess on 2 host devices. Its programs are tiny: XLA's optimisation passes are off, and
    it shares the session's compilation cache (conftest.py), so the tiny run that this file and test_evaluation.py
    both train is compiled once."""
    env = {**os.environ, **FAST_COMPILES, "XLA_FLAGS": ""}
    return subprocess.run(
        [sys.executable, "-m", "az_jax.apps.cli", "--devices", "2", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def error_line(result):
    lines = [l for l in result.stderr.splitlines() if l.startswith("az-jax: error:")]
    assert len(lines) == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["train", "--game", "tic_tac_tow"], "unknown game 'tic_tac_tow'"),
        (["train", "--game", "tic_tac_toe", "--set", "num_simulation=8"], "unknown config key 'num_simulation'"),
        (["train", "--game", "tic_tac_toe", "--set", "num_simulations=0"], "num_simulations must be a positive"),
        (["train", "--game", "tic_tac_toe", "--set", "search=alphabeta"], "search must be one of puct, gumbel"),
        (["train", "--game", "tic_tac_toe", "--set", "selfplay_batch_size=9"], "not divisible by the 2 devices"),
        (["train", "--game", "tic_tac_toe", "--preset", "huge"], "unknown preset 'huge'"),
    ],
)
def test_bad_config_is_a_one_line_error(tmp_path, args, needle):
    result = az(*args, "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert needle in error_line(result)
    assert not (tmp_path / "run").exists()  # nothing written


def _snapshot(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[path] = f.read()
    return out


def test_mismatched_and_corrupt_checkpoints(tmp_path):
    run = tmp_path / "run"
    ok = az("train", "--game", "tic_tac_toe", "--run-dir", str(run), "--no-progress", *TINY)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert sorted(os.listdir(run / "checkpoints")) == ["1", "2"]
    before = _snapshot(run)

    # Another game's command pointed at this run: refused before anything is written.
    other = az("train", "--game", "connect_four", "--run-dir", str(run), *TINY)
    assert other.returncode == 2
    assert "belongs to a different run" in error_line(other) and "connect_four" in error_line(other)
    assert _snapshot(run) == before

    # Corrupt the latest checkpoint's files: a clear error, and the other files stay as they were.
    for dirpath, _, files in os.walk(run / "checkpoints" / "2"):
        for name in files:
            with open(os.path.join(dirpath, name), "wb") as f:
                f.write(b"not a checkpoint")
    before = _snapshot(run)
    corrupt = az("train", "--game", "tic_tac_toe", "--run-dir", str(run), *TINY[:-1], "num_iterations=3")
    assert corrupt.returncode == 2
    assert "checkpoint 2" in error_line(corrupt)
    assert _snapshot(run) == before

    # A run dir whose config.json is not a config.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"game": "tic_tac_toe", "colour": "blue"}))
    result = az("train", "--game", "tic_tac_toe", "--run-dir", str(bad), *TINY)
    assert result.returncode == 2 and "unknown config key 'colour'" in error_line(result)
    assert json.loads((bad / "config.json").read_text()) == {"game": "tic_tac_toe", "colour": "blue"}


def test_play_without_a_run_is_an_error(tmp_path):
    result = az("play", "--run-dir", str(tmp_path / "nothing"))
    assert result.returncode == 2
    assert "no run or checkpoint" in error_line(result)
