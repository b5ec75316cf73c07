"""README's table of the papers' presets on the slices people rent, from `experiments/papers_fit.sh`'s JSON files
(experiments/results/preflight/) and, with --fit, the design changes' runs (experiments/results/preflight_fit/).

    python experiments/papers_fit_table.py [--dir experiments/results/preflight] > table.md
"""

import argparse
import glob
import json
import os

GIB = 2**30


def rows(directory: str) -> list[dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            data = json.load(f)
        for result in data if isinstance(data, list) else [data]:
            result["file"] = os.path.basename(path)
            out.append(result)
    return out


def line(r: dict) -> str:
    it = next(p for p in r["programs"] if p["name"] == "iteration")
    refused = " (compiler: out of memory)" if it.get("error") else ""
    sets = " ".join(r.get("overrides", [])) or "—"
    return (
        f"| {r['game']} `{r['preset']}` | {sets} | {r['target']} | {r['state_bytes']['total'] / GIB:.1f} | "
        f"{it['temp_bytes'] / GIB:.1f}{refused} | {r['required_bytes'] / GIB:.1f} / {r['budget_bytes'] / GIB:.1f} | "
        f"{'yes' if r['fits'] else '**no**'} | {it['compile_seconds']:.0f} s | {r['flops']['iteration'] / 1e15:.0f} |"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", action="append", help="folders of preflight JSON files")
    args = parser.parse_args(argv)
    print(
        "| preset | changes | target | state GiB/device | iteration temporaries GiB | needs / has GiB | fits | "
        "compile (2-core CPU) | PFLOP/iteration |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    results = [r for d in args.dir or ["experiments/results/preflight"] for r in rows(d)]
    results = [r for r in results if any(p["name"] == "iteration" for p in r["programs"])]  # not the halves' runs
    order = lambda r: (r["game"], r["preset"], r["target"], len(r.get("overrides", [])), r.get("overrides", []))
    for r in sorted(results, key=order):
        print(line(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
