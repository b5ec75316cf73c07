"""Shared test set-up: two host CPU devices, a persistent compilation cache for the session, a switch for XLA's
optimisation passes, and tiny networks (one whose outputs carry no information).

`jax_num_cpu_devices` must be set before JAX initialises its backend, i.e. before anything calls `jax.devices()` or
creates an array, so it is the first thing this file does (pytest imports conftest.py before any test module).

The compilation cache: many tests compile the same XLA programs again (a run and its resumed half, the same tiny run
in the CLI and the evaluation tests, `az-jax` subprocesses, sweep trials, notebook kernels). The pytest process that
starts the session (the pytest-xdist controller, or the only process) makes one empty cache directory and exports it
through JAX's own environment variables, so the xdist workers and every subprocess the tests start (which inherit
os.environ) share it; it is removed when that process ends. A program is loaded from the cache only when its HLO,
compile options, XLA flags and devices are all equal, so results are those of a fresh compile.
"""

import contextlib
import dataclasses
import os
import shutil
import tempfile
import time

import jax

import az_jax  # noqa: F401  (its import keeps JAX from probing for a TPU or GPU that is not attached: platforms.py)

jax.config.update("jax_num_cpu_devices", 2)

_CACHE_OWNER = "AZ_JAX_TEST_XLA_CACHE" not in os.environ
if _CACHE_OWNER:
    os.environ["AZ_JAX_TEST_XLA_CACHE"] = tempfile.mkdtemp(prefix="az_jax_test_xla_cache_")
