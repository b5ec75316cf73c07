"""experiments/strength/learning_curve.py: the rows of a small metrics.jsonl, by hand."""

import json

from experiments.strength import learning_curve


def _write(run_dir, records):
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _record(iteration, time, **extra):
    return {
        "iteration": iteration,
        "time": time,
        "perf/iteration_seconds": 4.0,
        "train/steps": 32,
        "train/value_loss": 0.5,
        "train/policy_loss": 1.9,
        **extra,
    }


def test_a_run_that_scores_only_the_solver_set_has_its_rows(tmp_path):
    solver = {"eval/solver_raw": 0.7, "eval/solver_search": 0.8, "eval/solver_search_drawn": 0.6}
    _write(tmp_path, [_record(1, 100.0), _record(2, 105.0, **solver, **{"eval/solver_seconds": 1.0})])
    names, rows = learning_curve.curve(str(tmp_path))
    assert names == []
    assert len(rows) == 1  # iteration 1 was not evaluated
    (row,) = rows
    # steps 32 + 32; minutes: the first record's own 4 s, then 105 − 100 = 5 s between the two → 9 s = 0.15 min
    assert (row["iteration"], row["steps"], row["solver"]) == (2, 64, (0.7, 0.8, 0.6))
    assert abs(row["minutes"] - 0.15) < 1e-9
    assert row["scores"] == {}


def test_baseline_scores_and_games(tmp_path):
    scores = {
        "eval/vs_random_score": 0.75,
        "eval/vs_random_wins": 7,
        "eval/vs_random_draws": 1,
        "eval/vs_random_losses": 2,
    }
    _write(tmp_path, [_record(1, 0.0, **scores)])
    names, rows = learning_curve.curve(str(tmp_path))
    # 7 + 1 + 2 = 10 games; no solver shares logged: (None, None, None)
    assert names == ["random"]
    assert rows[0]["games"] == {"random": 10} and rows[0]["scores"] == {"random": 0.75}
    assert rows[0]["solver"] == (None, None, None)
