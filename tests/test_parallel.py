"""Data parallelism on the 2 host CPU devices conftest.py creates.

(a) One train_step on a global batch split over 2 devices equals the same step on 1 device with the whole batch
    (gradients pmean'd, batch norm synchronised over the axis), and leaves identical parameters on both devices.
(b) The jitted, sharded training iteration compiles once, and keeps the replicated state identical across devices.
"""

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from az_jax.core import devices, learner
from az_jax.core.config import Config
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.runtime.trainer import Trainer

from conftest import TINY_NETWORK, random_batch, tiny_network, tiny_variables

# Programs that compile for far longer than they run: XLA's optimisation passes off (conftest.py).
pytestmark = pytest.mark.usefixtures("fast_compiles")

AXIS = devices.DEVICE_AXIS
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # jax._src.dispatch.BACKEND_COMPILE_EVENT


def _per_device(tree):
    """[D, ...] numpy arrays, one row per device, from arrays whose leading axis is sharded one row per device."""
    return jax.tree.map(lambda x: np.stack([np.asarray(s.data)[0] for s in x.addressable_shards]), tree)


def _train_step_on(devices_, params, batch_stats, opt_state, batch, network, optimizer):
    """learner.train_step inside the library's device boundary (devices.sharded) over `devices_`: state replicated,
    batch split along its leading axis. Every output gets a leading axis of one row per device (out_specs P("d")), so
    each device's copy comes back.

    The boundary's check_vma=False is what this checks: with check_vma=True, JAX's autodiff already sums the
    gradients of the replicated parameters over the devices, and train_step's pmean then leaves them D times the
    mean."""
    step = functools.partial(
        learner.train_step,
        apply_fn=learner.learning_apply(network),
        optimizer=optimizer,
        weight_decay=1e-4,
        axis_name=AXIS,
    )

    def local(params, batch_stats, opt_state, batch):
        return jax.tree.map(lambda x: x[None], step(params, batch_stats, opt_state, batch))

    fn = devices.sharded(local, devices.make_mesh(devices_), (P(), P(), P(), P(AXIS)), P(AXIS))
    return _per_device(fn(params, batch_stats, opt_state, batch))


def test_two_device_train_step_equals_one_device_step_on_the_whole_batch(two_devices):
    num_actions = 9
    batch = random_batch(np.random.default_rng(0), n=8, num_actions=num_actions)
    network = tiny_network(num_actions, axis_name=AXIS)  # batch norm statistics averaged over the device axis
    variables = tiny_variables(tiny_network(num_actions), batch.observation.astype(jnp.float32))
    config = dataclasses.replace(Config(), learning_rates=(0.1,), lr_boundaries=(), momentum=0.9)
    optimizer = learner.make_optimizer(config)
    args = (variables["params"], variables["batch_stats"], optimizer.init(variables["params"]), batch)

    two = _train_step_on(two_devices, *args, network, optimizer)  # 4 positions per device
    one = _train_step_on(two_devices[:1], *args, network, optimizer)  # all 8 on one device
    two_params, two_stats, two_opt, two_metrics = two
    one_params, one_stats, one_opt, one_metrics = one
    # The two devices hold bitwise-identical results.
    for leaf in jax.tree.leaves((two_params, two_stats, two_opt, two_metrics)):
        np.testing.assert_array_equal(leaf[0], leaf[1])
    # And they equal the single-device step on the whole batch, up to float reassociation.
    first_copy = lambda tree: jax.tree.map(lambda x: x[0], tree)
    chex.assert_trees_all_close(first_copy(two), first_copy(one), atol=1e-5, rtol=1e-5)
    # The step did something: parameters moved, and the running batch-norm averages left their init (mean 0).
    moved = jax.tree.map(lambda new, old: np.abs(new[0] - np.asarray(old)).max(), two_params, variables["params"])
    assert max(jax.tree.leaves(moved)) > 1e-3
    means = [x[0] for path, x in jax.tree_util.tree_leaves_with_path(two_stats) if "mean" in jax.tree_util.keystr(path)]
    assert len(means) == 5  # batch norms: stem, 2 in the residual block, policy head, value head
    assert max(np.abs(m).max() for m in means) > 1e-3


