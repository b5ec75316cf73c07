"""The paired comparison of two runs on the same solved positions (experiments/strength/paired_solver.py), on
hand-made optimal/not rows whose counts and test values are worked out in the comments."""

import numpy as np
import pytest

from experiments.strength.paired_solver import paired, pooled


def test_paired_counts_only_the_positions_where_one_run_is_right():
    a = np.array([1, 1, 1, 0, 0, 0, 1, 1, 0, 0], bool)
    b = np.array([1, 0, 0, 1, 1, 1, 1, 1, 1, 0], bool)
    r = paired(a, b)
    # A alone right at positions 1, 2; B alone at 3, 4, 5, 8; both at 0, 6, 7; neither at 9
    assert (r["a_only"], r["b_only"]) == (2, 4)
    assert r["a"] == pytest.approx(0.5) and r["b"] == pytest.approx(0.7)
    assert r["diff"] == pytest.approx(0.2)  # (4 − 2) / 10, = 0.7 − 0.5
    # sqrt(2 + 4 − (4 − 2)² / 10) / 10 = sqrt(5.6) / 10
    assert r["se"] == pytest.approx(np.sqrt(5.6) / 10)
    # 4 of 6 discordant for B under p = ½: P(X ≥ 4) = (15 + 6 + 1) / 64, doubled = 44 / 64
    assert r["p"] == pytest.approx(44 / 64)


def test_identical_runs_differ_by_nothing():
    a = np.array([1, 0, 1, 1], bool)
    r = paired(a, a.copy())
    assert (r["a_only"], r["b_only"], r["diff"], r["se"], r["p"]) == (0, 0, 0.0, 0.0, 1.0)


def test_pooled_sums_the_discordant_counts_and_spreads_the_differences():
    rows = [
        {"a_only": 2, "b_only": 4, "diff": 0.2},
        {"a_only": 0, "b_only": 4, "diff": 0.4},
    ]
    s = pooled(rows)
    assert (s["a_only"], s["b_only"], s["checkpoints"]) == (2, 8, 2)
    # 8 of 10 for B: P(X ≥ 8) = (45 + 10 + 1) / 1024, doubled = 112 / 1024
    assert s["p_summed"] == pytest.approx(112 / 1024)
    # mean (0.2 + 0.4) / 2 = 0.3; sample sd: sqrt(((−0.1)² + 0.1²) / 1) = sqrt(0.02)
    assert s["mean_diff"] == pytest.approx(0.3) and s["sd_diff"] == pytest.approx(np.sqrt(0.02))


def test_the_depth_buckets_run_from_each_count_to_the_next():
    from experiments.strength.solver_benchmark import DEPTHS, depth_buckets

    assert depth_buckets("0,8,16,24") == DEPTHS == ((0, 8), (8, 16), (16, 24), (24, 42))
    # one bucket a stone count for the first 4, then 4-7 and the rest of the board (a full board is 42 stones)
    assert depth_buckets("0,1,2,3,4,8") == ((0, 1), (1, 2), (2, 3), (3, 4), (4, 8), (8, 42))
    for bad in ("8,0", "0,0,8", "0,42", "-1,4"):
        with pytest.raises(ValueError, match="--depths must be increasing"):
            depth_buckets(bad)


def test_steps_b_must_name_one_checkpoint_for_each_of_a(tmp_path, capsys):
    from experiments.strength.paired_solver import main

    # 3 of A's checkpoints against 2 of B's: refused before any run or position file is read
    rc = main(["run_a", "run_b", "--steps", "10,20,30", "--steps-b", "13,26", "--json", str(tmp_path / "p.json")])
    assert rc == 2
    assert "--steps-b names 2 checkpoints, --steps 3" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()
