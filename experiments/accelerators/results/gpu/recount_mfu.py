"""Recounts the go_19x19 self-play MFU of the H100 runs (h100_run*/mfu_go_19x19.json) with FLOPs counted from the
network (az_jax/core/flops.py): the scripts of those runs took XLA's compiled cost analysis, which counts a GPU's cuDNN
convolutions as 0 FLOPs, and printed 0%. Same measured times, counted FLOPs; writes mfu_recount.json beside this file.

    python -m experiments.accelerators.results.gpu.recount_mfu
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

from az_jax.core import flops  # noqa: E402
from az_jax.core import overrides as overrides_lib  # noqa: E402
from az_jax.core import presets as presets_lib  # noqa: E402


def main() -> int:
    out = {}
    for run in ("h100_run1", "h100_run2"):
        with open(os.path.join(HERE, run, "mfu_go_19x19.json")) as f:
            measured = json.load(f)
        config = overrides_lib.override(presets_lib.preset(measured["game"], measured["preset"]), measured["overrides"])
        forward = flops.network_forward_flops(config, (19, 19, 17), 19 * 19 + 1)  # pgx go_19x19: 17 planes, 362 moves
        peak = measured["peak"]["flops_per_second"]
        evaluations = measured["positions_per_second"] * (config.num_simulations + 1)
        batch = config.selfplay_batch_size
        out[run] = {
            "network_flops_per_evaluation": forward,
            "peak_flops_per_second": peak,
            "positions_per_second": measured["positions_per_second"],
            "selfplay_flops_per_second": evaluations * forward,
            "selfplay_mfu": evaluations * forward / peak,
            "network_forward_seconds": measured["network_forward_seconds"],
            "network_isolated_mfu": batch * forward / measured["network_forward_seconds"] / peak,
            "share_of_ply": measured["share_of_ply"],
        }
        print(
            f"{run}: self-play MFU {100 * out[run]['selfplay_mfu']:.1f}%, network alone "
            f"{100 * out[run]['network_isolated_mfu']:.1f}% of {peak / 1e12:.0f} TFLOP/s"
        )
    with open(os.path.join(HERE, "mfu_recount.json"), "w") as f:
        f.write(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
