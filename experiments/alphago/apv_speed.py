"""Moves per second of APV-MCTS for one game (batch 1) at 400 simulations, by leaves per step under virtual loss
(az_jax/core/virtual_loss.py), on 9×9 and 19×19 with each preset's network shapes (`9x9-cpu`; `19x19`, the
paper's 13 × 192 p_σ and v_θ) and λ = 0.5, so every simulation runs p_σ, v_θ and a p_π rollout to the end of the game.

    python -m experiments.alphago.apv_speed [--sizes 9,19] [--leaves 1,8,16] [--simulations 400] [--moves 2]
        [--plies-per-loop 1,8] [--json experiments/alphago/results/apv_speed_cpu.json]

The weights are random (speed does not depend on what they learnt, except through the length of the rollouts: a
random p_π plays games about as long as a trained one, to the end of the board); p_π's vocabularies have 8,192
response and 32,768 3×3 codes (the 9×9 trained p_π's are smaller; the paper's has 32,207 and 69,338). Each case is
compiled once (its own compile time reported), then searched `--moves` times from the position after 20 random legal
moves; the figure is moves per second over those searches.
"""

import argparse
import json
import platform
import time

import jax
import jax.numpy as jnp

from az_jax.alphago import apv_mcts
from az_jax.alphago import rollout_policy as rollout_lib
from az_jax.alphago.networks import PolicyNetwork, ValueNetwork
from az_jax.alphago.presets import PRESETS
from envs import make_env

PRESET_OF_SIZE = {9: "9x9-cpu", 19: "19x19"}


def random_rollout(key: jax.Array, responses: int = 8192, patterns: int = 32768) -> rollout_lib.RolloutPolicy:
    k1, k2, k3 = jax.random.split(key, 3)

    def vocabulary(k, count):
        return jnp.unique(jax.random.randint(k, (count * 2,), 0, 2**31 - 1, jnp.int32).astype(jnp.uint32))[:count]

    response_vocabulary, pattern_vocabulary = vocabulary(k1, responses), vocabulary(k2, patterns)
    count = rollout_lib.NUM_FIXED + response_vocabulary.shape[0] + pattern_vocabulary.shape[0]
    return rollout_lib.RolloutPolicy(response_vocabulary, pattern_vocabulary, 0.1 * jax.random.normal(k3, (count,)))


def nets_for(size: int, key: jax.Array) -> apv_mcts.Nets:
    preset = PRESETS[PRESET_OF_SIZE[size]]
    policy = PolicyNetwork(layers=preset.sl.layers, filters=preset.sl.filters)
    value = ValueNetwork(layers=preset.value.layers, filters=preset.value.filters, hidden=preset.value.hidden)
    kp, kv, kr = jax.random.split(key, 3)
    return apv_mcts.Nets(
        policy_params=policy.init(kp, jnp.zeros((1, size, size, 48)))["params"],
        value_params=value.init(kv, jnp.zeros((1, size, size, 49)))["params"],
        rollout=random_rollout(kr),
        policy=policy,
        policy_planes=48,
        value=value,
    )


def opening(size: int, key: jax.Array, plies: int = 20):
    """[1, ...] the pgx state after `plies` uniformly random legal moves (not passes) from the empty board."""
    env = make_env(f"go_{size}x{size}")[0]
    step = jax.jit(env.step)  # pgx's step run op by op takes seconds a ply
    state = jax.jit(env.init)(key)
    for _ in range(plies):
        key, k = jax.random.split(key)
        legal = state.legal_action_mask.at[-1].set(False)
        state = step(state, jax.random.choice(k, legal.shape[0], p=legal / legal.sum()))
    return jax.tree.map(lambda x: x[None], state)


def measure(size: int, leaves: int, simulations: int, moves: int, key: jax.Array, plies_per_loop: int = 1) -> dict:
    config = apv_mcts.APVConfig(simulations=simulations, lam=0.5, leaves=leaves, rollout_plies_per_loop=plies_per_loop)
    nets_key, state_key, key = jax.random.split(key, 3)
    nets, states = nets_for(size, nets_key), opening(size, state_key)
    start = time.perf_counter()
    jax.block_until_ready(apv_mcts.search(config, nets, states, jax.random.fold_in(key, 0)).action)
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(moves):
        jax.block_until_ready(apv_mcts.search(config, nets, states, jax.random.fold_in(key, i + 1)).action)
    seconds = (time.perf_counter() - start) / moves
    return dict(
        size=size,
        leaves=leaves,
        rollout_plies_per_loop=plies_per_loop,
        simulations=simulations,
        moves=moves,
        seconds_per_move=round(seconds, 3),
        moves_per_second=round(1 / seconds, 4),
        ms_per_simulation=round(1000 * seconds / simulations, 3),
        first_call_seconds=round(compile_s, 1),
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="9,19")
    parser.add_argument("--leaves", default="1,8,16")
    parser.add_argument("--simulations", type=int, default=400)
    parser.add_argument("--moves", type=int, default=2)
    parser.add_argument("--plies-per-loop", default="1", help="the rollouts' plies per loop iteration, a case each")
    parser.add_argument("--json", default="experiments/alphago/results/apv_speed_cpu.json")
    args = parser.parse_args(argv)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        for leaves in (int(k) for k in args.leaves.split(",")):
            for loop in (int(k) for k in args.plies_per_loop.split(",")):
                row = measure(size, leaves, args.simulations, args.moves, jax.random.key(size), loop)
                print(json.dumps(row), flush=True)
                rows.append(row)
    machine = {
        "devices": str(jax.devices()),
        "device_kind": jax.devices()[0].device_kind,
        "cpu": platform.processor() or platform.machine(),
    }
    with open(args.json, "w") as f:
        json.dump({"machine": machine, "command": "python -m experiments.alphago.apv_speed", "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
