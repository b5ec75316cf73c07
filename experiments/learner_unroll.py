"""Why the learner's gradient steps are unrolled on CPU: 8 gradient steps of the connect_four 3 × 32 network
(batch 256) in a `lax.scan` with unroll = 1, 2 and 8, one device (experiments/PERFORMANCE.md §1, §3).

    python experiments/learner_unroll.py
"""
import time


def main() -> int:
    import jax
    jax.config.update("jax_num_cpu_devices", 1)
    import jax.numpy as jnp
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from az_jax.networks import AlphaZeroNet

    net = AlphaZeroNet(num_actions=7, num_blocks=3, channels=32, value_hidden=32)
    obs = jnp.ones((256, 6, 7, 2))
    variables = net.init(jax.random.key(0), obs)

    def loss(params):
        (logits, value), _ = net.apply({"params": params, "batch_stats": variables["batch_stats"]}, obs, train=True,
                                       mutable=["batch_stats"])
        return jnp.mean(logits ** 2) + jnp.mean(value)

    def steps(params, unroll):
        def body(params, _):
            grads = jax.grad(loss)(params)
            return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads), None
        return jax.lax.scan(body, params, None, length=8, unroll=unroll)[0]

    for unroll in (1, 2, 8):
        f = jax.jit(lambda params: steps(params, unroll))
        t0 = time.perf_counter()
        jax.block_until_ready(f(variables["params"]))
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        jax.block_until_ready(f(variables["params"]))
        print(f"unroll={unroll}: {time.perf_counter() - t0:.2f} s for 8 steps (compile + first call {first:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
