"""pgx's own AlphaZero example (examples/alphazero/train.py of https://github.com/sotetsuk/pgx), imported from the
user's checkout and driven the way its main loop drives it; shared by peer_pgx_example.py (speed) and peer_learning.py
(learning). Nothing of the example is copied here: it needs `pip install dm-haiku omegaconf pydantic`."""

import importlib.util
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
    for name in LOCAL_MODULES:  # the modules train.py imports from its own folder, loaded from there by name
        path = os.path.join(os.path.abspath(example_dir), f"{name}.py")
        if name != "train" and os.path.exists(path):
            _load(name, path)
    argv, sys.argv = sys.argv, ["train.py", *overrides]
    try:
        return _load("train", os.path.join(os.path.abspath(example_dir), "train.py"))
    finally:
        sys.argv = argv


LOCAL_MODULES = ("network", "train")  # examples/alphazero/: network.py (AZNet), then train.py, which imports it


def _load(name: str, path: str) -> types.ModuleType:
    """The module at `path`, registered in sys.modules as `name` (so train.py's `from network import ...` finds it)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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
