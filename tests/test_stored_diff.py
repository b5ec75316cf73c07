"""experiments/strength/stored_diff.py: B − A from a stored reference, by hand."""

import json

import pytest

from experiments.strength import stored_diff


def _paired(steps_a):
    return {
        "run_a": "runs/a",
        "positions": "p.jsonl",
        "checkpoints": [{"step": s, "raw": {"a": r}, "search64": {"a": q}} for s, r, q in steps_a],
    }


def test_diff_by_hand(tmp_path):
    a = _paired([(10, 0.90, 0.95), (20, 0.91, 0.96), (30, 0.92, 0.97)])
    b = [
        {"run_dir": "runs/b", "step": 10, "raw": {"optimal": 0.91}, "search64": {"optimal": 0.95}},
        {"run_dir": "runs/b", "step": 30, "raw": {"optimal": 0.89}, "search64": {"optimal": 0.98}},
    ]
    out = stored_diff.diff(a, b)
    # raw: 0.91 − 0.90 = +0.01, 0.89 − 0.92 = −0.03 → mean −0.01, sd of (0.01, −0.03) = sqrt(2·0.02²) = 0.02828
    assert [r["step"] for r in out["checkpoints"]] == [10, 30]
    assert out["over_checkpoints"]["raw"]["mean_diff"] == pytest.approx(-0.01)
    assert out["over_checkpoints"]["raw"]["sd_diff"] == pytest.approx(0.0282843, abs=1e-6)
    assert (out["over_checkpoints"]["raw"]["ahead"], out["over_checkpoints"]["raw"]["behind"]) == (1, 1)
    # search: 0.00 and +0.01 → mean +0.005, ahead 1 (a tie is neither), behind 0
    assert out["over_checkpoints"]["search64"]["mean_diff"] == pytest.approx(0.005)
    assert (out["over_checkpoints"]["search64"]["ahead"], out["over_checkpoints"]["search64"]["behind"]) == (1, 0)
    # the CLI writes the same, and a step the reference lacks is a one-line error, exit 2
    pa, pb, pj = tmp_path / "a.json", tmp_path / "b.jsonl", tmp_path / "o.json"
    pa.write_text(json.dumps(a))
    pb.write_text("\n".join(json.dumps(r) for r in b))
    assert stored_diff.main([str(pa), str(pb), "--json", str(pj)]) == 0
    assert json.loads(pj.read_text())["run_b"] == "runs/b"
    pb.write_text(json.dumps(b[0] | {"step": 40}))
    assert stored_diff.main([str(pa), str(pb)]) == 2
    # with --common-steps step 40 is left out and named; with no step in common at all it is still an error
    pb.write_text("\n".join(json.dumps(r) for r in [*b, b[0] | {"step": 40}]))
    assert stored_diff.main([str(pa), str(pb), "--common-steps", "--json", str(pj)]) == 0
    written = json.loads(pj.read_text())
    assert written["left_out"] == [40] and [r["step"] for r in written["checkpoints"]] == [10, 30]
    assert written["over_checkpoints"]["raw"]["mean_diff"] == pytest.approx(-0.01)  # the same two steps as above
    with pytest.raises(ValueError, match="no step in common"):
        stored_diff.diff(a, [b[0] | {"step": 40}], common_steps=True)


def test_a_line_scored_otherwise_than_the_reference_is_refused(tmp_path, capsys):
    a = _paired([(10, 0.90, 0.95)]) | {"simulations": 64, "num_positions": 4000}
    line = {"run_dir": "runs/b", "step": 10, "raw": {"optimal": 0.91, "positions": 4000}, "search64": {"optimal": 0.95}}
    # the same file written another way, the same simulations and count: accepted (a line without the keys, too)
    same = line | {"positions_file": "./p.jsonl", "simulations": 64}
    assert stored_diff.diff(a, [same, line | {"step": 10}])["checkpoints"][0]["raw"]["diff"] == pytest.approx(0.01)
    for changed, named in [
        ({"positions_file": "q.jsonl"}, "positions file 'q.jsonl', the reference with 'p.jsonl'"),
        ({"simulations": 32}, "simulations 32, the reference with 64"),
        ({"raw": {"optimal": 0.91, "positions": 1000}}, "positions 1000, the reference with 4000"),
    ]:
        with pytest.raises(ValueError, match=f"step 10 was scored with {named}"):
            stored_diff.diff(a, [line | changed])
    pa, pb = tmp_path / "a.json", tmp_path / "b.jsonl"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(line | {"simulations": 32}))
    assert stored_diff.main([str(pa), str(pb)]) == 2
    assert (
        capsys.readouterr().err == "stored_diff: error: step 10 was scored with simulations 32, the reference with 64\n"
    )
