"""The benchmark harness (az_jax/apps/bench.py through experiments/performance/benchmark.py) on a tiny config: it runs,
writes its JSON, prints the table last, and its figures agree with each other and with a hand count of the network's
FLOPs.

It runs in a subprocess so that XLA can be told to spend little time optimising the machine code (compile time is
most of this test; the figures checked here do not depend on it): optimisation level 0, no expensive LLVM passes, and
XLA:CPU's older per-instruction emitters instead of its MLIR fusion emitters, which cuts the backend's compile time
by a third or more (measured on a loaded 2-core machine: 81 s -> 50 s over the benchmark's 34 programs; Trainer.iterate
alone 12.9 -> 6-8 s of CPU). XLA's FLOP counts come from the HLO, before machine code, so they are unaffected.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIMS, GAMES, PLIES, BATCH = 4, 8, 3, 16
TINY = {
    "num_blocks": 1,
    "num_channels": 32,
    "value_hidden": 8,
    "num_simulations": SIMS,
    "selfplay_batch_size": GAMES,
    "selfplay_steps": PLIES,
    "replay_capacity": 256,
    "batch_size": BATCH,
    "min_replay_size": 16,
}

# Hand count of the network's multiply-adds per evaluation on connect_four (observation 6×7×2, 7 actions), for
# TINY's network: stem conv 3×3 2→32, one residual block (two 3×3 convs 32→32), policy head conv 1×1 32→2 then dense
# 84→7, value head conv 1×1 32→1 then dense 42→8 and 8→1. Every kernel tap counts, also on the 'SAME' padding:
# 42 cells · 9 taps = 378 (output cell, tap) pairs per 3×3 conv (az_jax/core/flops.py).
#   stem       378 · 2 · 32        =  24,192
#   block      2 · 378 · 32 · 32   = 774,144
#   policy     42 · 32 · 2 + 84 · 7 =   3,276
#   value      42 · 32 + 42 · 8 + 8 =   1,688
#   total                          = 803,300 multiply-adds = 1,606,600 FLOPs (2 per multiply-add).
HAND_FLOPS_PER_EVALUATION = 2 * (378 * 2 * 32 + 2 * 378 * 32 * 32 + 42 * 32 * 2 + 84 * 7 + 42 * 32 + 42 * 8 + 8)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    sets = [arg for key, value in TINY.items() for arg in ("--set", f"{key}={value}")]
    fast = ["--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true"]
    fast.append("--xla_cpu_use_fusion_emitters=false")
    env = {**os.environ, "XLA_FLAGS": " ".join(fast)}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # the compile figures are of real compiles, not of the session's cache
    result = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "experiments", "performance", "benchmark.py"),
            "--game",
            "connect_four",
            "--devices",
            "2",
            "--repeats",
            "1",
            *sets,
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out) as f:
        return json.load(f), result.stdout


def test_bench_figures_are_consistent(bench):
    r, stdout = bench
    approx = lambda x: pytest.approx(x, rel=1e-9)
    assert stdout.strip().splitlines()[-1].startswith("process max RSS")  # the table is printed last
    assert r["environment"]["num_devices"] == 2 and r["environment"]["backend"] == "cpu"

    sp = r["selfplay"]
    assert sp["positions_per_second"] == approx(GAMES * PLIES / sp["seconds_per_call"])
    assert sp["simulations_per_second"] == approx(sp["positions_per_second"] * SIMS)

    tr = r["training"]
    assert tr["learner_ready"]
    assert tr["samples_per_second"] == approx(tr["train_steps_per_call"] * BATCH / tr["seconds_per_call"])

    split = r["split"]
    assert split["local_batch"] == GAMES // 2
    assert split["ply_seconds"] == approx(sp["seconds_per_call"] / PLIES)
    assert sum(split["seconds_per_ply"].values()) == approx(split["ply_seconds"])
    assert split["seconds_per_ply"]["network"] == approx((SIMS + 1) * split["network_forward_seconds"])
    assert split["seconds_per_ply"]["env_step"] == approx(SIMS * split["env_step_seconds"])
    assert sum(split["share_of_ply"].values()) == approx(1.0)

    fl = r["flops"]
    assert fl["network_flops_per_evaluation"] == HAND_FLOPS_PER_EVALUATION == 1_606_600
    assert fl["selfplay_mfu"] == approx(
        sp["positions_per_second"] * (SIMS + 1) * fl["network_flops_per_evaluation"] / fl["peak_flops_per_second"]
    )
    assert 0 < fl["selfplay_mfu"] < 1 and fl["peak_flops_per_second"] > 0

    comp = r["compile"]
    assert comp["iteration_lower_plus_compile_seconds"] > 0 and comp["iteration_compile_seconds"] > 0
    assert comp["no_recompile_after_first_iteration"] and comp["jit_cache_size_after_3_calls"] == 1
    assert comp["backend_compiles_in_calls_2_and_3"] == 0
    assert r["memory"]["bytes"] > 0
