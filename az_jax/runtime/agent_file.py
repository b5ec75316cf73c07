"""An agent as one small file: a run's config and one set of network weights, nothing else (no optimizer state, no
replay buffer, no games). `az-jax export` writes one from any run; `load_agent` reads one by path, and the agents
that ship in the package (az_jax/agents/NAME.azagent) by NAME.

The file is flax's msgpack encoding (flax.serialization) of

    {"format": FORMAT, "config": the run's config as JSON text, "step": checkpoint, "weights_iteration": iteration,
     "variables": {"params": ..., "batch_stats": ...}}   # arrays as numpy, float32 (or the run's dtype)

which holds arrays and plain values only (no pickle, no code). Reading checks the format tag, that the config parses,
that the weights have exactly the tree, shapes and dtypes that config's network has, and that they are finite.
"""

import os
from importlib import resources

import jax
import numpy as np
from flax import serialization

from az_jax.core import config as config_lib
from az_jax.core import overrides as overrides_lib
from az_jax.core.iteration import init_variables, make_setup
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime import files

FORMAT = "az_jax agent 1"
SUFFIX = ".azagent"
SHIPPED_PACKAGE = "az_jax.agents"


def encode(config: config_lib.Config, variables: dict, step: int, weights_iteration: int) -> bytes:
    """The file's bytes for one agent (variables: {'params', 'batch_stats'} of config's network)."""
    host = jax.tree.map(np.asarray, jax.device_get(dict(variables)))
    return serialization.msgpack_serialize(
        {
            "format": FORMAT,
            "config": config.to_json(),
            "step": int(step),
            "weights_iteration": int(weights_iteration),
            "variables": serialization.to_state_dict(host),
        }
    )


def write(path: str, config: config_lib.Config, variables: dict, step: int, weights_iteration: int) -> int:
    """Writes the agent file at `path` (atomically: a whole file or none) and returns its size in bytes.

    An existing file is never replaced: CheckpointError."""
    if os.path.exists(path):
        raise ckpt.CheckpointError(f"{path} exists; export to a new file (nothing was written)")
    data = encode(config, variables, step, weights_iteration)
    with files.replaced_whole_bytes(path) as f:
        f.write(data)
    return len(data)


def decode(data: bytes, where: str) -> tuple[config_lib.Config, dict, int, int]:
    """(config, variables as numpy, step, weights_iteration) of an agent file's bytes, checked (see the module doc);
    CheckpointError naming `where` otherwise."""
    try:
        raw = serialization.msgpack_restore(data)
    except Exception as e:  # msgpack raises several types for truncated or foreign bytes
        raise ckpt.CheckpointError(f"{where} is not an az_jax agent file ({type(e).__name__})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise ckpt.CheckpointError(f"{where} is not an az_jax agent file (format {found!r}, expected {FORMAT!r})")
    try:
        config = overrides_lib.from_json(raw["config"])
    except (KeyError, config_lib.ConfigError, TypeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ckpt.CheckpointError(f"{where}: its config does not parse ({first})") from None
    setup = make_setup(config)  # outside eval_shape: pgx makes its first state at import, which must not be traced
    abstract = jax.eval_shape(lambda: init_variables(setup, jax.random.key(0)))
    variables = raw.get("variables")
    if not isinstance(variables, dict):
        raise ckpt.CheckpointError(f"{where} has no weights")
    _check_tree(dict(abstract), variables, where)
    bad = ckpt.nonfinite_leaves(variables)
    if bad:
        raise ckpt.CheckpointError(f"{where}: weights are not finite at {', '.join(bad[:3])}")
    return config, variables, int(raw.get("step", 0)), int(raw.get("weights_iteration", 0))


def _check_tree(abstract: dict, variables: dict, where: str) -> None:
    want = {jax.tree_util.keystr(p): (s.shape, s.dtype) for p, s in jax.tree_util.tree_leaves_with_path(abstract)}
    have = {jax.tree_util.keystr(p): (v.shape, v.dtype) for p, v in jax.tree_util.tree_leaves_with_path(variables)}
    if want.keys() != have.keys():
        odd = sorted(want.keys() ^ have.keys())
        raise ckpt.CheckpointError(f"{where}: weights do not match its config's network (at {', '.join(odd[:3])})")
    for k, (shape, dtype) in want.items():
        if have[k] != (shape, dtype):
            raise ckpt.CheckpointError(
                f"{where}: weight {k} is {have[k][1]}{list(have[k][0])}, its config's network has {dtype}{list(shape)}"
            )


def read(path: str) -> tuple[config_lib.Config, dict, int, int]:
    """`decode` of the file at `path`; CheckpointError if it does not read."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ckpt.CheckpointError(f"cannot read agent file {path}: {e.strerror or e}") from None
    return decode(data, path)


def shipped() -> dict[str, str]:
    """{name: path} of the agents in the package (az_jax/agents/*.azagent)."""
    folder = resources.files(SHIPPED_PACKAGE)
    return {
        entry.name[: -len(SUFFIX)]: str(entry)
        for entry in folder.iterdir()
        if entry.name.endswith(SUFFIX) and entry.is_file()
    }


def is_agent_file(path: str) -> bool:
    return path.endswith(SUFFIX) and os.path.isfile(path)
