"""The AlphaGo Zero / AlphaZero dual-head residual network (AlphaGo Zero, Silver et al., Nature 2017, Methods, "Neural
network architecture"; AlphaZero, Silver et al., Science 2018).

Input is a batch of pgx observations [B, H, W, C] (bool or float), already from the mover's point of view. Output is
(policy logits [B, A] over all actions, value [B] in [-1, 1] for the player to move). Illegal actions are masked by the
caller (search.py, learner.py), never here.

With KataGo's auxiliary heads (Wu, "Accelerating Self-Play Learning in Go", 2019, section "Auxiliary Ownership and Score
Targets"; Config.aux_ownership_weight, aux_score_weight) the network also predicts, for the player to move, who owns
each point at the end of the game and the final score margin. They exist only when switched on, are returned only to
the learner (`aux=True`: acting never reads them, so XLA drops them from the search's program), and leave the policy
and value outputs as they are (their losses do train the shared trunk, and the score's the value head's hidden layer).

With a win/draw/loss value head (Config.value_head = "wdl"; not in the papers) the value head's last layer has three
outputs, the logits of the mover's win, draw and loss, and the value is P(win) − P(loss), still in [−1, 1]: the search
reads it as it reads the tanh unit's; the learner also gets the three logits (`aux=True`) for its cross-entropy.
"""

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import lax

from az_jax.core import conv as conv_lib
from envs import get_game


class ResidualBlock(nn.Module):
    """conv 3×3 → BN → ReLU → conv 3×3 → BN → + input → ReLU."""

    channels: int
    dtype: Any
    axis_name: str | None
    conv: Callable = lax.conv_general_dilated

    @nn.compact
    def __call__(self, x, train: bool):
        conv = lambda: nn.Conv(self.channels, (3, 3), use_bias=False, dtype=self.dtype, conv_general_dilated=self.conv)
        bn = lambda: nn.BatchNorm(use_running_average=not train, axis_name=self.axis_name, dtype=self.dtype)
        y = nn.relu(bn()(conv()(x)))
        y = bn()(conv()(y))
        return nn.relu(x + y)


class GlobalPoolingBlock(nn.Module):
    """A residual block with KataGo's global pooling bias structure (Wu 2019, §4.1 and Appendix A): the first conv's
    output is split into X (C − g channels) and G (g channels); G → BN → ReLU → its mean and max over the board
    ([B, 2g]) → a dense layer → one bias per channel of X, added everywhere on the board. Then X → BN → ReLU → conv
    3×3 back to C channels → BN → + input → ReLU. Every cell of the output thereby sees the whole board, which stacked
    3×3 convolutions only do after many blocks. (KataGo also pools the mean scaled by board width, for nets that play
    several board sizes; az_jax's nets play one.)"""

    channels: int
    pooled: int  # g
    dtype: Any
    axis_name: str | None
    conv: Callable = lax.conv_general_dilated

    @nn.compact
    def __call__(self, x, train: bool):
        conv = lambda c: nn.Conv(c, (3, 3), use_bias=False, dtype=self.dtype, conv_general_dilated=self.conv)
        bn = lambda: nn.BatchNorm(use_running_average=not train, axis_name=self.axis_name, dtype=self.dtype)
        y = conv(self.channels)(x)
        regular, pool = y[..., : self.channels - self.pooled], y[..., self.channels - self.pooled :]
        pool = nn.relu(bn()(pool))  # [B, H, W, g]
        features = jnp.concatenate([pool.mean(axis=(1, 2)), pool.max(axis=(1, 2))], axis=-1)  # [B, 2g]
        bias = nn.Dense(self.channels - self.pooled, dtype=self.dtype)(features)  # [B, C − g]
        regular = nn.relu(bn()(regular + bias[:, None, None, :]))
        y = bn()(conv(self.channels)(regular))
        return nn.relu(x + y)


