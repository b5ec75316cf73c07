"""Config.remat: each residual block recomputed in the backward pass (flax's lifted jax.checkpoint). The same
parameter names (checkpoints load either way), the same gradient step, and a fraction of the step's memory."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from az_jax.core import learner, networks, replay
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.runtime import targets


def _net(remat: bool, blocks: int = 2, channels: int = 8, pooling: int = 0) -> networks.AlphaZeroNet:
    return networks.AlphaZeroNet(
        num_actions=7, num_blocks=blocks, channels=channels, value_hidden=8, remat=remat, global_pooling_every=pooling
    )


def _batch(n: int) -> replay.Batch:
    rng = np.random.default_rng(0)
    legal = rng.random((n, 7)) < 0.8
    legal[:, 0] = True
    policy = np.where(legal, rng.random((n, 7)), 0.0)
    return replay.Batch(
        observation=jnp.asarray(rng.random((n, 6, 7, 2)) < 0.4),
        policy=jnp.float32(policy / policy.sum(axis=1, keepdims=True)),
        legal=jnp.asarray(legal),
        outcome=jnp.float32(rng.choice([-1.0, 0.0, 1.0], n)),
    )


def _step(net, variables, batch):
    config = override(preset("connect_four", "small"), [])
    optimizer = learner.make_optimizer(config)
    step = jax.jit(
        lambda p, s, o, b: learner.train_step(
            p,
            s,
            o,
            b,
            apply_fn=learner.learning_apply(net),
            optimizer=optimizer,
            weight_decay=config.weight_decay,
            axis_name=None,
        )
    )
    return step, (variables["params"], variables["batch_stats"], optimizer.init(variables["params"]), batch)


def test_remat_keeps_names_and_takes_the_same_step():
    batch = _batch(16)
    for pooling in (0, 2):  # plain residual blocks, and KataGo's global pooling block in the second
        plain, remat = _net(False, pooling=pooling), _net(True, pooling=pooling)
        variables = plain.init(jax.random.key(0), batch.observation)
        shapes = lambda tree: jax.tree.map(jnp.shape, tree)
        assert shapes(remat.init(jax.random.key(0), batch.observation)) == shapes(variables)  # same names, shapes
        step_plain, args = _step(plain, variables, batch)
        step_remat, _ = _step(remat, variables, batch)
        chex.assert_trees_all_close(step_plain(*args), step_remat(*args), rtol=1e-6, atol=1e-7)


def test_remat_cuts_the_gradient_steps_temporaries_on_a_gpu():
    # 8 blocks of 32 channels on 256 positions, compiled for one H100 (compile-only, az_jax/runtime/targets.py): without
    # remat every block keeps its convolutions' and batch norms' outputs for the backward pass ([256, 6, 7, 32] float32
    # = 1.4 MB each, several per block), with it only each block's input. (XLA:CPU's and the TPU compiler's own
    # scheduling already keep few activations on this small network: the GPU shows the difference.)
    batch = _batch(256)
    replicated = NamedSharding(Mesh(np.asarray(targets.get_target("h100").topology_devices()), ("d",)), P())
    temps = {}
    for remat in (False, True):
        net = _net(remat, blocks=8, channels=32)
        variables = jax.eval_shape(lambda n=net: n.init(jax.random.key(0), batch.observation))
        step, args = _step(net, variables, batch)
        args = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated), args)
        temps[remat] = step.lower(*args).compile().memory_analysis().temp_size_in_bytes
    assert temps[True] < 0.6 * temps[False], temps  # seen: 19.5 MB against 48.4 MB
