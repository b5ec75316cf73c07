"""How much of Reanalyse's target change is the search's own noise: a reanalysing run's checkpoint, its stored positions
searched twice by the checkpoint's network with different keys.

    python -m experiments.strength.reanalyse_noise runs/reanalyse/ra8_40min_1core-s0 --step 450 \
        --jsonl experiments/strength/results/reanalyse/noise.jsonl

R trainable rows of the checkpoint's replay (which keeps game states: `reanalyse_batches` > 0) are searched with the
run's self-play search twice, with two keys. Printed, as means over the rows of the total variation ½·Σ|π − π'|:
`twice` between the two new searches (the noise floor: same network, same positions), `stored` between one new search
and the stored target (what `reanalyse/policy_change` logs during training).
"""

import argparse
import json
import sys

import jax
import jax.numpy as jnp

from az_jax.core import iteration as iteration_lib
from az_jax.core import replay as replay_lib
from az_jax.core import selfplay as selfplay_lib
from az_jax.core.devices import make_mesh
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.files import append_jsonl
from az_jax.runtime.trainer import Trainer


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--step", type=int, required=True)
    parser.add_argument("--positions", type=int, default=1024)
    parser.add_argument("--jsonl", default=None, help="a file the result line is appended to")
    args = parser.parse_args(argv)
    manager = ckpt.make_manager(args.run_dir, read_only=True)
    config = ckpt.read_config(manager, args.step)
    if not config.reanalyse_batches:
        print(f"reanalyse_noise: {args.run_dir} does not keep game states (reanalyse_batches=0)", file=sys.stderr)
        return 2
    trainer = Trainer(config, make_mesh(jax.devices()[:1]))
    state = ckpt.restore(manager, args.step, trainer.abstract_state(), config)
    setup = iteration_lib.make_setup(config)
    buffer = state.replay
    rows_key, first_key, second_key = jax.random.split(jax.random.key(0), 3)
    trainable = (buffer.pending | buffer.done).astype(jnp.float32)
    rows = jax.random.choice(rows_key, buffer.capacity, (args.positions,), replace=False, p=trainable / trainable.sum())
    states = jax.tree.map(lambda x: x[rows], buffer.state)
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    chunks = args.positions // config.selfplay_batch_size

    @jax.jit
    def policy(key):
        return selfplay_lib.search_in_chunks(
            setup.apply_fn, setup.env, variables, key, states, setup.selfplay.search, chunks
        )[1]

    first, second = policy(first_key), policy(second_key)
    stored, _ = replay_lib.dense_targets(buffer, rows)
    tv = lambda a, b: float(jnp.mean(0.5 * jnp.abs(a - b).sum(-1)))  # noqa: E731
    out = {
        "run": args.run_dir,
        "step": args.step,
        "positions": args.positions,
        "search": f"{config.search}-{config.num_simulations}",
        "twice": round(tv(first, second), 4),
        "stored": round(tv(first, stored), 4),
    }
    print(json.dumps(out))
    if args.jsonl:
        append_jsonl(args.jsonl, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
