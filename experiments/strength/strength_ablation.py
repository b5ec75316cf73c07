"""Connect-four strength at equal wall-clock: each variant trains for the same minutes, then its last checkpoint is
scored on the solver benchmark (experiments/strength/solver_benchmark.py: share of optimal moves of the raw policy and
of the 64-simulation search on 1,000 labelled positions), and the curve of its raw policy over its checkpoints is drawn.

    python -m experiments.strength.strength_ablation --out experiments/strength/results/strength --minutes 10 \
        --seeds 0 [--variants a,b,...]

Protocol: `az-jax train --game connect_four --preset small --set num_iterations=100000 --set eval_every=0
--set checkpoint_every=2 --set seed=S <variant's keys>` under `timeout -s TERM` (az-jax exits cleanly on SIGTERM; the
last checkpoint is at most 2 iterations old). By default one run at a time on every core; `--parallel 2
--devices 1` trains two side by side, one XLA device (about one core) each: the same wall-clock, half the compute per
run. Results are appended to OUT/results.jsonl (one line per variant and seed) and summarised in OUT/results.md,
OUT/raw_vs_minutes.png and OUT/raw_vs_iterations.png.
A run already in results.jsonl is not run again (delete its line to redo it).
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from az_jax.runtime.files import append_jsonl, read_jsonl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository
AZ_JAX = os.path.join(os.path.dirname(sys.executable), "az-jax")

# The connect_four small preset before issue 16 changed it (PUCT at 32 simulations, no symmetries): every variant
# below is these settings with the variant's own on top, so the results stay comparable whatever the preset is today.
FORMER_PRESET = {"search": "puct", "num_simulations": "32", "augment_symmetries": "false"}


def _on_former(**changes: str) -> list[str]:
    """`--set` assignments: FORMER_PRESET updated with `changes`."""
    return [f"{k}={v}" for k, v in {**FORMER_PRESET, **changes}.items()]


# name -> `--set` assignments on top of the connect_four small preset
# long runs: a checkpoint every 10 iterations, the solver set (and 20 games against random) every 50
LONG = ["checkpoint_every=10", "eval_every=50", "eval_opponents=random", "eval_games=20"]
VARIANTS: dict[str, list[str]] = {
    "preset": _on_former(),
    "train_ratio_8": _on_former(train_ratio="8"),
    "gumbel": _on_former(train_ratio="8", search="gumbel"),
    "value_mix": _on_former(train_ratio="8", value_target_mix="0.5"),
    "forced_playouts": _on_former(train_ratio="8", forced_playouts_k="2"),
    "playout_cap": _on_former(
        train_ratio="8", num_simulations="64", full_search_fraction="0.25", fast_simulations="16"
    ),
    "global_pooling": _on_former(train_ratio="8", global_pooling_every="2"),
    "channels_64": _on_former(train_ratio="8", num_channels="64"),
    # on the former preset itself (train_ratio 2): the mirror image of each sampled position (AlphaGo Zero's
    # augmentation; connect four has one symmetry besides the identity), the search value mixed into the value target,
    # and both
    "symmetries": _on_former(augment_symmetries="true"),
    "mix": _on_former(value_target_mix="0.5"),
    "symmetries_mix": _on_former(augment_symmetries="true", value_target_mix="0.5"),
    # Gumbel MuZero's search and policy target at 16 simulations (Danihelka et al. 2022: its policy target improves
    # the prior at any simulation count), so twice the games of the 32-simulation preset in the same time; with the
    # symmetries it is today's preset
    "gumbel16": _on_former(search="gumbel", num_simulations="16"),
    "gumbel16_symmetries": _on_former(search="gumbel", num_simulations="16", augment_symmetries="true"),
    # On today's preset (Gumbel-16 with mirror images, 3 × 32), for 30-minute runs: the learning rate drops ×0.1 at
    # about 70% of the iterations each variant finishes in 30 minutes on one core (measured: 4.0 s an iteration at
    # 32 channels, 14.6 s at 64), so each ends on its low rate.
    "today": ["lr_boundaries=5000"],
    "today_64ch": ["num_channels=64", "lr_boundaries=1350"],
    # twice the gradient steps per generated position (32 steps of 256 per iteration; ~5.5 s an iteration expected)
    "today_tr4": ["train_ratio=4", "lr_boundaries=7300"],
    # Gumbel at 32 simulations: better targets, half the games (~8 s an iteration expected)
    "today_sims32": ["num_simulations=32", "lr_boundaries=2500"],
    # KataGo's switches on today's preset as it is (train_ratio 4; its rate drop at step 12,000 is beyond a 10-minute
    # run on one core), each alone. Forced playouts are PUCT's (config error with Gumbel, whose sequential halving
    # already spreads the root's visits over its considered actions), so they are not among them.
    "t4": [],
    "t4_mix": ["value_target_mix=0.5"],
    "t4_pool": ["global_pooling_every=2"],
    # playout cap randomization at the preset's cost per move: p = 0.25 full searches of N = 40, else n = 8
    # (0.25 × 40 + 0.75 × 8 = 16 simulations a move on average; KataGo: p = 0.25, N = 600, n = 100)
    "t4_cap": ["num_simulations=40", "full_search_fraction=0.25", "fast_simulations=8"],
    # exploration in self-play (issue 29): connect four samples the search's action (Gumbel's, with its noise) for the
    # first 8 plies and plays greedily after; a long run's self-play then collapses for tens of iterations at a time
    # into one repeated drawn line (decisive games 0.15 of those finished at iterations 600–650 of a 950-iteration run,
    # policy loss 0.42). Sampled on every ply instead (a game has at most 42):
    "t4_sample_all": ["temperature_moves=42"],
    # the first 4 plies of every self-play game uniformly random (still searched and trained on): on one H100 at 10×
    # the data and a 5 × 128 network the preset's self-play settled into all-drawn games and its solver shares fell back
    # from 0.92 with search; with random openings they rose to 0.968 (experiments/accelerators/results/gpu/, §6)
    "t4_rop4": ["random_opening_plies=4"],
    # network size at a longer budget (issue 29), both with random openings, 75 minutes on one core each, side by side:
    # the rate's step at 70–80% of the steps each finishes (3 × 32: ~1,200 iterations of 32 steps; 4 × 64: ~235, 19 s
    # each), the solver set scored during training every 50 iterations
    "rop4_3x32_75min": ["random_opening_plies=4", "lr_boundaries=27000", *LONG],
    "rop4_4x64_75min": ["random_opening_plies=4", "num_blocks=4", "num_channels=64", "lr_boundaries=6000", *LONG],
    # the compute-scaling study's budgets (issue 29) on today's preset (random openings in it), one run at a time on
    # both cores (--minutes M, --parallel 1): the rate's step at 75% of the steps a quiet 2-core VM finishes in M
    # minutes (~2.2 s an iteration with these evaluations, the 3 × 32 `hours` preset's first 100 iterations: 10 min
    # ≈ 270 iterations, 30 ≈ 820, 90 ≈ 2,450; 32 steps each). budget90's schedule was `--preset hours` from §12 to
    # §36 (the 3 × 32 network; `hours` is now 4 × 48 with forking, §37); the `hours` schedule before it (5,000
    # iterations, the step at 3,750) was the ~180-minute point.
    "budget10": ["lr_boundaries=6500", *LONG],
    "budget30": ["lr_boundaries=19700", *LONG],
    "budget90": ["lr_boundaries=58800", *LONG],
    # Reanalyse (issue 29): 40 minutes on one core each, side by side (--parallel 2 --devices 1), today's preset
    # against it with 8 × 128 stored positions searched again each iteration (half as many as self-play plays: 4.86 s
    # an iteration against 3.81 alone on one device, measured). The rate steps were placed from a speed measured with
    # tests running beside (~7 s an iteration side by side); quiet, they run ~4.2 and ~5.2 s, so each steps at about
    # 43% of the steps it finishes: both alike, not the budget runs' 75%
    "ra0_40min_1core": ["lr_boundaries=7900", *LONG],
    "ra8_40min_1core": ["reanalyse_batches=8", "lr_boundaries=6200", *LONG],
}


def start_training(
    run_dir: str, assignments: list[str], seconds: float, seed: int, devices: int, game: str = "connect_four"
):
    """The training subprocess of one variant and seed (the game's small preset with `assignments`), stopped by
    SIGTERM after `seconds`."""
    sets = [
        a
        for kv in ["num_iterations=100000", "eval_every=0", "checkpoint_every=2", f"seed={seed}", *assignments]
        for a in ("--set", kv)
    ]
    command = [AZ_JAX, *(["--devices", str(devices)] if devices else []), "train", "--game", game]
    command += ["--preset", "small", "--run-dir", run_dir, "--no-progress"]
    with open(run_dir + ".log", "w") as log:
        return subprocess.Popen(
            ["timeout", "-s", "TERM", str(int(seconds)), *command, *sets], stdout=log, stderr=log, cwd=ROOT
        )


def pending_jobs(results: str, runs: str, names: list[str], seeds: str) -> tuple[list[dict], list[tuple[str, int]]]:
    """The rows already in `results` and the (variant, seed) runs still to do; ValueError (one line) when a run still
    to do already has its directory under `runs`."""
    rows = read_jsonl(results)
    done = {(r["variant"], r["seed"]) for r in rows}
    jobs = [(n, int(s)) for s in seeds.split(",") for n in names if (n, int(s)) not in done]
    for name, seed in jobs:
        run_dir = os.path.join(runs, f"{name}-s{seed}")
        if os.path.exists(run_dir):
            raise ValueError(f"{run_dir} exists; remove it to rerun {name} seed {seed}")
    return rows, jobs


def trained(run_dir: str, start: float) -> dict:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return {
        "start": start,
        "seconds": time.time() - start,
        "iterations": rows[-1]["iteration"],
        "times": {r["iteration"]: r["time"] for r in rows},
        "load": os.getloadavg(),
    }


def score(run_dir: str, steps: list[int], simulations: int) -> dict:
    """Solver benchmark of the last checkpoint (raw and search) and the raw share of each of `steps`."""
    # Imported here: JAX starts only after the training subprocesses are done with the cores.
    from az_jax.evaluation import connect_four_solver as solver_lib
    from az_jax.runtime.agent import load_agent
    from experiments.strength.solver_benchmark import DEFAULT_POSITIONS, benchmark_agent

    positions = solver_lib.load(DEFAULT_POSITIONS)
    last = load_agent(run_dir)
    result = {"step": last.step, **benchmark_agent(last, positions, simulations)}
    curve = {}
    for step in steps:
        if step == last.step:
            curve[step] = result["raw"]["optimal"]
            continue
        agent = load_agent(run_dir, step)
        curve[step] = _raw(agent, positions)
    result["raw_curve"] = curve
    return result


def _raw(agent, positions) -> float:
    import jax
    import jax.numpy as jnp

    from az_jax.evaluation import connect_four_solver as solver_lib

    raw = lambda states, key: jnp.argmax(agent.policy_value(states)[0], axis=-1)
    return solver_lib.evaluate(raw, positions, jax.random.key(0)).summary()["optimal"]


def write_summary(out: str, rows: list[dict]) -> None:
    by_variant: dict[str, list[dict]] = {}
    for row in rows:
        by_variant.setdefault(row["variant"], []).append(row)
    lines = [
        "| variant | settings | seeds | iterations | raw policy optimal | 64-sim search optimal | drawn (search) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, group in by_variant.items():
        raw = [r["score"]["raw"]["optimal"] for r in group]
        search = [r["score"]["search64"]["optimal"] for r in group]
        drawn = [r["score"]["search64"]["optimal_drawn"] for r in group]
        its = [r["train"]["iterations"] for r in group]
        fmt = lambda xs: (
            f"{np.mean(xs):.3f}" + (f" ± {np.std(xs, ddof=1) / np.sqrt(len(xs)):.3f}" if len(xs) > 1 else "")
        )
        lines.append(
            f"| {name} | {' '.join(group[0]['assignments']) or '(preset)'} | {len(group)} | "
            f"{', '.join(map(str, its))} | {fmt(raw)} | {fmt(search)} | {fmt(drawn)} |"
        )
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for axis in ("minutes", "iterations"):  # iterations: the same curves without the machine's load in them
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, (name, group) in enumerate(by_variant.items()):
            for j, row in enumerate(group):
                times = {int(k): v for k, v in row["train"]["times"].items()}
                t0 = row["train"]["start"]
                steps = [int(s) for s in row["score"]["raw_curve"]]
                xs = [(times[s] - t0) / 60 for s in steps] if axis == "minutes" else steps
                ys = list(row["score"]["raw_curve"].values())
                ax.plot(xs, ys, marker=".", color=f"C{i}", label=name if j == 0 else None)
        ax.set_xlabel("minutes of training" if axis == "minutes" else "iterations")
        ax.set_ylabel("raw policy: share of optimal moves")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"raw_vs_{axis}.png"), dpi=110)
        plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(HERE, "results", "strength"))
    parser.add_argument("--runs", default=os.path.join(ROOT, "runs", "strength"), help="where the run dirs go")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--curve-every", type=int, default=10, help="iterations between points of the raw curve")
    parser.add_argument(
        "--parallel", type=int, default=1, help="runs trained side by side (with --devices 1: one core each)"
    )
    parser.add_argument("--devices", type=int, default=0, help="XLA devices per run (0: az-jax's default, every core)")
    args = parser.parse_args(argv)
    if args.parallel < 1 or args.devices < 0:
        print("strength_ablation: --parallel must be >= 1 and --devices >= 0", file=sys.stderr)
        return 2
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        print(f"strength_ablation: unknown variants {unknown}; choose from {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.runs, exist_ok=True)
    results = os.path.join(args.out, "results.jsonl")
    try:
        rows, jobs = pending_jobs(results, args.runs, names, args.seeds)
    except ValueError as e:
        print(f"strength_ablation: {e}", file=sys.stderr)
        return 2
    for first in range(0, len(jobs), args.parallel):
        batch = jobs[first : first + args.parallel]
        start = time.time()
        procs = [
            start_training(os.path.join(args.runs, f"{n}-s{s}"), VARIANTS[n], args.minutes * 60, s, args.devices)
            for n, s in batch
        ]
        for proc in procs:
            proc.wait()
        for name, seed in batch:
            run_dir = os.path.join(args.runs, f"{name}-s{seed}")
            train = trained(run_dir, start)
            steps = sorted(int(s) for s in os.listdir(os.path.join(run_dir, "checkpoints")) if s.isdigit())
            steps = [s for s in steps if s % args.curve_every == 0 or s == steps[-1]]
            row = {
                "variant": name,
                "seed": seed,
                "assignments": VARIANTS[name],
                "minutes": args.minutes,
                "parallel": len(batch),
                "devices": args.devices,
                "train": train,
                "score": score(run_dir, steps, args.simulations),
            }
            rows.append(row)
            append_jsonl(results, row)
            s = row["score"]
            print(
                f"{name} seed {seed}: {train['iterations']} iterations in {train['seconds']:.0f} s; raw "
                f"{s['raw']['optimal']:.3f}, search{args.simulations} {s[f'search{args.simulations}']['optimal']:.3f}",
                flush=True,
            )
            write_summary(args.out, rows)
    if rows:  # also when every run was already done: the summary and plots are rewritten from results.jsonl
        write_summary(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
