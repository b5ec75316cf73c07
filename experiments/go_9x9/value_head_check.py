"""Is a go_9x9 run's value head alive? From one checkpoint: the game results in its replay buffer by the colour to
move, the root search values stored with them (kept when `value_target_mix` > 0), and the network's own value on
the first positions of the buffer (their mean and spread: a spread of 0 is a dead head, one output for every board),
and the share of the policy and value heads' convolution units (after batch norm, before the ReLU) that are positive
on those positions: 0 is a head whose ReLU passes nothing, so no gradient reaches the head's convolution again.

    python -m experiments.go_9x9.value_head_check RUN_DIR STEP [--positions 512] [--json OUT]

Run with the devices the run was trained on (XLA_FLAGS=--xla_force_host_platform_device_count=2 for a 2-device
run): the buffer is restored in its shards.
"""

import argparse
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from az_jax.core.devices import make_mesh
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime import files
from az_jax.runtime.trainer import Trainer


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("step", type=int)
    parser.add_argument("--positions", type=int, default=512)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    manager = ckpt.make_manager(args.run_dir, read_only=True)
    config = ckpt.read_config(manager, args.step)
    trainer = Trainer(config, make_mesh())
    state = ckpt.restore(manager, args.step, trainer.abstract_state(), config)
    buffer = jax.tree.map(np.asarray, state.replay)
    done = buffer.done
    z = buffer.outcome[done]
    white = buffer.observation[done][:, 0, 0, 16].astype(bool)  # pgx go's colour plane: 1 when White is to move
    out = {"run_dir": args.run_dir, "step": args.step, "positions_with_outcome": int(done.sum())}
    out["z_white_to_move"], out["z_black_to_move"] = float(z[white].mean()), float(z[~white].mean())
    if buffer.search_value is not None:
        v = buffer.search_value[done]
        out.update(search_value_mean=float(v.mean()), search_value_std=float(v.std()))
        out["search_value_corr_with_z"] = float(np.corrcoef(z, v)[0, 1])
    observation = jnp.asarray(buffer.observation[done][: args.positions], jnp.float32)
    variables = {"params": jax.device_get(state.params), "batch_stats": jax.device_get(state.batch_stats)}
    (_, value, *_), captured = trainer.setup.network.apply(
        variables, observation, train=False, capture_intermediates=True, mutable=["intermediates"]
    )
    value = np.asarray(value)
    # the network's top-level batch norms in order: the stem's, the policy head's (2 filters), the value head's (1)
    norms = captured["intermediates"]
    for head, name in (("policy", "BatchNorm_1"), ("value", "BatchNorm_2")):
        out[f"{head}_head_units_positive"] = float((np.asarray(norms[name]["__call__"][0]) > 0).mean())
    shown = white[: args.positions]
    out.update(
        network_value_white_to_move=float(value[shown].mean()),
        network_value_black_to_move=float(value[~shown].mean()),
        network_value_std=float(value.std()),
        network_positions=int(value.shape[0]),
    )
    print(json.dumps(out))
    if args.json:
        files.append_jsonl(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
