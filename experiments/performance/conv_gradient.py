"""Gradient steps of the az_jax network in a `lax.scan`, rolled and unrolled, with JAX's own convolution gradient and
with az_jax/core/conv.py's, on one CPU device (experiments/performance/README.md §1, §3, §4).

    python -m experiments.performance.conv_gradient [--blocks 3] [--channels 32] [--batch 256] [--steps 8]

Prints seconds per `--steps` steps (best of 3 calls after the first) and the first call's compile + run time, and
checks that both gradients give the same parameters.
"""

import argparse
import time

# They import no pgx: no backend starts before main()'s device set-up.
from az_jax.core import conv as conv_lib  # noqa: E402
from az_jax.core.networks import AlphaZeroNet  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_num_cpu_devices", 1)
    import jax.numpy as jnp
    from jax import lax

    obs = jax.random.bernoulli(jax.random.key(1), 0.3, (args.batch, 6, 7, 2))  # connect_four observations
    results = {}
    for name, conv in [
        ("jax gradient", lax.conv_general_dilated),
        ("az_jax/core/conv.py", conv_lib.conv_general_dilated),
    ]:
        net = AlphaZeroNet(
            num_actions=7, num_blocks=args.blocks, channels=args.channels, value_hidden=args.channels, conv=conv
        )
        variables = net.init(jax.random.key(0), obs)

        def loss(params, net=net, variables=variables):
            (logits, value), _ = net.apply(
                {"params": params, "batch_stats": variables["batch_stats"]}, obs, train=True, mutable=["batch_stats"]
            )
            return jnp.mean(logits**2) + jnp.mean(value)

        for unroll in (1, args.steps):

            def steps(params, unroll=unroll):
                def body(params, _):
                    grads = jax.grad(loss)(params)
                    return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads), None

                return lax.scan(body, params, None, length=args.steps, unroll=unroll)[0]

            f = jax.jit(steps)
            t0 = time.perf_counter()
            results[name, unroll] = jax.block_until_ready(f(variables["params"]))
            first = time.perf_counter() - t0
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                jax.block_until_ready(f(variables["params"]))
                times.append(time.perf_counter() - t0)
            print(
                f"{args.blocks}x{args.channels}, batch {args.batch}, {name:15s} "
                f"{'rolled  ' if unroll == 1 else 'unrolled'}: {min(times):.2f} s for {args.steps} steps "
                f"(compile + first call {first:.1f} s)",
                flush=True,
            )
    diff = max(
        float(jnp.max(jnp.abs(a - b)))
        for a, b in zip(
            jax.tree.leaves(results["jax gradient", args.steps]), jax.tree.leaves(results["az_jax/core/conv.py", 1])
        )
    )
    print(f"largest parameter difference, JAX's gradient unrolled vs az_jax's rolled: {diff:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
