"""Bad input through the real CLI: a clear one-line error, non-zero exit, nothing already written is touched."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys

import pytest

from az_jax.apps import bench, cli, terminal
from az_jax.apps.sweep import command
from az_jax.core import presets as presets_lib
from az_jax.evaluation import in_training, ladder, match
from envs import records

from conftest import FAST_COMPILES, fast_compiles_here

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
    it shares the session's compilation cache (conftest.py)."""
    env = {**os.environ, **FAST_COMPILES, "XLA_FLAGS": ""}
    return subprocess.run(
        [sys.executable, "-m", "az_jax.apps.cli", "--devices", "2", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def az_here(*args) -> subprocess.CompletedProcess:
    """`az-jax --devices 2 ARGS` run by `cli.main` in this process, as az() would run it: the 2 host devices exist
    already (conftest.py), so main's device set-up is skipped, and XLA's optimisation passes are off while it runs.
    For tests of what a command does rather than of its process: it saves the subprocess's start-up (Python, JAX,
    pgx, orbax) and shares this process's compiled programs. A bug's exception propagates."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        patch.setattr(cli, "setup_process", lambda parsed: None)
        with fast_compiles_here():
            code = cli.main(["--devices", "2", *args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def tiny_trained_run(tmp_path_factory):
    """A finished TINY tic-tac-toe run (2 iterations, a checkpoint after each), trained once per session by `az-jax
    train`; tests that change it work on a copy (test_evaluation.py imports this fixture)."""
    run = tmp_path_factory.mktemp("tiny") / "run"
    ok = az_here("train", "--game", "tic_tac_toe", "--run-dir", str(run), "--no-progress", *TINY)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert sorted(os.listdir(run / "checkpoints")) == ["1", "2"]
    return run


def error_line(result):
    lines = [l for l in result.stderr.splitlines() if l.startswith("az-jax: error:")]
    assert len(lines) == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    return lines[0]


BAD_CONFIGS = [
    (["train", "--game", "tic_tac_tow"], "unknown game 'tic_tac_tow'"),
    (["train", "--game", "tic_tac_toe", "--set", "num_simulation=8"], "unknown config key 'num_simulation'"),
    (["train", "--game", "tic_tac_toe", "--set", "num_simulations=0"], "num_simulations must be a positive"),
    (["train", "--game", "tic_tac_toe", "--set", "search=alphabeta"], "search must be one of puct, gumbel"),
    (["train", "--game", "tic_tac_toe", "--set", "selfplay_batch_size=9"], "not divisible by the 2 devices"),
    (["train", "--game", "tic_tac_toe", "--preset", "huge"], "unknown preset 'huge'"),
]


# Two of them through a real `az-jax` process (each start costs seconds: Python, JAX, the device set-up that
# --devices 2 makes); every one of them in this process below.
@pytest.mark.parametrize("args, needle", [BAD_CONFIGS[0], BAD_CONFIGS[4]])
def test_bad_config_is_a_one_line_error(tmp_path, args, needle):
    result = az(*args, "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert needle in error_line(result)
    assert not (tmp_path / "run").exists()  # nothing written


@pytest.mark.parametrize("args, needle", BAD_CONFIGS)
def test_bad_config_is_a_one_line_error_in_process(tmp_path, no_work, args, needle):
    code, err = in_process(["--devices", "2", *args, "--run-dir", str(tmp_path / "run")])
    assert (code, len(err)) == (2, 1), err
    assert err[0].startswith("az-jax: error: ") and needle in err[0], err[0]
    assert not (tmp_path / "run").exists()  # nothing written


def _snapshot(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[path] = f.read()
    return out


def test_mismatched_and_corrupt_checkpoints(tmp_path, tiny_trained_run):
    run = tmp_path / "run"
    shutil.copytree(tiny_trained_run, run)  # trained by `az-jax train` (the fixture checks it finished)
    assert sorted(os.listdir(run / "checkpoints")) == ["1", "2"]
    before = _snapshot(run)

    # Another game's command pointed at this run: refused before anything is written.
    other = az_here("train", "--game", "connect_four", "--run-dir", str(run), *TINY)
    assert other.returncode == 2
    assert "belongs to a different run" in error_line(other) and "connect_four" in error_line(other)
    assert _snapshot(run) == before

    # Corrupt the latest checkpoint's files: it is moved aside as it is (never deleted) with a warning naming it, and
    # the run resumes from checkpoint 1 and writes checkpoint 2 again (az_jax/runtime/loop.py,
    # az_jax/runtime/checkpoint.py).
    newest = str(run / "checkpoints" / "2")
    for dirpath, _, files in os.walk(newest):
        for name in files:
            with open(os.path.join(dirpath, name), "wb") as f:
                f.write(b"not a checkpoint")
    damaged = {
        path.replace(newest, str(run / "checkpoints_damaged" / "2")): data for path, data in _snapshot(newest).items()
    }
    resumed = az_here("train", "--game", "tic_tac_toe", "--run-dir", str(run), "--no-progress", *TINY)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "checkpoint 2" in resumed.stderr and "checkpoints_damaged" in resumed.stderr
    assert _snapshot(run / "checkpoints_damaged") == damaged
    assert sorted(os.listdir(run / "checkpoints")) == ["1", "2"]

    # A run dir whose config.json is not a config.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"game": "tic_tac_toe", "colour": "blue"}))
    result = az_here("train", "--game", "tic_tac_toe", "--run-dir", str(bad), *TINY)
    assert result.returncode == 2 and "unknown config key 'colour'" in error_line(result)
    assert json.loads((bad / "config.json").read_text()) == {"game": "tic_tac_toe", "colour": "blue"}


def test_play_without_a_run_is_an_error(tmp_path):
    result = az("play", "--run-dir", str(tmp_path / "nothing"))
    assert result.returncode == 2
    assert "no run or checkpoint" in error_line(result)


# --- the same error path in this process (fast): every user-caused failure is one line and exit status 2 ----------
def in_process(argv: list[str]) -> tuple[int, list[str]]:
    """`az-jax ARGV` run by `cli.main` in this process: (exit status, lines written to stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(argv)
    return code, err.getvalue().splitlines()


def _accepted(*args, **kwargs):
    raise AssertionError("an invalid input was accepted: the command reached real work")


@pytest.fixture
def no_work(monkeypatch):
    """For in-process CLI calls that must fail: JAX already runs here, so the device set-up is skipped, and whatever
    would train, benchmark, play a match, compile a game or launch a sweep raises AssertionError instead."""
    monkeypatch.setattr(cli, "setup_process", lambda args: None)
    for module, name in [
        (in_training, "train"),
        (bench, "run_benchmark"),
        (terminal, "play_session"),
        (match, "play"),
        (ladder, "play_pairings"),
        (command, "run_sweep"),
        (records, "env_functions"),
    ]:
        monkeypatch.setattr(module, name, _accepted)
    monkeypatch.setattr(command, "detect_platform", lambda: "cpu")


def fake_run_dir(path) -> str:
    """A run dir as `train` leaves it (config.json of tic_tac_toe's small preset, metrics), without checkpoints."""
    os.makedirs(path / "eval")
    (path / "config.json").write_text(presets_lib.preset("tic_tac_toe").to_json())
    (path / "metrics.jsonl").write_text('{"iteration": 1, "train/loss": 2.5}\n')
    (path / "eval" / "results.jsonl").write_text('{"player_a": "a", "player_b": "b", "score": 0.5}\n')
    return str(path)


def _files(tmp_path) -> dict[str, str]:
    """Named inputs for the cases below: files that are not what they claim to be."""
    (tmp_path / "file").write_text("a file, not a directory")
    (tmp_path / "latin1").mkdir()
    (tmp_path / "latin1" / "config.json").write_bytes(b'{"game": "caf\xe9"}')
    (tmp_path / "dirconfig" / "config.json").mkdir(parents=True)
    (tmp_path / "zz.sgf").write_text("(;FF[4]SZ[9]\n;B[ee]\n;W[zz])")
    (tmp_path / "junk.pgn").write_text('[Event "x"]\n\n1. e4 e5\n2. Nf3 hello Nc6\n')
    (tmp_path / "types.json").write_text('{"game": "tic_tac_toe", "actions": ["4"]}')
    (tmp_path / "spec.json").write_text('{"game": "tic_tac_toe", "num_samples": "3"}')
    names = ("file", "latin1", "dirconfig", "zz.sgf", "junk.pgn", "types.json")
    return {name.split(".")[0]: str(tmp_path / name) for name in names}


TTT = ["train", "--game", "tic_tac_toe", "--run-dir"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (TTT + ["{file}"], "cannot use '{file}': Not a directory"),
        (TTT + ["{file}/run"], "cannot use '{file}/run': Not a directory"),
        (TTT + ["/proc/az_jax_run"], "cannot use '/proc/az_jax_run': "),
        (TTT + ["{tmp}/" + "r" * 300], "File name too long"),
        (TTT + ["{latin1}"], "config.json is not UTF-8 text (byte 13)"),
        (TTT + ["{dirconfig}"], "dirconfig/config.json': Is a directory"),
        (TTT + ["{good}", "--set", "num_blocks=3"], "belongs to a different run"),
        (TTT + ["{good}", "--set", "game=chess"], "--game tic_tac_toe and --set game=chess disagree"),
        (["render", "--record", "{zz}", "--out", "{tmp}/x.svg"], "SGF line 3, move 2: W[zz] is not a point"),
        (["render", "--record", "{junk}", "--out", "{tmp}/x.svg"], "PGN line 4: 'hello' is not a move"),
        (
            ["render", "--record", "{types}", "--out", "{tmp}/x.svg"],
            'actions must be a list of integers, got ["4"]',
        ),
        (["ladder", "{good}", "--games", "0"], "argument --games: must be an integer from 1 to 1000000000, got '0'"),
        (["sweep", "{tmp}/spec.json"], "'num_samples' must be an integer, got \"3\""),
        (["bench", "--game", "tic_tac_toe", "--repeats", "0"], "argument --repeats: must be an integer from 1"),
        (["play", "--run-dir", "{good}", "--simulations", "-1"], "argument --simulations: must be an integer from 1"),
        (["play", "--run-dir", "{good}", "--seed", "1e30"], "argument --seed: expected an integer, got '1e30'"),
        (["--devices", "0", "train"], "argument --devices: must be an integer from 1 to 65536, got '0'"),
        (["--devices", "-1", "train"], "argument --devices: must be an integer from 1"),
        (
            ["eval", "--player", "random", "--game", "tic_tac_toe", "--opponent", "mcts:sims=99999999999999999999"],
            "sims must be <= 1000000",
        ),
        (
            ["eval", "--player", "random", "--game", "tic_tac_toe", "--opponent", "mcts:sims=1,sims=2"],
            "'mcts:sims=1,sims=2': option sims is given twice",
        ),
        (["eval", "--player", "mcts:c=nan", "--game", "tic_tac_toe", "--opponent", "random"], "c must be a finite"),
    ],
)
def test_user_errors_are_one_line(tmp_path, no_work, argv, needle):
    names = {**_files(tmp_path), "tmp": str(tmp_path), "good": fake_run_dir(tmp_path / "good")}
    code, err = in_process([a.format(**names) for a in argv])
    assert (code, len(err)) == (2, 1), err
    assert err[0].startswith("az-jax: error: ") and needle.format(**names) in err[0], err[0]
