"""Runs the CPU benchmark cases behind README's performance table, each on 1 and 2 devices, one process per run, and
writes the table.

    python -m experiments.performance.bench_suite                      # every case (~40 min on the 2-core VM)
    python -m experiments.performance.bench_suite --cases scaling_2x32 --devices 2
    python -m experiments.performance.bench_suite --table-only         # rebuild the table from the JSON already there

Each run is `experiments/performance/benchmark.py --game G --preset P --set ... --devices N --json
experiments/performance/results/bench_cpu_<case>_<N>dev.json`; the scaling case also runs on 1 device with one Eigen
thread (`..._1dev_one_thread.json`), for the per-core scaling. The table goes to
experiments/performance/results/bench_cpu_table.md. Run it on an otherwise idle machine: every figure depends on the
load (the JSON records the load average before and after).
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

# The reference settings are those of the pgx AlphaZero example's table in issue 4 (6 × 128 network, Gumbel search
# with 32 simulations, 32 games per batch, 16 plies per iteration, training batch 128).
REFERENCE = [
    "num_blocks=6",
    "num_channels=128",
    "search=gumbel",
    "num_simulations=32",
    "selfplay_batch_size=32",
    "selfplay_steps=16",
    "batch_size=128",
    "augment_symmetries=false",  # the example has none (the connect_four and go_9x9 small presets do)
    "train_ratio=2",  # the connect_four small preset's value when these figures were taken (today 4)
]
CASES = {
    "connect_four_reference": ("connect_four", "small", REFERENCE),
    "go_9x9_reference": ("go_9x9", "small", REFERENCE),
    "connect_four_small": ("connect_four", "small", []),
    "go_9x9_small": ("go_9x9", "small", []),
    # A network small enough that one XLA CPU device keeps to one core: the 2-device scaling check.
    "scaling_2x32": ("connect_four", "small", ["num_blocks=2", "num_channels=32"]),
}
# Cases also run on 1 device restricted to one Eigen thread (one core): the per-core scaling of 2 devices.
ONE_THREAD_CASES = ("scaling_2x32",)
ONE_THREAD = "1dev_one_thread"


def path_for(case: str, devices: int | str) -> str:
    name = devices if isinstance(devices, str) else f"{devices}dev"
    return os.path.join(RESULTS, f"bench_cpu_{case}_{name}.json")


def run(case: str, devices: int, repeats: int, one_thread: bool = False) -> None:
    game, preset, overrides = CASES[case]
    out = path_for(case, ONE_THREAD if one_thread else devices)
    command = [
        sys.executable,
        os.path.join(HERE, "benchmark.py"),
        "--game",
        game,
        "--preset",
        preset,
        "--devices",
        str(devices),
        "--repeats",
        str(repeats),
        "--json",
        out,
    ]
    for override in overrides:
        command += ["--set", override]
    env = dict(os.environ)
    if one_thread:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_cpu_multi_thread_eigen=false".strip()
    print("$", "XLA_FLAGS=--xla_cpu_multi_thread_eigen=false" if one_thread else "", " ".join(command[1:]), flush=True)
    subprocess.run(command, check=True, env=env)


def table(cases) -> str:
    lines = [
        "| case | game | devices | self-play positions/s | simulations/s | training samples/s | network share "
        "of a ply | self-play MFU | compile s | recompiles after call 1 | load before |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        for devices in (1, ONE_THREAD, 2):
            if not os.path.exists(path_for(case, devices)):
                continue
            with open(path_for(case, devices)) as f:
                r = json.load(f)
            sp, comp, fl = r["selfplay"], r["compile"], r["flops"]
            label = "1 (one thread)" if devices == ONE_THREAD else devices
            lines.append(
                f"| {case} | {r['game']} | {label} | {sp['positions_per_second']:.1f} | "
                f"{sp['simulations_per_second']:,.0f} | {r['training']['samples_per_second']:.0f} | "
                f"{100 * r['split']['share_of_ply']['network']:.0f}% | {100 * fl['selfplay_mfu']:.0f}% of "
                f"{fl['peak_flops_per_second'] / 1e9:.0f} GFLOP/s | "
                f"{comp['iteration_lower_plus_compile_seconds']:.1f} | {comp['backend_compiles_in_calls_2_and_3']} | "
                f"{r['environment']['loadavg_before'][0]:.2f} |"
            )
    ratios = []
    for case in cases:
        paths = [path_for(case, d) for d in (1, 2)]
        if all(os.path.exists(p) for p in paths):
            one, two = (json.load(open(p))["selfplay"]["positions_per_second"] for p in paths)
            ratios.append(f"{case}: 2 devices / 1 device = {two / one:.2f}x")
        if os.path.exists(path_for(case, ONE_THREAD)) and os.path.exists(paths[1]):
            one = json.load(open(path_for(case, ONE_THREAD)))["selfplay"]["positions_per_second"]
            two = json.load(open(paths[1]))["selfplay"]["positions_per_second"]
            ratios.append(f"{case}: 2 devices / 1 device on one thread (one core) = {two / one:.2f}x")
    return "\n".join(lines + [""] + ratios) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--devices", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    if not args.table_only:
        for case in args.cases:
            for devices in args.devices:
                run(case, devices, args.repeats)
                if devices == 1 and case in ONE_THREAD_CASES:
                    run(case, 1, args.repeats, one_thread=True)
    text = table(list(CASES))
    with open(os.path.join(RESULTS, "bench_cpu_table.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
