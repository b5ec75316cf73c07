"""README's table of the papers' presets on the slices people rent, from `experiments/accelerators/papers_fit.sh`'s JSON
files (experiments/accelerators/results/preflight/) and, with --fit, the design changes' runs
(experiments/accelerators/results/preflight_fit/).

    python -m experiments.accelerators.papers_fit_table [--dir experiments/accelerators/results/preflight] > table.md
    python -m experiments.accelerators.papers_fit_table --alphago experiments/accelerators/results/preflight_alphago
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


def alphago_table(directory: str) -> None:
    """The AlphaGo pipeline's stages (`az-jax preflight --alphago`): each stage's peak per device on each target. A
    file with some of the stages only (`--programs`) replaces those stages of the same target's whole run."""
    everything = rows(directory)
    if not everything:
        return
    stages = [p["name"] for p in max((r["programs"] for r in everything), key=len)]
    results = sorted((r for r in everything if len(r["programs"]) == len(stages)), key=lambda r: r["target"])
    for later in (r for r in everything if len(r["programs"]) < len(stages)):  # stages compiled again on their own
        base = next((r for r in results if r["target"] == later["target"]), None)
        if base is None:  # no whole run of that target to complete
            continue
        redone = {p["name"]: p for p in later["programs"]}
        base["programs"] = [redone.get(p["name"], p) for p in base["programs"]]
        base["required_bytes"] = max(base["required_bytes"], later["required_bytes"])
        base["fits"] = base["fits"] and later["fits"]
    print("| target | " + " | ".join(stages) + " | needs / has GiB | fits | compile (2-core CPU) |")
    print("|---|" + "---|" * (len(stages) + 3))
    for r in results:
        peaks = {p["name"]: p["peak_bytes"] / GIB for p in r["programs"]}
        seconds = sum(p["compile_seconds"] for p in r["programs"])
        cells = " | ".join(f"{peaks[s]:.2f}" for s in stages)
        print(
            f"| {r['target']} | {cells} | {r['required_bytes'] / GIB:.1f} / {r['budget_bytes'] / GIB:.1f} | "
            f"{'yes' if r['fits'] else '**no**'} | {seconds:.0f} s |"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", action="append", help="folders of preflight JSON files")
    parser.add_argument("--alphago", default=None, help="a folder of `az-jax preflight --alphago` JSON files instead")
    args = parser.parse_args(argv)
    if args.alphago:
        alphago_table(args.alphago)
        return 0
    print(
        "| preset | changes | target | state GiB/device | iteration temporaries GiB | needs / has GiB | fits | "
        "compile (2-core CPU) | PFLOP/iteration |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    results = [r for d in args.dir or ["experiments/accelerators/results/preflight"] for r in rows(d)]
    results = [r for r in results if any(p["name"] == "iteration" for p in r["programs"])]  # not the halves' runs
    order = lambda r: (r["game"], r["preset"], r["target"], len(r.get("overrides", [])), r.get("overrides", []))
    for r in sorted(results, key=order):
        print(line(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
