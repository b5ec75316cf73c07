"""Shared test set-up: two host CPU devices, and a tiny network whose outputs carry no information.

`jax_num_cpu_devices` must be set before JAX initialises its backend, i.e. before anything calls `jax.devices()` or
creates an array, so it is the first thing this file does (pytest imports conftest.py before any test module).
"""
import jax

jax.config.update("jax_num_cpu_devices", 2)

import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

from az_jax import networks  # noqa: E402


def tiny_network(num_actions: int, axis_name: str | None = None) -> networks.AlphaZeroNet:
    """The smallest AlphaZeroNet the tests use: 1 residual block of 8 channels, value head of 8 units."""
    return networks.AlphaZeroNet(num_actions=num_actions, num_blocks=1, channels=8, value_hidden=8,
                                 axis_name=axis_name)


def uninformative_model(env, rng_key):
    """(apply_fn, variables) for `env` whose every output is a uniform prior and value 0.

    All parameters are zero: the convolutions output 0, batch norm (running mean 0, var 1, scale 0, bias 0) keeps it
    0, so the policy logits are the Dense bias 0 (uniform softmax) and the value is tanh(0) = 0. A search with this
    network can only find good moves by looking ahead in the real game. The key is consumed.
    """
    net = tiny_network(env.num_actions)
    obs = env.init(jax.random.key(0)).observation[None].astype(jnp.float32)
    variables = net.init(rng_key, obs, train=False)
    variables = {"params": jax.tree.map(jnp.zeros_like, variables["params"]),
                 "batch_stats": variables["batch_stats"]}
    return (lambda v, o: net.apply(v, o, train=False)), variables


@pytest.fixture(scope="session")
def two_devices():
    """The two host CPU devices the data-parallel tests run on."""
    devices = jax.devices()
    assert len(devices) == 2, f"conftest.py asked for 2 CPU devices, JAX has {devices}"
    return devices