TINY = [
    *TINY_NETWORK,
    "selfplay_steps=3",
    "replay_capacity=256",
    "min_replay_size=1",
    "train_ratio=0.5",
]  # G = max(1, round(0.5 · 8 · 3 / 16)) = 1 gradient step per iteration


@pytest.fixture(scope="module")
def trainer(two_devices):
    config = override(preset("tic_tac_toe", "small"), TINY).validate(num_devices=2)
    assert config.train_steps_per_iteration == 1
    return Trainer(config, devices.make_mesh(two_devices))


def test_one_device_iteration_keeps_one_signature(two_devices):
    # On a 1-device mesh jit used to return single-device arrays, so call 2 (fed call 1's outputs) was a new jit
    # signature, a retrace (measured: jit cache sizes 1, 2, 2 over three calls; devices.sharded's output shardings fix
    # it).
    config = override(preset("tic_tac_toe", "small"), TINY).validate(num_devices=1)
    trainer = Trainer(config, devices.make_mesh(two_devices[:1]))
    state = trainer.init_state()
    sizes = []
    for _ in range(3):
        state, _ = trainer.iterate(state)
        sizes.append(trainer.iterate._cache_size())
    assert sizes == [1, 1, 1]


def _replicas(array):
    """Each device's copy of a replicated array, as numpy."""
    return [np.asarray(shard.data) for shard in array.addressable_shards]


def test_iteration_compiles_once_and_keeps_devices_in_step(trainer):
    state = trainer.init_state()
    initial_params = jax.tree.map(np.asarray, state.params)  # copied: the iteration donates its input
    compiles = []
    record = lambda event, seconds, **kwargs: compiles.append(event) if event == BACKEND_COMPILE else None
    jax.monitoring.register_event_duration_secs_listener(record)
    trained = 0
    try:
        for call in range(1, 4):
            compiles.clear()
            state, metrics = trainer.iterate(state)
            # The first call compiles; the second and third reuse it (same shapes, dtypes and shardings in and out).
            # (No other test compiles this config's iteration, so the session's compilation cache, conftest.py,
            # cannot serve the first call.)
            assert trainer.iterate._cache_size() == 1, f"iteration retraced on call {call}"
            if call == 1:
                assert compiles  # the listener does see compilations
            else:
                assert not compiles, f"XLA compiled {len(compiles)} programs during call {call}"
            assert int(state.iteration) == call
            assert int(metrics["selfplay/positions"]) == 8 * 3
            trained += int(metrics["train/steps"])
    finally:
        jax.monitoring.unregister_event_duration_listener(record)
    # By the third call (9 plies) every first tic-tac-toe game has ended, so learning has started.
    assert trained > 0
    # Replicated state is bitwise identical on both devices.
    for leaf in jax.tree.leaves((state.params, state.batch_stats, state.opt_state, state.key)):
        copies = _replicas(leaf)
        assert len(copies) == 2
        np.testing.assert_array_equal(copies[0], copies[1])
    # ... and it was trained, not just left at its initial value.
    moved = jax.tree.map(lambda new, old: np.abs(np.asarray(new) - old).max(), state.params, initial_params)
    assert max(jax.tree.leaves(moved)) > 0
    # The devices played different games (keys folded with the device index): their replay shards differ.
    shards = [np.asarray(s.data) for s in state.replay.policy.addressable_shards]
    assert shards[0].shape == (128, 9) and not np.array_equal(shards[0], shards[1])


class _Step:
    """Stands for one dispatched step's output: records when the host waited for it."""

    def __init__(self, index: int, waited: list[int]):
        self.index, self.waited = index, waited

    def block_until_ready(self):
        self.waited.append(self.index)
        return self


def test_pace_waits_for_the_step_max_ahead_back():
    # With MAX_AHEAD = 4 the host may have 4 steps queued: after dispatching step k (0-based, k + 1 outputs pending)
    # it waits for step k + 1 − 4 = k − 3, and for none while fewer than 4 are pending. Dispatching steps 0…5 therefore
    # waits for steps 0, 1, 2 (after steps 3, 4, 5).
    assert devices.MAX_AHEAD == 4
    waited: list[int] = []
    pending: list[_Step] = []
    for k in range(6):
        pending.append(_Step(k, waited))
        devices.pace(pending)
    assert waited == [0, 1, 2]
