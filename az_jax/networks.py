"""The AlphaGo Zero / AlphaZero dual-head residual network (paper-spec.md §2.2, §3.3).

Input is a batch of pgx observations [B, H, W, C] (bool or float), already from the mover's point of view. Output is
(policy logits [B, A] over all actions, value [B] in [-1, 1] for the player to move). Illegal actions are masked by the
caller (search.py, learner.py), never here.
"""
from typing import Any

import flax.linen as nn
import jax.numpy as jnp


class ResidualBlock(nn.Module):
    """conv 3×3 → BN → ReLU → conv 3×3 → BN → + input → ReLU."""
    channels: int
    dtype: Any
    axis_name: str | None

    @nn.compact
    def __call__(self, x, train: bool):
        conv = lambda: nn.Conv(self.channels, (3, 3), use_bias=False, dtype=self.dtype)
        bn = lambda: nn.BatchNorm(use_running_average=not train, axis_name=self.axis_name, dtype=self.dtype)
        y = nn.relu(bn()(conv()(x)))
        y = bn()(conv()(y))
        return nn.relu(x + y)


class AlphaZeroNet(nn.Module):
    num_actions: int
    num_blocks: int = 19          # residual blocks after the stem (paper: 19 → the "20-block" network)
    channels: int = 256
    value_hidden: int = 256
    dtype: Any = jnp.float32      # compute dtype; parameters are always float32
    axis_name: str | None = None  # device axis for cross-device batch norm while learning (None: local batch)

    @nn.compact
    def __call__(self, obs, train: bool = False):
        """obs: [B, H, W, C] → (logits [B, A] float32, value [B] float32)."""
        bn = lambda: nn.BatchNorm(use_running_average=not train, axis_name=self.axis_name, dtype=self.dtype)
        x = obs.astype(self.dtype)
        x = nn.relu(bn()(nn.Conv(self.channels, (3, 3), use_bias=False, dtype=self.dtype)(x)))
        for _ in range(self.num_blocks):
            x = ResidualBlock(self.channels, self.dtype, self.axis_name)(x, train)
        batch = x.shape[0]
        # Policy head: conv 1×1 (2 filters) → BN → ReLU → FC to the action logits.
        p = nn.relu(bn()(nn.Conv(2, (1, 1), use_bias=False, dtype=self.dtype)(x)))
        logits = nn.Dense(self.num_actions, dtype=self.dtype)(p.reshape(batch, -1))
        # Value head: conv 1×1 (1 filter) → BN → ReLU → FC hidden → ReLU → FC 1 → tanh.
        v = nn.relu(bn()(nn.Conv(1, (1, 1), use_bias=False, dtype=self.dtype)(x)))
        v = nn.relu(nn.Dense(self.value_hidden, dtype=self.dtype)(v.reshape(batch, -1)))
        v = jnp.tanh(nn.Dense(1, dtype=self.dtype)(v))
        return logits.astype(jnp.float32), v[:, 0].astype(jnp.float32)


def make_network(config, num_actions: int, axis_name: str | None = None) -> AlphaZeroNet:
    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[config.compute_dtype]
    return AlphaZeroNet(num_actions=num_actions, num_blocks=config.num_blocks, channels=config.num_channels,
                        value_hidden=config.value_hidden, dtype=dtype, axis_name=axis_name)