class AlphaZeroNet(nn.Module):
    num_actions: int
    num_blocks: int = 19  # residual blocks after the stem (paper: 19 → the "20-block" network)
    channels: int = 256
    value_hidden: int = 256
    value_filters: int = 1  # the value head's 1×1 convolution (AGZ: 1 filter; Config.value_head_filters)
    policy_filters: int = 2  # the policy head's 1×1 convolution (AGZ: 2 filters; Config.policy_head_filters)
    dtype: Any = jnp.float32  # compute dtype; parameters are always float32
    axis_name: str | None = None  # device axis for cross-device batch norm while learning (None: local batch)
    conv: Callable = lax.conv_general_dilated  # the convolution (same forward pass; see make_network)
    # every k-th residual block (k, 2k, ...) is a GlobalPoolingBlock pooling channels // 3 of its channels (KataGo's
    # b6c96 pools 32 of 96); 0: none, the papers' network
    global_pooling_every: int = 0
    # KataGo's ownership head: the trunk → conv 1×1 (1 filter, bias) → one logit per point, ownership = tanh(logit)
    # ∈ [−1, 1] for the player to move
    ownership_head: bool = False
    # KataGo's score head, simplified: one linear unit on the value head's hidden layer, the final score margin for the
    # player to move divided by the board's H·W points (KataGo predicts a distribution over scores; a scalar
    # regression of the scaled margin stands in for it here)
    score_head: bool = False
    # the value head's last layer: 3 logits of the mover's win / draw / loss, value = P(win) − P(loss)
    # (Config.value_head "wdl"); False: one unit → tanh, the papers'
    wdl_value: bool = False
    # recompute each residual block in the backward pass (flax's lifted jax.checkpoint; Config.remat)
    remat: bool = False
    # extra input planes computed from the observation and stacked onto it (Config.liberty_planes: the game's
    # GameSpec.liberty_planes, [B, H, W, C] -> [B, H, W, k]); None: the observation alone, the papers' input
    input_planes: Callable | None = None

    @nn.compact
    def __call__(self, obs, train: bool = False, aux: bool = False):
        """obs: [B, H, W, C] → (logits [B, A] float32, value [B] float32); with `aux` also the auxiliary heads'
        (ownership logits [B, H·W] float32, score [B] float32) and the value head's win/draw/loss logits [B, 3] float32,
        each None where the network has no such head."""
        bn = lambda: nn.BatchNorm(use_running_average=not train, axis_name=self.axis_name, dtype=self.dtype)
        x = obs.astype(self.dtype)
        if self.input_planes is not None:
            x = jnp.concatenate([x, self.input_planes(obs).astype(self.dtype)], axis=-1)  # [B, H, W, C + k]
        conv = lambda features, size: nn.Conv(
            features, size, use_bias=False, dtype=self.dtype, conv_general_dilated=self.conv
        )
        x = nn.relu(bn()(conv(self.channels, (3, 3))(x)))
        # `train` (argument 2, counting the module) is a Python bool: static under remat
        residual = nn.remat(ResidualBlock, static_argnums=(2,)) if self.remat else ResidualBlock
        pooling = nn.remat(GlobalPoolingBlock, static_argnums=(2,)) if self.remat else GlobalPoolingBlock
        counts = {"ResidualBlock": 0, "GlobalPoolingBlock": 0}  # flax's own names, kept under remat
        for i in range(1, self.num_blocks + 1):
            if self.global_pooling_every and i % self.global_pooling_every == 0:
                pooled = max(1, self.channels // 3)
                name = f"GlobalPoolingBlock_{counts['GlobalPoolingBlock']}"
                counts["GlobalPoolingBlock"] += 1
                x = pooling(self.channels, pooled, self.dtype, self.axis_name, self.conv, name=name)(x, train)
            else:
                name = f"ResidualBlock_{counts['ResidualBlock']}"
                counts["ResidualBlock"] += 1
                x = residual(self.channels, self.dtype, self.axis_name, self.conv, name=name)(x, train)
        batch = x.shape[0]
        # Policy head: conv 1×1 (2 filters; F with policy_filters) → BN → ReLU → FC to the action logits.
        p = nn.relu(bn()(conv(self.policy_filters, (1, 1))(x)))  # [B, H, W, F]
        logits = nn.Dense(self.num_actions, dtype=self.dtype)(p.reshape(batch, -1))
        # Value head: conv 1×1 (1 filter; F with value_filters) → BN → ReLU → FC hidden → ReLU → FC 1 → tanh (or FC 3
        # → win/draw/loss).
        v = nn.relu(bn()(conv(self.value_filters, (1, 1))(x)))  # [B, H, W, F]
        hidden = nn.relu(nn.Dense(self.value_hidden, dtype=self.dtype)(v.reshape(batch, -1)))
        wdl = None
        if self.wdl_value:
            wdl = nn.Dense(3, dtype=self.dtype)(hidden).astype(jnp.float32)  # [B, 3]
            p = jax.nn.softmax(wdl)
            v = (p[:, 0] - p[:, 2])[:, None]
        else:
            v = jnp.tanh(nn.Dense(1, dtype=self.dtype)(hidden))
        # The auxiliary heads come last and are named, so the papers' modules keep their names and initial values.
        ownership = score = None
        if self.ownership_head:
            own = nn.Conv(1, (1, 1), dtype=self.dtype, conv_general_dilated=self.conv, name="ownership_head")(x)
            ownership = own.reshape(batch, -1).astype(jnp.float32)
        if self.score_head:
            score = nn.Dense(1, dtype=self.dtype, name="score_head")(hidden)[:, 0].astype(jnp.float32)
        outputs = logits.astype(jnp.float32), v[:, 0].astype(jnp.float32)
        return (*outputs, ownership, score, wdl) if aux else outputs


def make_network(config, num_actions: int, axis_name: str | None = None, platform: str | None = None) -> AlphaZeroNet:
    """The network of `config` for devices of `platform` (default: JAX's default backend). On CPU its convolutions
    take az_jax/core/conv.py's gradient, which XLA:CPU runs at full speed inside the learner's `lax.scan` of gradient
    steps (same values; experiments/performance/README.md §4); accelerators keep JAX's own, also when the program is
    compiled for them on a CPU machine (`az-jax preflight`)."""
    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[config.compute_dtype]
    platform = platform or jax.default_backend()
    conv = conv_lib.conv_general_dilated if platform == "cpu" else lax.conv_general_dilated
    return AlphaZeroNet(
        num_actions=num_actions,
        num_blocks=config.num_blocks,
        channels=config.num_channels,
        value_hidden=config.value_hidden,
        value_filters=config.value_head_filters,
        policy_filters=config.policy_head_filters,
        dtype=dtype,
        axis_name=axis_name,
        conv=conv,
        global_pooling_every=config.global_pooling_every,
        ownership_head=config.aux_ownership_weight > 0,
        score_head=config.aux_score_weight > 0,
        wdl_value=config.wdl_value,
        remat=config.remat,
        input_planes=get_game(config.game).liberty_planes if config.liberty_planes else None,
    )
