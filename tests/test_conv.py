"""az_jax/core/conv.py: the forward pass and both gradients equal JAX's own convolution's, and in a rolled loop of
gradient steps every convolution XLA:CPU compiles is in the canonical NHWC/HWIO form it runs on Eigen.

Inputs are drawn with NumPy and network parameters are only shapes (`jax.eval_shape`): on CPU each `jax.random` shape
and flax's `init` compile programs of their own (seconds each) that the checks do not need."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from az_jax.core import conv as conv_lib
from az_jax.core.networks import AlphaZeroNet

NHWC = ("NHWC", "HWIO", "NHWC")


def _normal(seed: int, shape: tuple[int, ...], scale: float = 1.0) -> jax.Array:
    """Normal float32 values of `shape` with mean 0 and standard deviation `scale`, drawn on the host."""
    return jnp.asarray(np.random.default_rng(seed).normal(0.0, scale, shape), jnp.float32)


@pytest.mark.parametrize(
    "kernel, padding", [((3, 3), "SAME"), ((1, 1), "SAME"), ((3, 3), "VALID"), ((3, 2), ((2, 0), (1, 1)))]
)
def test_values_and_gradients_match_lax(kernel, padding):
    x = _normal(0, (4, 6, 7, 5))
    w = _normal(1, (*kernel, 5, 3))
    ours = lambda x, w: conv_lib.conv_general_dilated(x, w, (1, 1), padding, dimension_numbers=NHWC)
    theirs = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), padding, dimension_numbers=NHWC)
    y, y_ref = ours(x, w), theirs(x, w)
    np.testing.assert_allclose(y, y_ref, rtol=1e-6, atol=1e-6)
    dy = _normal(2, y.shape)
    grads = jax.vjp(ours, x, w)[1](dy)
    grads_ref = jax.vjp(theirs, x, w)[1](dy)
    for g, g_ref in zip(grads, grads_ref):
        assert g.shape == g_ref.shape
        np.testing.assert_allclose(g, g_ref, rtol=1e-5, atol=1e-5)


def test_hand_checked_weight_gradient():
    # x = 1 everywhere on a 1 × 2 × 2 × 1 image, w 3 × 3 × 1 × 1, SAME padding, loss = sum(y).
    # dL/dw[i, j] = Σ over output pixels of the input pixel under tap (i, j): the centre tap sees all 4 pixels (4); an
    # edge tap sees 2 (one row or column falls in the padding); a corner tap sees 1.
    x = jnp.ones((1, 2, 2, 1))
    w = jnp.zeros((3, 3, 1, 1))
    dw = jax.grad(lambda w: conv_lib.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC).sum())(w)
    np.testing.assert_array_equal(dw[:, :, 0, 0], [[1, 2, 1], [2, 4, 2], [1, 2, 1]])


def test_other_convolutions_fall_back_to_lax():
    x = _normal(3, (2, 8, 8, 4))
    w = _normal(4, (3, 3, 4, 6))
    kwargs = dict(window_strides=(2, 2), padding="SAME", dimension_numbers=NHWC)
    np.testing.assert_array_equal(
        conv_lib.conv_general_dilated(x, w, **kwargs), lax.conv_general_dilated(x, w, **kwargs)
    )


def _conv_dim_labels(fn, *args) -> list[str]:
    text = jax.jit(fn).lower(*args).compile().as_text()
    assert text is not None
    return re.findall(r"convolution\(.*?dim_labels=([^,\s]+)", text)


@pytest.mark.skipif(
    jax.default_backend() != "cpu",
    reason="checks XLA:CPU's compiled convolution layouts; a GPU compiles convolutions to cuDNN calls",
)
def test_rolled_gradient_loop_compiles_only_canonical_convolutions():
    # JAX's own gradient inside a rolled scan leaves XLA:CPU a weight-gradient convolution in another layout
    # (f01b_i01o->01bf), which it runs on a slow generic kernel; ours must leave none.
    x = _normal(5, (8, 6, 7, 4))
    w = _normal(6, (2, 3, 3, 4, 4), 0.1)

    def steps(conv):
        def loss(w):
            y = x
            for layer in range(2):
                y = jax.nn.relu(conv(y, w[layer], (1, 1), "SAME", dimension_numbers=NHWC))
            return jnp.sum(y**2)

        def run(w):
            return lax.scan(lambda w, _: (w - 1e-3 * jax.grad(loss)(w), None), w, None, length=3)[0]

        return run

    ours = _conv_dim_labels(steps(conv_lib.conv_general_dilated), w)
    theirs = _conv_dim_labels(steps(lax.conv_general_dilated), w)
    assert len(ours) == 5  # per step: 2 forward, 2 weight gradients, 1 input gradient (layer 2's)
    assert set(ours) == {"b01f_01io->b01f"}
    assert set(theirs) != {"b01f_01io->b01f"}  # the comparison can fail: JAX's own gradient is not canonical here


@pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="checks XLA:CPU's compiled program; a GPU compiles convolutions to cuDNN"
)
def test_network_forward_compiles_to_the_same_program():
    # Acting (self-play, evaluation) only runs the forward pass: with az_jax's convolution the network must compile to
    # exactly the convolutions and fusions it had with lax's, so self-play speed cannot change.
    obs = jnp.zeros((4, 6, 7, 2), jnp.bool_)

    def program(conv):
        net = AlphaZeroNet(num_actions=7, num_blocks=1, channels=8, value_hidden=8, conv=conv)
        variables = jax.eval_shape(lambda: net.init(jax.random.key(0), obs))  # the compiled program sees only shapes
        text = jax.jit(lambda v, o: net.apply(v, o)).lower(variables, obs).compile().as_text()
        text = re.sub(r", metadata=\{[^}]*\}", "", text)
        return [
            re.sub(r"%[\w.\-]+", "%", line) for line in text.splitlines() if "convolution(" in line or "fusion(" in line
        ]

    ours, theirs = program(conv_lib.conv_general_dilated), program(lax.conv_general_dilated)
    assert len(theirs) >= 5  # 3 convolutions (stem, block × 2) + 2 head convolutions, at least
    assert ours == theirs
