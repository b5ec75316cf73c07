"""Host CPU devices: one JAX device per core, each on one thread.

On the CPU backend XLA makes one device per `jax_num_cpu_devices`, and every device runs its convolutions and matmuls
on a shared Eigen thread pool as wide as the machine. With one device per core, each device's Eigen work then spreads
over every core while the other devices do the same, and the cores are oversubscribed. Giving each device one thread
(`--xla_cpu_multi_thread_eigen=false`) fixes that (measured in experiments/performance/README.md §2). With fewer devices
than cores the pool stays wide, so one device still uses every core for large convolutions.

Both settings must be in place before JAX starts its backend (before any array exists).
"""

import os

import jax

SINGLE_THREAD_FLAG = "--xla_cpu_multi_thread_eigen=false"


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a sweep trial pinned to its share), else all."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def xla_flags(flags: str, count: int, cores: int) -> str:
    """XLA_FLAGS for `count` host devices on `cores` cores: `flags` plus one Eigen thread per device when there is at
    least one device per core, unless `flags` already says how many threads (the user's flags win)."""
    if count >= cores > 1 and "xla_cpu_multi_thread_eigen" not in flags:
        return f"{flags} {SINGLE_THREAD_FLAG}".strip()
    return flags


def setup(count: int | None = None, cores: int | None = None) -> int:
    """Asks JAX for `count` host devices (default: one per available core) and sets XLA_FLAGS by `xla_flags`. Leaves
    everything alone when XLA_FLAGS already sets the device count. Returns the device count asked for (0 when
    XLA_FLAGS decided)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" in flags:
        return 0
    cores = cores or available_cores()
    count = count or cores
    jax.config.update("jax_num_cpu_devices", count)
    os.environ["XLA_FLAGS"] = xla_flags(flags, count, cores)
    return count
