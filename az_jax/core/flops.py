"""FLOPs counted from the network and the number of evaluations, for MFU and for planning a run.

XLA's cost analysis is no guide here: it counts a loop body once (the iteration is loops of plies, simulations and
gradient steps), and a GPU backend counts its cuDNN convolutions as 0 FLOPs. So the count is by hand, 2 FLOPs per
multiply-add, for the network of az_jax/core/networks.py on an [H, W, C_in] observation (with Config.liberty_planes
C_in counts the three planes the network adds):

    stem                 2·H·W·9·C_in·C                               conv 3×3
    residual block       2 · 2·H·W·9·C·C                              two convs 3×3
    global pooling block the same + 2·2g·(C − g)                      and its dense bias layer, g = C // 3
    policy head          2·H·W·C·2 + 2·(2·H·W)·A                      conv 1×1 to 2 planes, dense to A logits
    value head           2·H·W·C + 2·H·W·h + 2·h                      conv 1×1 to 1 plane, dense to h, dense to 1
    ownership head       2·H·W·C                                      conv 1×1 (KataGo's auxiliary head)
    score head           2·h                                          dense on the value head's hidden layer

Every tap of a 3×3 kernel is counted, also where it reads the zero padding at the board's edge (the hardware does
that multiplication too). Batch norm, ReLU and biases are left out (under 1% of the network on any preset). A
training sample costs 3 forwards (the forward, and the backward pass's two products per layer: the input's gradient
and the weights').
"""

from az_jax.core.config import Config
from envs import go_liberties

TRAIN_FORWARDS = 3  # forward + backward (input and weight gradients) per trained sample


def network_forward_flops(config: Config, observation_shape: tuple[int, ...], num_actions: int) -> int:
    """FLOPs of one network evaluation (one position) of `config`'s network."""
    height, width, planes = observation_shape
    planes += go_liberties.PLANES if config.liberty_planes else 0  # computed inside the network (networks.py)
    points, channels, hidden = height * width, config.num_channels, config.value_hidden
    conv3 = lambda c_in, c_out: 2 * points * 9 * c_in * c_out
    flops = conv3(planes, channels)
    for i in range(1, config.num_blocks + 1):
        flops += 2 * conv3(channels, channels)
        if config.global_pooling_every and i % config.global_pooling_every == 0:
            pooled = max(1, channels // 3)
            flops += 2 * (2 * pooled) * (channels - pooled)
    policy = config.policy_head_filters
    flops += 2 * points * channels * policy + 2 * (policy * points) * num_actions  # policy head
    value_outputs = 3 if config.wdl_value else 1  # win/draw/loss logits or the tanh unit
    filters = config.value_head_filters
    flops += 2 * points * channels * filters + 2 * points * filters * hidden + 2 * hidden * value_outputs  # value head
    if config.aux_ownership_weight > 0:
        flops += 2 * points * channels
    if config.aux_score_weight > 0:
        flops += 2 * hidden
    return flops


def mean_simulations_per_ply(config: Config) -> float:
    """Simulations a self-play ply runs on average: `num_simulations`, or with playout cap randomization
    p · num_simulations + (1 − p) · fast_simulations (p = full_search_fraction)."""
    if config.full_search_fraction < 1:
        p = config.full_search_fraction
        return p * config.num_simulations + (1 - p) * config.fast_simulations
    return float(config.num_simulations)


def selfplay_evaluations_per_iteration(config: Config) -> float:
    """Network evaluations of one iteration's self-play: B games × S plies × (simulations + 1: the root and one leaf
    per simulation), the simulations averaged over full and fast plies (`mean_simulations_per_ply`)."""
    return config.selfplay_batch_size * config.selfplay_steps * (mean_simulations_per_ply(config) + 1)


def iteration_flops(config: Config, observation_shape: tuple[int, ...], num_actions: int) -> dict[str, float]:
    """FLOPs of one training iteration, all devices together: self-play's network evaluations and the G gradient
    steps of `batch_size` samples."""
    forward = network_forward_flops(config, observation_shape, num_actions)
    selfplay = selfplay_evaluations_per_iteration(config) * forward
    training = config.train_steps_per_iteration * config.batch_size * TRAIN_FORWARDS * forward
    return {
        "network_forward": float(forward),
        "selfplay": float(selfplay),
        "training": float(training),
        "iteration": float(selfplay + training),
    }


def mfu(flops: float, seconds: float, peak_flops_per_second: float) -> float:
    """Model FLOPs utilisation: FLOPs done in `seconds` over what the peak rate would do in that time."""
    return flops / seconds / peak_flops_per_second
