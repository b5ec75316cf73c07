"""Sweeps: a spec expands into the right trials, bad specs fail in one line before anything runs, and a real 2×2 sweep
of tiny tic_tac_toe runs two trial processes at once (one core each), tabulates them and skips them when re-run."""

import csv
import json
import os
import subprocess
import sys

import pytest

from az_jax.apps import sweep as sweep_lib
from az_jax.core.config import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "experiments", "sweeps", "sweep.py")
TINY = [
    "num_blocks=1",
    "num_channels=8",
    "value_hidden=8",
    "selfplay_batch_size=8",
    "selfplay_steps=9",
    "replay_capacity=256",
    "batch_size=16",
    "min_replay_size=16",
    "train_ratio=0.25",
    "num_iterations=1",
    "eval_every=0",
    "checkpoint_every=1",
    "learning_rates=0.1",
    "lr_boundaries=",
]


def sweep_cli(*args, timeout=600):
    return subprocess.run(
        [sys.executable, SCRIPT, "--platform", "cpu", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        # tiny trials: XLA's optimisation passes cost far more time than they save
        env={**os.environ, "XLA_FLAGS": "", "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"},
    )


def write_spec(tmp_path, spec, name="spec.json"):
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return str(path)


def test_grid_random_and_seeds_expand_into_checked_trials():
    spec = {
        "game": "tic_tac_toe",
        "set": TINY,
        "grid": {
            "num_simulations": [2, 4],
            "schedule": [
                {"label": "flat", "learning_rates": [0.1], "lr_boundaries": []},
                {"learning_rates": [0.1, 0.01], "lr_boundaries": [5]},
            ],
        },
        "random": {
            "c_init": {"uniform": [0.5, 2.5]},
            "weight_decay": {"log_uniform": [1e-5, 1e-3]},
            "selfplay_steps": {"int": [3, 5]},
            "search": {"choice": ["puct", "gumbel"]},
        },
        "num_samples": 3,
        "seeds": [0, 7],
    }
    sweep = sweep_lib.build_sweep(spec)
    # 2 simulations × 2 schedules × 3 samples × 2 seeds = 24 trials, grid-major, seeds innermost.
    assert len(sweep.trials) == 24
    assert sweep.axes == ("num_simulations", "schedule", "c_init", "weight_decay", "selfplay_steps", "search", "seed")
    t = sweep.trials[7]  # 7 = (grid point 1: sims 2, second schedule) × 6 + (sample 0) × 2 + (seed index 1)
    assert (t.params["num_simulations"], t.params["schedule"], t.params["seed"]) == (
        "2",
        "learning_rates=0.1,0.01;lr_boundaries=5",
        "7",
    )
    assert t.config.learning_rates == (0.1, 0.01) and t.config.lr_boundaries == (5,) and t.config.seed == 7
    assert t.name.startswith("007_num_simulations=2_schedule=learning_rates=0.1,0.01-lr_boundaries=5_")
    # Every trial's config is the one its command line rebuilds, and draws stay inside their ranges.
    for trial in sweep.trials:
        assert 0.5 <= trial.config.c_init <= 2.5 and 1e-5 <= trial.config.weight_decay <= 1e-3
        assert trial.config.selfplay_steps in (3, 4, 5) and trial.config.search in ("puct", "gumbel")
        assert trial.config.num_blocks == 1 and trial.config.game == "tic_tac_toe"
    # The same spec draws the same samples (a re-run finds the same trial dirs); another sample_seed does not.
    assert [t.name for t in sweep_lib.build_sweep(spec).trials] == [t.name for t in sweep.trials]
    other = sweep_lib.build_sweep({**spec, "sample_seed": 1})
    assert [t.params["c_init"] for t in other.trials] != [t.params["c_init"] for t in sweep.trials]
    # Without grid, random or seeds: one trial, the preset's seed.
    assert [t.params for t in sweep_lib.build_sweep({"game": "tic_tac_toe"}).trials] == [{"seed": "0"}]


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"game": "tic_tac_toe", "grid": {"num_simulation": [2, 4]}}, "grid axis 'num_simulation' is not a config key"),
        (
            {"game": "tic_tac_toe", "grid": {"s": [{"learning_rate": 0.1}]}},
            "trial 0 (s=learning_rate=0.1, seed=0): unknown config key 'learning_rate'",
        ),
        (
            {"game": "tic_tac_toe", "grid": {"num_simulations": [4, 0]}},
            "trial 1 (num_simulations=0, seed=0): num_simulations must be a positive integer",
        ),
        ({"game": "tic_tac_toe", "random": {"c_init": {"normal": [0, 1]}}}, "random: 'c_init' needs one of uniform"),
        ({"game": "tic_tac_toe", "grids": {}}, "unknown sweep spec key 'grids'"),
        ({"game": "tic_tac_tow"}, "unknown game 'tic_tac_tow'"),
        ({"game": "tic_tac_toe", "grid": {"seed": [1, 2]}}, 'sweep seeds with "seeds"'),
        ({"game": "tic_tac_toe", "set": ["batch_size=17"]}, "batch_size=17 is not divisible by the 2 devices"),
    ],
)
def test_bad_specs_are_config_errors(spec, message):
    with pytest.raises(ConfigError) as e:
        sweep_lib.build_sweep(spec, num_devices=2)
    assert message in str(e.value)


