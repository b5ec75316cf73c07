"""The device boundary: the mesh, and the one helper every sharded program goes through.

Every data-parallel program of az_jax (the training iteration, gating, evaluation matches, the benchmark's pieces, a
population's iteration) is `sharded(fn, mesh, in_specs, out_specs)`: `jax.jit` of `jax.shard_map` over a mesh whose
axis `DEVICE_AXIS` splits games and replay rows over devices. Inside `fn` shapes are per device, replicated values
are identical on every device, and `device_key` / `first_index` give each device its own games.

`check_vma=False` is decided here, once, for two reasons:
  * mctx's internal `while_loop`s are not written for shard_map's varying-axis types;
  * with it, the gradient of a replicated parameter inside `fn` is this device's own, and `learner.train_step`'s
    `pmean` averages it. With `check_vma=True` autodiff would already sum it over the axis and the `pmean` would
    leave D times the mean (tests/test_parallel.py checks 2 devices = 1 device through this helper).
"""

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

DEVICE_AXIS = "d"  # the mesh axis that splits games and replay rows
MAX_AHEAD = 4  # training steps the host may dispatch before the oldest of them has finished (`pace`)


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh with axis DEVICE_AXIS over `devices` (default: every device of every process)."""
    return Mesh(np.asarray(jax.devices() if devices is None else devices), (DEVICE_AXIS,))


def shardings(mesh: Mesh, specs: Any) -> Any:
    """A tree of PartitionSpecs -> the same tree of NamedShardings on `mesh`."""
    return jax.tree.map(lambda spec: NamedSharding(mesh, spec), specs, is_leaf=lambda x: isinstance(x, P))


def sharded(
    fn: Callable, mesh: Mesh, in_specs: Any, out_specs: Any, *, donate_argnums: int | tuple[int, ...] = ()
) -> Callable:
    """`jax.jit(jax.shard_map(fn, ...))` with explicit output shardings (check_vma=False: see the module docstring).

    The output shardings matter on a 1-device mesh: without them jit returns single-device arrays, and the next call,
    whose inputs are those outputs, is a new jit signature (a retrace, though nothing new compiles)."""
    body = jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    return jax.jit(body, out_shardings=shardings(mesh, out_specs), donate_argnums=donate_argnums)


def device_key(rng_key: jax.Array, axis_name: str = DEVICE_AXIS) -> jax.Array:
    """Inside `sharded`: a key of this device's own, `rng_key` folded with the device's index along `axis_name`.
    Replicated keys stay for what must be identical everywhere (network initialisation)."""
    return jax.random.fold_in(rng_key, jax.lax.axis_index(axis_name))


def first_index(local_count: int, axis_name: str = DEVICE_AXIS) -> jax.Array:
    """Inside `sharded`: the global index of this device's first item when each device holds `local_count` of them
    (so game i of the whole match is the same game on any number of devices)."""
    return jax.lax.axis_index(axis_name) * local_count


def pace(pending: Sequence[Any]) -> None:
    """In a loop that dispatches one sharded step after another without reading anything back: waits until the step
    MAX_AHEAD back (`pending` holds every step's outputs, oldest first) has finished.

    Without it the host runs hundreds of steps ahead, which XLA's CPU client cannot always run: each device holds a
    bounded number of computations in flight and their launches are taken from one thread pool in no fixed order, so
    later steps can fill a device's slots while an earlier step waits for that device in its all-reduce, and the
    process aborts after 40 s ("rendezvous ... exceeded"; seen on 2 CPU devices at the first step of a run). Keeping
    MAX_AHEAD steps queued still keeps every backend busy."""
    if len(pending) >= MAX_AHEAD:
        jax.block_until_ready(pending[-MAX_AHEAD])
