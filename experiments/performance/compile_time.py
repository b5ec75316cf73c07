"""Lower and compile time of one game/preset's training iteration, nothing run (experiments/performance/README.md §3).

    python -m experiments.performance.compile_time --game connect_four --preset small [--devices 2] \
        [--set train_ratio=0.125]

XLA_FLAGS are taken from the environment, so compiler flags can be compared run against run; with
JAX_COMPILATION_CACHE_DIR set (and JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0), a second run shows the cost of a
persistent-cache hit.
"""

import argparse
import os
import time

# They import only jax: no backend starts before host_devices.setup in main().
from az_jax.core.devices import make_mesh  # noqa: E402
from az_jax.runtime import host_devices  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--devices", type=int, default=None, help="host devices (default: one per core)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    host_devices.setup(args.devices)
    # after the device set-up in main(): importing pgx starts JAX's backend
    from az_jax.core.overrides import override
    from az_jax.core.presets import preset
    from az_jax.runtime.trainer import Trainer

    config = override(preset(args.game, args.preset), args.set)
    trainer = Trainer(config, make_mesh())
    t0 = time.perf_counter()
    lowered = trainer.iterate.lower(trainer.abstract_state())
    t1 = time.perf_counter()
    lowered.compile()
    t2 = time.perf_counter()
    print(
        f"{args.game} {args.preset} {args.set} on {trainer.num_devices} devices, G = "
        f"{config.train_steps_per_iteration} gradient steps, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}: "
        f"lower {t1 - t0:.1f} s, compile {t2 - t1:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