XLA_CACHE_DIR = os.environ["AZ_JAX_TEST_XLA_CACHE"]
os.environ.update(JAX_COMPILATION_CACHE_DIR=XLA_CACHE_DIR, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
jax.config.update("jax_compilation_cache_dir", XLA_CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

# For subprocesses whose tiny programs run for milliseconds and compile for tens of seconds: XLA's optimisation passes
# off (`env={**os.environ, **FAST_COMPILES}`).
FAST_COMPILES = {"JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}

# The config keys of the tests' tiny runs: a 1-block, 8-channel network, 4 simulations per move, 8 games at a time,
# minibatches of 16 (with preset("tic_tac_toe", "small"); each test adds its own plies, buffer and schedule).
TINY_NETWORK = [
    "num_blocks=1",
    "num_channels=8",
    "value_hidden=8",
    "num_simulations=4",
    "selfplay_batch_size=8",
    "batch_size=16",
]

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from az_jax.core import config as config_lib  # noqa: E402
from az_jax.core import networks, replay  # noqa: E402


def tiny_network(num_actions: int, axis_name: str | None = None) -> networks.AlphaZeroNet:
    """The smallest AlphaZeroNet the tests use: 1 residual block of 8 channels, value head of 8 units."""
    return networks.AlphaZeroNet(num_actions=num_actions, num_blocks=1, channels=8, value_hidden=8, axis_name=axis_name)


def tiny_head_params(**changes) -> dict:
    """flax's initial parameters of a tic-tac-toe network of 1 block, 4 channels and 8 value units with the Config
    `changes` (the heads' widths in test_value_head.py and test_policy_head.py): 3×3 board, 2 planes, 9 actions."""
    base = dataclasses.replace(config_lib.Config(game="tic_tac_toe"), num_blocks=1, num_channels=4, value_hidden=8)
    network = networks.make_network(dataclasses.replace(base, **changes), num_actions=9)
    return network.init(jax.random.key(0), jnp.zeros((1, 3, 3, 2)))["params"]


def tiny_variables(network, observation, seed: int = 0, zero: bool = False) -> dict:
    """Variables for `network` on observations shaped like `observation` [B, ...], without running flax's init.

    Flax's initialisers compile one threefry program per parameter shape (seconds each on CPU); these tests only need
    some well-scaled parameters, so they are drawn with NumPy on the host: weights ~ N(0, 1/fan_in) (LeCun normal,
    as flax's default), biases 0, batch-norm scale 1, running mean 0 and variance 1. `zero=True` makes every parameter
    0 instead."""
    shapes = jax.eval_shape(lambda: network.init(jax.random.key(0), observation, train=False))
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path)
        if zero:
            return jnp.zeros(leaf.shape, leaf.dtype)
        if "kernel" in name:
            fan_in = int(np.prod(leaf.shape[:-1]))
            return jnp.asarray(rng.normal(0.0, fan_in**-0.5, leaf.shape), leaf.dtype)
        if "scale" in name or "var" in name:
            return jnp.ones(leaf.shape, leaf.dtype)
        return jnp.zeros(leaf.shape, leaf.dtype)

    variables = jax.tree_util.tree_map_with_path(draw, shapes)
    if zero:  # batch-norm running variance stays 1 (a variance of 0 is not a real state)
        variables["batch_stats"] = jax.tree_util.tree_map_with_path(
            lambda path, leaf: jnp.ones_like(leaf) if "var" in jax.tree_util.keystr(path) else leaf,
            variables["batch_stats"],
        )
    return variables


def uninformative_model(env):
    """(apply_fn, variables) for `env` whose every output is a uniform prior and value 0.

    All parameters are zero: the convolutions output 0, batch norm (running mean 0, variance 1, scale 0, bias 0) keeps
    it 0, so the policy logits are the Dense bias 0 (uniform softmax) and the value is tanh(0) = 0. A search with this
    network can only find good moves by looking ahead in the real game."""
    net = tiny_network(env.num_actions)
    obs = jnp.zeros((1, *env.observation_shape), jnp.float32)
    return (lambda v, o: net.apply(v, o, train=False)), tiny_variables(net, obs, zero=True)


def random_batch(rng: np.random.Generator, n: int, num_actions: int, one_hot_policy: bool = False) -> replay.Batch:
    """n random tic-tac-toe-shaped training positions [n, 3, 3, 2], drawn with NumPy (no JAX programs to compile).

    Each has a random legal mask (action 0 always legal), a policy target π on its legal actions (random weights, or
    one-hot on a random legal action), and z = ±1."""
    legal = rng.random((n, num_actions)) < 0.6
    legal[:, 0] = True
    if one_hot_policy:
        chosen = [rng.choice(np.flatnonzero(row)) for row in legal]
        policy = np.eye(num_actions)[chosen]
    else:
        policy = np.where(legal, rng.random((n, num_actions)), 0.0)
        policy /= policy.sum(axis=1, keepdims=True)
    return replay.Batch(
        observation=jnp.asarray(rng.random((n, 3, 3, 2)) < 0.35),
        policy=jnp.float32(policy),
        legal=jnp.asarray(legal),
        outcome=jnp.float32(rng.choice([-1.0, 1.0], n)),
    )


@pytest.fixture(scope="module", autouse=True)
def jax_caches_cleared_after_each_module():
    """After each test module, JAX's in-memory caches are cleared (jax.clear_caches): the module's compiled programs
    are let go (a later module that needs one loads it from the compilation cache), so a worker process does not hold
    every program of the hundreds of tests it runs. Measured here: each small CPU program held adds ~3 memory mappings
    and ~1.5 MB; an xdist worker held 17,400 mappings and 4.0 GB after 21 minutes of the suite."""
    yield
    jax.clear_caches()


@pytest.fixture(scope="session")
def two_devices():
    """The two host CPU devices the data-parallel tests run on (also where an accelerator is the default backend)."""
    devices = jax.devices("cpu")
    assert len(devices) == 2, f"conftest.py asked for 2 CPU devices, JAX has {devices}"
    return devices


@pytest.fixture
def fast_compiles():
    """XLA's optimisation passes off for one test, in this process (FAST_COMPILES does it for subprocesses): for tests
    of tiny programs that run for milliseconds and compile for tens of seconds, whose checks do not depend on how
    the machine code is optimised (a run and the run it is compared with both compile this way)."""
    with fast_compiles_here():
        yield


@contextlib.contextmanager
def fast_compiles_here():
    """`fast_compiles` for a block: module- and session-scoped fixtures (set up before any function-scoped fixture)
    and in-process CLI runs; the previous setting comes back when the block ends."""
    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


def pytest_unconfigure(config):
    if _CACHE_OWNER:
        shutil.rmtree(XLA_CACHE_DIR, ignore_errors=True)


def process_gone(pid: int) -> bool:
    """The process no longer runs: reaped, or a zombie awaiting its (new) parent's reaping."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:  # no procfs: fall back to signal 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def wait_process_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.02)
    return process_gone(pid)
