"""One process of tests/test_multihost.py: runs the real `az-jax train` (az_jax.apps.cli.main) with the given arguments,
then saves THIS process's copy of the final TrainState to an .npz, so the test can compare the processes.

    python tests/multihost_worker.py OUT.npz [az-jax arguments ...]

The .npz maps each TrainState leaf's path (jax.tree_util.keystr) to the data of this process's one addressable shard:
a replicated leaf's full value, or this process's rows of a leaf split over the mesh. The hook wraps
az_jax.evaluation.in_training.train only once the CLI has joined the run (importing the training loop
starts JAX's backend).
"""

import sys

import numpy as np

from az_jax.apps import cli  # the CLI joins jax.distributed in cli.main; importing it starts no backend
from az_jax.apps.cli import train as train_command


def save_local_shards(state, path: str) -> None:
    import jax

    arrays = {}
    for key_path, leaf in jax.tree_util.tree_leaves_with_path(state):
        shards = leaf.addressable_shards
        assert len(shards) == 1, f"expected one device per process, got {len(shards)}"
        arrays[jax.tree_util.keystr(key_path)] = np.asarray(shards[0].data)
    np.savez(path, **arrays)  # type: ignore[arg-type]  # numpy's stub: a key could be allow_pickle


def main(out_path: str, argv: list[str]) -> int:
    train = train_command.run

    def train_and_save(args):
        # only once the CLI has joined jax.distributed: importing the training loop starts JAX's backend
        from az_jax.evaluation import in_training

        run = in_training.train

        def run_and_save(*a, **k):
            state = run(*a, **k)
            save_local_shards(state, out_path)
            return state

        in_training.train = run_and_save
        return train(args)

    train_command.run = train_and_save
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
