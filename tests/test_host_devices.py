"""One Eigen thread per host device when there is a device per core; the user's XLA_FLAGS win."""

from az_jax.runtime.host_devices import SINGLE_THREAD_FLAG, xla_flags


def test_one_thread_per_device_only_with_a_device_per_core():
    assert xla_flags("", count=2, cores=2) == SINGLE_THREAD_FLAG
    assert xla_flags("", count=4, cores=2) == SINGLE_THREAD_FLAG
    # Fewer devices than cores: the one device keeps the wide pool (large convolutions use every core).
    assert xla_flags("", count=1, cores=2) == ""
    # One core: nothing to oversubscribe.
    assert xla_flags("", count=1, cores=1) == ""
    # Other flags are kept; a thread setting of the user's is not overridden.
    assert xla_flags("--xla_dump_to=/tmp/x", 2, 2) == f"--xla_dump_to=/tmp/x {SINGLE_THREAD_FLAG}"
    assert xla_flags("--xla_cpu_multi_thread_eigen=true", 2, 2) == "--xla_cpu_multi_thread_eigen=true"
