"""A new run's solver shares against a reference run's shares kept in a committed paired_solver JSON (its run A), when
the reference run's checkpoints are gone: the same positions, steps and simulations, B − A a checkpoint and over them.

    python -m experiments.strength.stored_diff A_PAIRED.json B_SOLVER.jsonl [--common-steps] [--json OUT.json]

A_PAIRED.json: paired_solver's output whose `run_a` is the reference; B_SOLVER.jsonl: solver_benchmark's lines of the
new run (`--steps`, the same `--positions`; a line that names its positions file, simulations or count of positions
must match A's). A step of B that A lacks is an error, or with --common-steps is left out and named in the
output's `left_out`. The difference of means is paired_solver's; its per-position counts (A
alone right, B alone right) need both runs' checkpoints and are not computed."""

import argparse
import json
import os
import statistics
import sys

KINDS = ("raw", "search64")


def _check_same_scoring(a_paired: dict, row: dict) -> None:
    """ValueError if B's line was scored on other positions or with other simulations than A (lines written before
    solver_benchmark recorded its positions file and simulations are checked by their count of positions alone)."""
    wanted = {
        "positions file": (row.get("positions_file"), a_paired.get("positions")),
        "simulations": (row.get("simulations"), a_paired.get("simulations")),
        "positions": (row.get("raw", {}).get("positions"), a_paired.get("num_positions")),
    }
    for what, (b, a) in wanted.items():
        same = os.path.normpath(b) == os.path.normpath(a) if what == "positions file" and a and b else b == a
        if a is not None and b is not None and not same:
            raise ValueError(f"step {row['step']} was scored with {what} {b!r}, the reference with {a!r}")


def diff(a_paired: dict, b_rows: list[dict], common_steps: bool = False) -> dict:
    """{"checkpoints": [{step, raw: {a, b, diff}, search64: {...}}], "over_checkpoints": {kind: {mean_diff, sd_diff,
    ahead, behind, checkpoints}}, "left_out": [B's steps A lacks]} over the steps both hold, in B's order. A step of B
    that A lacks raises ValueError unless common_steps; no step in common at all always raises."""
    a = {c["step"]: c for c in a_paired["checkpoints"]}
    rows, left_out = [], []
    for r in b_rows:
        if r["step"] not in a:
            if common_steps:
                left_out.append(r["step"])
                continue
            raise ValueError(f"step {r['step']} is not in the reference's checkpoints {sorted(a)}")
        _check_same_scoring(a_paired, r)
        ref = a[r["step"]]
        rows.append(
            {"step": r["step"]}
            | {k: {"a": ref[k]["a"], "b": r[k]["optimal"], "diff": r[k]["optimal"] - ref[k]["a"]} for k in KINDS}
        )
    if not rows:
        raise ValueError(f"no step in common with the reference's checkpoints {sorted(a)}")
    over = {}
    for k in KINDS:
        d = [row[k]["diff"] for row in rows]
        over[k] = {
            "mean_diff": statistics.mean(d),
            "sd_diff": statistics.stdev(d) if len(d) > 1 else 0.0,
            "ahead": sum(x > 0 for x in d),
            "behind": sum(x < 0 for x in d),
            "checkpoints": len(d),
        }
    return {
        "run_a": a_paired["run_a"],
        "positions": a_paired["positions"],
        "checkpoints": rows,
        "over_checkpoints": over,
        "left_out": left_out,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a_paired")
    parser.add_argument("b_solver")
    parser.add_argument(
        "--common-steps", action="store_true", help="leave out (and name) B's steps the reference lacks, not an error"
    )
    parser.add_argument("--json", default=None, help="write the result to this JSON file")
    args = parser.parse_args(argv)
    try:
        with open(args.a_paired) as f:
            a_paired = json.load(f)
        with open(args.b_solver) as f:
            b_rows = [json.loads(line) for line in f if line.strip()]
        out = diff(a_paired, b_rows, args.common_steps)
    except (OSError, ValueError, KeyError) as e:
        print(f"stored_diff: error: {e}", file=sys.stderr)
        return 2
    out["run_b"] = b_rows[0]["run_dir"] if b_rows else None
    for row in out["checkpoints"]:
        print(row["step"], " ".join(f"{k} {row[k]['a']:.4f}/{row[k]['b']:.4f} ({row[k]['diff']:+.4f})" for k in KINDS))
    if out["left_out"]:
        print(f"left out (not in the reference): steps {', '.join(map(str, out['left_out']))}")
    for k, o in out["over_checkpoints"].items():
        counts = f"ahead {o['ahead']}, behind {o['behind']} of {o['checkpoints']}"
        print(f"{k}: B − A {o['mean_diff']:+.4f} a checkpoint (sd {o['sd_diff']:.4f}), {counts}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
