"""What XLA:CPU gives a chain of convolutions like the network's: thirteen 3 × 3 convolutions (the 6 × 128 network's
stem and 12 block convolutions) on connect_four's 6 × 7 board, split over host devices, in GFLOP/s.

    python -m experiments.performance.conv_chain [--devices 2] [--batch 32] [--channels 128]

Run it next to `az-jax bench` to see whether the network runs at the speed the convolutions themselves allow
(README, "Performance"; experiments/performance/README.md §2). Pin with `taskset -c 0` to see one core alone.
"""

import argparse
import time

from az_jax.core.devices import DEVICE_AXIS, make_mesh, sharded  # imports no pgx: no backend before main()'s set-up


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32, help="global batch, split over the devices")
    parser.add_argument("--channels", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_num_cpu_devices", args.devices)
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    b, c, layers = args.batch, args.channels, 13
    mesh = make_mesh()
    w = jnp.full((3, 3, c, c), 0.01, jnp.float32)

    def chain(x):
        for _ in range(layers):
            x = jax.nn.relu(
                jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
            )
        return x

    f = sharded(chain, mesh, P(DEVICE_AXIS), P(DEVICE_AXIS))
    x = jax.device_put(jnp.ones((b, 6, 7, c), jnp.float32), NamedSharding(mesh, P(DEVICE_AXIS)))
    jax.block_until_ready(f(x))
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(x))
        times.append(time.perf_counter() - t0)
    median = sorted(times)[len(times) // 2]
    flops = layers * 2 * b * 6 * 7 * 9 * c * c  # multiply-adds of a SAME 3 × 3 convolution, × 2
    print(
        f"{args.devices} device(s), batch {b}, {c} channels: {median * 1e3:.1f} ms per chain, "
        f"{flops / median / 1e9:.1f} GFLOP/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