def test_devices_and_shards():
    assert sweep_lib.device_groups([0, 1, 2, 3, 4], 2) == [(0, 1), (2, 3)]
    assert sweep_lib.parse_ids("0,2-3", [0, 1, 2, 3]) == [0, 2, 3]
    # A range's ends must be available ids, checked before the range is built (this one would be 10^11 ids).
    with pytest.raises(sweep_lib.SweepError, match="0-99999999999 is not a range of available ids"):
        sweep_lib.parse_ids("0-99999999999", [0, 1])
    assert sweep_lib.parse_shard("1/3") == (1, 3)
    for bad in ["3/3", "1", "-1/2"]:
        with pytest.raises(sweep_lib.SweepError, match="--shard must be I/N"):
            sweep_lib.parse_shard(bad)
    with pytest.raises(sweep_lib.SweepError, match="--parallel 3 needs at least 3 devices/cores, have 2"):
        sweep_lib.device_groups([0, 1], 3)
    env = sweep_lib.trial_env("gpu", (2, 3), 1)
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_tiny_sweep_runs_in_parallel_tabulates_and_skips_finished_trials(tmp_path):
    # The grid's outer axis (training length) leaves the compiled iteration as it is, the inner one (the learning
    # rate, a constant in the program) does not: trials 0 and 1 compile the two programs side by side, and trials 2
    # and 3 load them from the compilation cache the trial processes share (conftest.py's, for the test session).
    spec = write_spec(
        tmp_path,
        {
            "name": "tiny",
            "game": "tic_tac_toe",
            "set": TINY,
            "grid": {"num_iterations": [1, 2], "learning_rates": [0.1, 0.05]},
        },
    )
    sweep_dir = tmp_path / "sweep"
    result = sweep_cli(spec, "--sweep-dir", str(sweep_dir), "--parallel", "2", "--devices", "0,1")
    assert result.returncode == 0, result.stderr[-3000:]

    with open(sweep_dir / "results.csv") as f:
        rows = list(csv.DictReader(f))
    # 2 × 2 grid, one seed: 4 rows in trial order, each trained its 1 or 2 iterations; its last iteration played
    # 8 games × 9 plies = 72 positions and took round(0.25 × 72 / 16) = 1 gradient step at its own learning rate.
    assert [(r["num_iterations"], r["learning_rates"]) for r in rows] == [
        ("1", "0.1"),
        ("1", "0.05"),
        ("2", "0.1"),
        ("2", "0.05"),
    ]
    for row in rows:
        assert row["status"] == "done" and row["iteration"] == row["num_iterations"]
        assert float(row["selfplay/positions"]) == 72 and float(row["train/steps"]) == 1
        assert float(row["train/learning_rate"]) == pytest.approx(float(row["learning_rates"]))
        assert float(row["train/value_loss"]) > 0
    # Two processes at a time, one core each: trials 0 and 1 started together on cores {0} and {1}.
    done = [
        json.loads((sweep_dir / name / "done.json").read_text())
        for name in sorted(os.listdir(sweep_dir))
        if name[:3].isdigit()
    ]
    assert sorted(d["devices"] for d in done[:2]) == [[0], [1]]
    assert done[0]["started"] < done[1]["ended"] and done[1]["started"] < done[0]["ended"]
    assert "--devices 1 train" in (sweep_dir / rows[0]["trial"] / "train.log").read_text()
    assert os.path.exists(sweep_dir / "plots" / "train_value_loss.png")
    assert "| 2 | 0.05 | 1 |" in (sweep_dir / "summary.md").read_text()

    # Re-run: nothing left to run. One trial lost its done.json but has its final checkpoint (2): skipped as well.
    os.remove(sweep_dir / rows[3]["trial"] / "done.json")
    again = sweep_cli(spec, "--sweep-dir", str(sweep_dir), "--parallel", "2", "--devices", "0,1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "4 finished already, 0 to run" in again.stderr
    logs = (sweep_dir / rows[0]["trial"] / "train.log").read_text()
    assert logs.count("$ ") == 1  # the trial's process was started once

    # The same sweep dir with a changed spec is refused before anything runs.
    changed = write_spec(
        tmp_path,
        {
            "name": "tiny",
            "game": "tic_tac_toe",
            "set": TINY + ["c_init=2"],
            "grid": {"num_iterations": [1, 2], "learning_rates": [0.1, 0.05]},
        },
        "b.json",
    )
    refused = sweep_cli(changed, "--sweep-dir", str(sweep_dir), "--dry-run")
    assert refused.returncode == 2 and "holds another sweep's trial" in refused.stderr


def test_bad_key_is_one_line_error_before_anything_runs(tmp_path):
    spec = write_spec(
        tmp_path,
        {
            "game": "tic_tac_toe",
            "set": TINY,
            "grid": {"num_simulations": [2, 4]},
            "random": {"learning_rat": {"uniform": [0.01, 0.1]}},
        },
    )
    result = sweep_cli(spec, "--sweep-dir", str(tmp_path / "sweep"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "az-jax: error: random: 'learning_rat' is not a config key; known keys: "
        + ", ".join(__import__("az_jax.core.config", fromlist=["FIELDS"]).FIELDS)
    ]
    assert not os.path.exists(tmp_path / "sweep")
    # --shard picks every N-th trial: the dry run of shard 1/2 lists trials 1 and 3 of a 4-trial grid.
    spec = write_spec(
        tmp_path, {"game": "tic_tac_toe", "set": TINY, "grid": {"num_simulations": [1, 2, 3, 4]}}, "ok.json"
    )
    listed = sweep_cli(spec, "--sweep-dir", str(tmp_path / "s2"), "--shard", "1/2", "--dry-run")
    assert listed.returncode == 0, listed.stderr
    assert [line.split("--run-dir ")[1].split()[0].rsplit("/", 1)[1][:3] for line in listed.stdout.splitlines()] == [
        "001",
        "003",
    ]
