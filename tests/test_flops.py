"""az_jax/core/flops.py: the network's FLOPs counted by hand on tiny networks, the iteration's from the evaluations."""

import dataclasses

from az_jax.core import config as config_lib
from az_jax.core import flops
from az_jax.core import presets as presets_lib


def _tiny(**changes) -> config_lib.Config:
    base = presets_lib.preset("tic_tac_toe", "small")
    return dataclasses.replace(base, num_blocks=1, num_channels=4, value_hidden=8, **changes)


def test_forward_flops_of_a_tiny_network_by_hand():
    # tic-tac-toe: 3×3 board (9 points), 2 input planes, 9 actions; 1 block of 4 channels, value hidden 8.
    #   stem       2·9·9·2·4           =   1,296
    #   block      2 · (2·9·9·4·4)     =   5,184
    #   policy     2·9·4·2 + 2·18·9    =     144 + 324 = 468
    #   value      2·9·4 + 2·9·8 + 2·8 =      72 + 144 + 16 = 232
    #   total                          =   7,180
    assert flops.network_forward_flops(_tiny(), (3, 3, 2), 9) == 7_180


def test_auxiliary_heads_and_global_pooling_add_their_layers():
    # ownership conv 1×1: 2·9·4 = 72; score dense on the hidden layer: 2·8 = 16
    aux = _tiny(aux_ownership_weight=1.0, aux_score_weight=1.0)
    assert flops.network_forward_flops(aux, (3, 3, 2), 9) == 7_180 + 72 + 16
    # global pooling in block 1: g = 4 // 3 = 1, dense 2g → C − g: 2·2·3 = 12
    pooled = _tiny(global_pooling_every=1)
    assert flops.network_forward_flops(pooled, (3, 3, 2), 9) == 7_180 + 12
    # a win/draw/loss value head: its last dense layer 8 → 3 instead of 8 → 1, 2·8·3 − 2·8 = 32 more
    assert flops.network_forward_flops(_tiny(value_head="wdl"), (3, 3, 2), 9) == 7_180 + 32
    # 3 value filters: the 1×1 conv 2·9·4·3 = 216 instead of 72 (+144), the hidden layer reads 9·3 = 27 inputs:
    # 2·27·8 = 432 instead of 144 (+288)
    assert flops.network_forward_flops(_tiny(value_head_filters=3), (3, 3, 2), 9) == 7_180 + 144 + 288
    # 5 policy filters: the 1×1 conv 2·9·4·5 = 360 instead of 144 (+216), the logits' layer reads 9·5 = 45 inputs:
    # 2·45·9 = 810 instead of 324 (+486)
    assert flops.network_forward_flops(_tiny(policy_head_filters=5), (3, 3, 2), 9) == 7_180 + 216 + 486


def test_iteration_flops_from_evaluations_and_gradient_steps():
    # 8 games × 9 plies × (4 + 1) evaluations = 360 forwards; G = round(4 · 8·9 / 16) = 18 steps of 16 samples,
    # 3 forwards each: 864 forwards; 7,180 FLOPs a forward
    config = dataclasses.replace(
        _tiny(), num_simulations=4, selfplay_batch_size=8, selfplay_steps=9, batch_size=16, train_ratio=4.0
    )
    counted = flops.iteration_flops(config, (3, 3, 2), 9)
    assert counted["selfplay"] == 360 * 7_180
    assert counted["training"] == 864 * 7_180
    assert counted["iteration"] == (360 + 864) * 7_180
    # playout cap: a quarter of plies at 4 simulations (5 evaluations), the rest at 1 (2 evaluations): 8·9·2.75 = 198
    capped = dataclasses.replace(config, full_search_fraction=0.25, fast_simulations=1)
    assert flops.selfplay_evaluations_per_iteration(capped) == 198
    # the perf figures' simulations a ply: 0.25 · 4 + 0.75 · 1 = 1.75 (the uncapped config: 4)
    assert flops.mean_simulations_per_ply(capped) == 1.75
    assert flops.mean_simulations_per_ply(config) == 4.0


def test_paper_go_network_is_about_the_known_size():
    # 19×19, 17 planes, 19 blocks × 256: 39 convolutions 3×3, 38 of them 256 → 256: 38 · 2·361·9·256² = 16.18 GFLOP,
    # the stem 2·361·9·17·256 = 28 MFLOP, the heads ~0.5 MFLOP + 2·722·362 = 0.5 MFLOP: 16.2 GFLOP a position
    config = presets_lib.preset("go_19x19", "paper")
    assert abs(flops.network_forward_flops(config, (19, 19, 17), 362) / 1e9 - 16.21) < 0.01
