"""A 2-D convolution whose gradient is written as two plain forward convolutions, for XLA:CPU.

JAX differentiates `lax.conv_general_dilated` into convolutions with unusual dimension numbers (the weight gradient
treats the batch as the contracted feature: `f01b_i01o->01bf`). At the top level of a program XLA:CPU rewrites those
into its canonical NHWC / HWIO form and runs them on Eigen, but inside a loop body (a `lax.scan` of gradient steps) it
does not, and runs them on a generic kernel an order of magnitude slower (`python -m
experiments.performance.conv_gradient` measures it; experiments/performance/README.md §4).

`conv_general_dilated` below has `lax.conv_general_dilated`'s signature and the same forward pass. Its custom VJP
states the two gradients as canonical convolutions (explicit transposes, a flipped kernel), which XLA:CPU runs on
Eigen wherever they sit:

    dx = conv(dy, flip_hw(w) with in/out swapped), padding (k − 1 − lo, k − 1 − hi)      # [B, H, W, C]
    dw = conv(x as [C, H, W, B], dy as a [Ho, Wo, B, D] kernel), padding (lo, hi)       # [C, kh, kw, D] → HWIO

Only stride-1, undilated, ungrouped NHWC/HWIO convolutions (every convolution of networks.py) take this path; any
other call is passed to `lax.conv_general_dilated` unchanged; tests/test_conv.py checks values and gradients against
JAX's own.
"""

import functools

import jax
import jax.numpy as jnp
from jax import lax

_NHWC = ("NHWC", "HWIO", "NHWC")


def _pads(padding, in_hw, kernel_hw) -> tuple[tuple[int, int], ...]:
    if isinstance(padding, str):
        return tuple(lax.padtype_to_pads(in_hw, kernel_hw, (1, 1), padding))
    return tuple((int(lo), int(hi)) for lo, hi in padding)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _conv(x, w, pads, precision):
    """x [B, H, W, C], w [kh, kw, C, D] → [B, Ho, Wo, D]; stride 1, `pads` ((lo, hi), (lo, hi))."""
    return lax.conv_general_dilated(x, w, (1, 1), pads, dimension_numbers=_NHWC, precision=precision)


def _conv_fwd(x, w, pads, precision):
    return _conv(x, w, pads, precision), (x, w)


def _conv_bwd(pads, precision, residuals, dy):
    x, w = residuals
    kh, kw = w.shape[:2]
    flipped = jnp.flip(w, (0, 1)).transpose(0, 1, 3, 2)  # [kh, kw, D, C]
    back = tuple((k - 1 - lo, k - 1 - hi) for k, (lo, hi) in zip((kh, kw), pads))
    dx = lax.conv_general_dilated(dy, flipped, (1, 1), back, dimension_numbers=_NHWC, precision=precision)
    dw = lax.conv_general_dilated(
        x.transpose(3, 1, 2, 0), dy.transpose(1, 2, 0, 3), (1, 1), pads, dimension_numbers=_NHWC, precision=precision
    )  # [C, kh, kw, D]
    return dx.astype(x.dtype), dw.transpose(1, 2, 0, 3).astype(w.dtype)


_conv.defvjp(_conv_fwd, _conv_bwd)


def _is_nhwc(dimension_numbers, lhs_shape, rhs_shape) -> bool:
    if dimension_numbers is None:
        return False
    return lax.conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers) == lax.conv_dimension_numbers(
        lhs_shape, rhs_shape, _NHWC
    )


def conv_general_dilated(
    lhs,
    rhs,
    window_strides,
    padding,
    lhs_dilation=None,
    rhs_dilation=None,
    dimension_numbers=None,
    feature_group_count=1,
    batch_group_count=1,
    precision=None,
    preferred_element_type=None,
):
    """`lax.conv_general_dilated`, with the canonical-gradient VJP above where it applies (see the module doc)."""
    ones = lambda d: d is None or all(int(v) == 1 for v in d)
    simple = (
        lhs.ndim == 4
        and ones(window_strides)
        and ones(lhs_dilation)
        and ones(rhs_dilation)
        and feature_group_count == 1
        and batch_group_count == 1
        and preferred_element_type is None
        and _is_nhwc(dimension_numbers, lhs.shape, rhs.shape)
    )
    if not simple:
        return lax.conv_general_dilated(
            lhs,
            rhs,
            window_strides,
            padding,
            lhs_dilation,
            rhs_dilation,
            dimension_numbers,
            feature_group_count,
            batch_group_count,
            precision,
            preferred_element_type,
        )
    return _conv(lhs, rhs, _pads(padding, lhs.shape[1:3], rhs.shape[:2]), precision)
