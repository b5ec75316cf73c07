"""The training iteration's memory: what XLA's compile says it needs (`compiled.memory_analysis()`) against what the
device reports after running it (`device.memory_stats()['peak_bytes_in_use']`), for one config, in a fresh process.

    python -m experiments.accelerators.memory_check --game go_9x9 --preset small [--set k=v ...] \
        [--iterations 2] [--jsonl out]

Run it in its own process for every config: the device's peak counter cannot be reset. The process compiles
`Trainer.iterate` ahead of time, creates the initial state on the device and runs `--iterations` iterations, so the
peak it reads covers the state, the iteration's temporaries and the initial state's program. Per device:

    predicted = argument + output − alias + temporaries   (the donated state's buffers are reused for the new state)

and `measured / predicted` tells how far the compile-time plan is from what the allocator saw. On a backend without
memory statistics (the CPU) the measured figure is null. Appends one JSON line to --jsonl and prints it.
"""

import argparse
import json
import time

GIB = 2**30


def memory_plan(compiled) -> dict:
    """Per-device bytes of a compiled program (XLA's memory analysis) and the peak they imply."""
    analysis = compiled.memory_analysis()
    fields = ("argument", "output", "alias", "temp", "generated_code")
    plan = {f"{name}_bytes": int(getattr(analysis, f"{name}_size_in_bytes", 0) or 0) for name in fields}
    plan["predicted_peak_bytes"] = (
        plan["argument_bytes"] + plan["output_bytes"] - plan["alias_bytes"] + plan["temp_bytes"]
    )
    return plan


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", required=True)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--jsonl", help="append the result here")
    args = parser.parse_args(argv)

    import jax

    from az_jax.core import overrides as overrides_lib
    from az_jax.core import presets as presets_lib
    from az_jax.core.devices import make_mesh
    from az_jax.runtime.trainer import Trainer

    config = overrides_lib.override(presets_lib.preset(args.game, args.preset), args.set)
    mesh = make_mesh()
    config.validate(mesh.size)
    trainer = Trainer(config, mesh)
    t0 = time.perf_counter()
    compiled = trainer.iterate.lower(trainer.abstract_state()).compile()
    compile_seconds = time.perf_counter() - t0
    plan = memory_plan(compiled)
    state = trainer.init_state()
    for _ in range(args.iterations):
        state, metrics = compiled(state)
    jax.block_until_ready(state)
    devices = list(mesh.devices.flat)
    stats = [d.memory_stats() or {} for d in devices]
    peaks = [int(s["peak_bytes_in_use"]) for s in stats if "peak_bytes_in_use" in s]
    measured = max(peaks) if len(peaks) == len(stats) else None
    result = {
        "game": args.game,
        "preset": args.preset,
        "overrides": args.set,
        "device_kind": devices[0].device_kind,
        "platform": devices[0].platform,
        "num_devices": len(devices),
        "jax": jax.__version__,
        "iterate_compile_seconds": round(compile_seconds, 2),
        "iterations_run": args.iterations,
        **plan,
        "measured_peak_bytes": measured,
        "bytes_limit": stats[0].get("bytes_limit"),
        "measured_over_predicted": None if measured is None else measured / plan["predicted_peak_bytes"],
    }
    line = json.dumps(result)
    print(line, flush=True)
    if args.jsonl:
        with open(args.jsonl, "a") as f:
            f.write(line + "\n")
    gib = lambda b: "-" if b is None else f"{b / GIB:.3f} GiB"
    print(
        f"{args.game}/{args.preset} {' '.join(args.set)}: predicted {gib(plan['predicted_peak_bytes'])} "
        f"(args {gib(plan['argument_bytes'])}, temps {gib(plan['temp_bytes'])}), measured peak {gib(measured)}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
