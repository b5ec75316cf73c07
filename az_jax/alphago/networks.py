"""AlphaGo's policy and value networks (Silver et al., Nature 2016, Methods, "Neural network architecture").

Policy network p_σ (and p_ρ, the same architecture): the input [B, N, N, 48] is zero-padded and convolved with k
filters of 5 × 5 (layer 1), then k filters of 3 × 3 (layers 2 … L−1), each followed by a ReLU; the last layer is one
1 × 1 filter with a different bias for each point, and a softmax over the N² points. The paper's network has L = 13
and k = 192 in the match version (k = 128, 256, 384 in Extended Data Table 3). It never outputs a pass (the paper
excludes passes from its data): `logits` are [B, N²].

Value network v_θ: the input has one more plane (the player's colour, 49); layers 2 … 11 as the policy network's, one
more 3 × 3 convolution (layer 12), a 1 × 1 filter (layer 13), a fully connected layer of 256 ReLU units, and one tanh
unit: v [B] in [−1, 1] for the player to move.

`layers` and `filters` are configurable so the CPU presets can be small; the paper's shapes are the defaults.
"""

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp


class PointBias(nn.Module):
    """A learned bias per board point (the policy network's last layer has "a different bias for each position")."""

    points: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:  # [B, points] -> [B, points]
        return x + self.param("bias", nn.initializers.zeros, (self.points,), jnp.float32)


class Tower(nn.Module):
    """Layer 1 (k filters 5 × 5) and layers 2 … `layers` (k filters 3 × 3), each with a ReLU; "SAME" padding is the
    paper's zero padding (to (N + 4)² before the 5 × 5 layer, (N + 2)² before each 3 × 3 one)."""

    layers: int
    filters: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:  # [B, N, N, C] -> [B, N, N, k]
        x = x.astype(self.dtype)
        for i in range(self.layers):
            kernel = (5, 5) if i == 0 else (3, 3)
            x = nn.relu(nn.Conv(self.filters, kernel, padding="SAME", dtype=self.dtype)(x))
        return x


class PolicyNetwork(nn.Module):
    """p_σ / p_ρ: planes [B, N, N, C] -> logits [B, N²] (no pass)."""

    layers: int = 13  # convolutional layers in all, the 1 × 1 output layer included
    filters: int = 192
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, planes: jax.Array) -> jax.Array:
        if self.layers < 2:
            raise ValueError(f"the policy network needs at least 2 layers, got {self.layers}")
        b, n, _, _ = planes.shape
        x = Tower(self.layers - 1, self.filters, self.dtype)(planes)
        x = nn.Conv(1, (1, 1), use_bias=False, dtype=self.dtype)(x)  # [B, N, N, 1]
        return PointBias(n * n)(x.reshape(b, n * n).astype(jnp.float32))


class ValueNetwork(nn.Module):
    """v_θ: planes [B, N, N, C] (C = 49 in the paper) -> value [B] in [-1, 1] for the player to move."""

    layers: int = 13  # convolutional layers (the paper's 13: 5 × 5, 11 × 3 × 3, 1 × 1); then the two dense layers
    filters: int = 192
    hidden: int = 256
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, planes: jax.Array) -> jax.Array:
        if self.layers < 2:
            raise ValueError(f"the value network needs at least 2 convolutional layers, got {self.layers}")
        b = planes.shape[0]
        x = Tower(self.layers - 1, self.filters, self.dtype)(planes)
        x = nn.relu(nn.Conv(1, (1, 1), dtype=self.dtype)(x)).reshape(b, -1)
        x = nn.relu(nn.Dense(self.hidden, dtype=self.dtype)(x))
        return jnp.tanh(nn.Dense(1, dtype=self.dtype)(x)[:, 0].astype(jnp.float32))
