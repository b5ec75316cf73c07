"""pgx's own AlphaZero example (examples/alphazero/train.py of https://github.com/sotetsuk/pgx), imported from the
user's checkout and driven the way its main loop drives it; shared by peer_pgx_example.py (speed) and peer_learning.py
(learning). Nothing of the example is copied here: it needs `pip install dm-haiku omegaconf pydantic`."""

import importlib
import os
import sys
import types


def import_example(example_dir: str, overrides: list[str]) -> types.ModuleType:
    """The example's `train` module, configured by `overrides` (its `key=value` command line, which it reads from
    sys.argv when imported). `wandb`, imported by the example for its main loop's logging, is an empty module, and
    `pgx.make_baseline_model`, which only its `evaluate` calls (pgx has no connect_four baseline; the others are
    downloaded), a stub."""
    sys.modules.setdefault("wandb", types.ModuleType("wandb"))
    import pgx

    pgx.make_baseline_model = lambda model_id, *a, **k: None  # type: ignore[assignment]
    sys.path.insert(0, os.path.abspath(example_dir))
    argv, sys.argv = sys.argv, ["train.py", *overrides]
    try:
        return importlib.import_module("train")
    finally:
        sys.argv = argv


def shuffled_minibatches(samples, rng_key, devices: int, batch_size: int):
    """The example's host side between self-play and training: its samples (devices, games, plies, ...) fetched,
    flattened, shuffled and cut into minibatches (updates, devices, batch_size / devices, ...) for its pmapped step.
    Returns (positions generated, number of updates, minibatches); the key is consumed."""
    import jax
    import jax.numpy as jnp

    samples = jax.device_get(samples)
    positions = samples.obs.shape[0] * samples.obs.shape[1] * samples.obs.shape[2]
    samples = jax.tree.map(lambda x: x.reshape((-1, *x.shape[3:])), samples)
    ixs = jax.random.permutation(rng_key, jnp.arange(samples.obs.shape[0]))
    samples = jax.tree.map(lambda x: x[ixs], samples)
    num_updates = samples.obs.shape[0] // batch_size
    minibatches = jax.tree.map(lambda x: x.reshape((num_updates, devices, -1) + x.shape[1:]), samples)
    return positions, num_updates, minibatches
