"""Paired `az-jax bench` runs of two commits, alternating, to tell a throughput change from run-to-run noise.

    python -m experiments.performance.paired_bench --base 40300ab --head HEAD --games connect_four,tic_tac_toe --reps 2
        [--head-set KEY=VALUE ...]

`--head-set` overrides the head's preset only: where a preset changed between the commits, it sets the head back to
the base's values (and new keys to the base's behaviour), so both sides time the same configuration.

Each commit is checked out in a git worktree under --work (default /tmp/az_jax_paired) and run with this checkout's
Python environment, its own tree first on PYTHONPATH. Rep r runs base then head when r is odd, head then base when
even, so a drift of the machine's load hits both sides alike. Prints self-play positions/s, training samples/s and
lower+compile seconds of each run, and the head/base ratio of the medians; the JSON of every run stays in --work.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIGURES = {
    "self-play pos/s": ("selfplay", "positions_per_second"),
    "training samples/s": ("training", "samples_per_second"),
    "compile s": ("compile", "iteration_lower_plus_compile_seconds"),
}


def worktree(rev: str, work: str) -> str:
    """A worktree of `rev` under `work` (made once); returns its path."""
    commit = subprocess.run(
        ["git", "-C", REPO, "rev-parse", rev], check=True, capture_output=True, text=True
    ).stdout.strip()
    path = os.path.join(work, commit[:12])
    if not os.path.isdir(path):
        subprocess.run(
            ["git", "-C", REPO, "worktree", "add", "--detach", path, commit], check=True, capture_output=True
        )
    return path


def bench(tree: str, game: str, preset: str, repeats: int, out: str, sets: list[str]) -> dict:
    """One `az-jax bench` in `tree` (the CLI module of either layout) with `--set` for each of `sets`; returns its
    JSON."""
    module = "az_jax.apps.cli" if os.path.isdir(os.path.join(tree, "az_jax", "apps", "cli")) else "az_jax.cli"
    env = {**os.environ, "PYTHONPATH": tree}
    subprocess.run(
        [
            sys.executable,
            "-m",
            module,
            "bench",
            "--game",
            game,
            "--preset",
            preset,
            "--repeats",
            str(repeats),
            "--json",
            out,
            *[arg for item in sets for arg in ("--set", item)],
        ],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
    )
    with open(out) as f:
        return json.load(f)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--head", default="HEAD", help="the commit under test (default HEAD)")
    parser.add_argument("--games", default="connect_four,tic_tac_toe", help="comma-separated games")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--reps", type=int, default=2, help="pairs per game")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per figure inside each bench")
    parser.add_argument("--work", default="/tmp/az_jax_paired", help="worktrees and JSON results")
    parser.add_argument(
        "--head-set", action="append", default=[], metavar="KEY=VALUE", help="a preset override for the head only"
    )
    args = parser.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    trees = {"base": worktree(args.base, args.work), "head": worktree(args.head, args.work)}
    for game in args.games.split(","):
        runs: dict[str, list[dict]] = {"base": [], "head": []}
        for rep in range(1, args.reps + 1):
            for side in ("base", "head") if rep % 2 else ("head", "base"):
                out = os.path.join(args.work, f"{side}_{game}_{rep}.json")
                sets = args.head_set if side == "head" else []
                result = bench(trees[side], game, args.preset, args.repeats, out, sets)
                runs[side].append(result)
                print(
                    f"{game} rep {rep} {side}: "
                    + ", ".join(f"{name} {result[a][b]:.1f}" for name, (a, b) in FIGURES.items()),
                    flush=True,
                )
        for name, (a, b) in FIGURES.items():
            median = {side: statistics.median(r[a][b] for r in runs[side]) for side in runs}
            print(
                f"{game} {name}: base {median['base']:.1f}, head {median['head']:.1f}, "
                f"head/base {median['head'] / median['base']:.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
