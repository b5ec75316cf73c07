"""Which backends JAX starts, decided before it starts any: no TPU probe on a machine that has no TPU.

With libtpu installed (`pip install -e '.[preflight]'`, which `make test` installs for its compile-only checks), JAX
tries the TPU backend at every start when JAX_PLATFORMS is unset. On a machine without a TPU, libtpu then queries the
cloud metadata server and prints its initialisation errors ("could not determine TPU accelerator type", "unexpected
worker hostname") before JAX falls back; the CUDA plugin without CUDA's libraries prints a traceback ("Unable to load
cuDNN"). `quiet_start` (called when az_jax is imported) leaves out the platforms this machine has no device for, so
every command starts there as quietly and as fast as without those packages. Where the user chose the
platforms (JAX_PLATFORMS, or jax_platforms set in the program) nothing changes.
"""

import contextlib
import glob
import importlib.util
import os
import tempfile

import jax


def has_tpu_device() -> bool:
    """A TPU is attached: /dev/accel* (TPU v2–v4, v5e on some images) or /dev/vfio/<n> (v5p, v6e)."""
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def has_nvidia_gpu() -> bool:
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def _cuda_plugin_installed() -> bool:
    return any(importlib.util.find_spec(f"jax_plugins.xla_cuda{v}") for v in (12, 13))


def quiet_start() -> str | None:
    """Sets jax_platforms to what this machine can run when an accelerator's compiler is installed without the
    accelerator (libtpu and no TPU; the CUDA plugin and no NVIDIA GPU, where it would print "Unable to load cuDNN").
    Returns the platforms set, or None when it left JAX's own choice."""
    if os.environ.get("JAX_PLATFORMS") or getattr(jax.config, "jax_platforms", None):
        return None
    idle_tpu = importlib.util.find_spec("libtpu") is not None and not has_tpu_device()
    idle_cuda = _cuda_plugin_installed() and not has_nvidia_gpu()
    if not (idle_tpu or idle_cuda):
        return None
    platforms = "tpu," if has_tpu_device() else ""
    platforms += "cuda," if has_nvidia_gpu() and _cuda_plugin_installed() else ""
    platforms += "cpu"
    jax.config.update("jax_platforms", platforms)
    return platforms


@contextlib.contextmanager
def captured_stderr():
    """Captures what C++ libraries write to file descriptor 2 (libtpu's initialisation log) while the block runs;
    yields a list that holds the captured text afterwards."""
    captured: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.append(sink.read().decode(errors="replace"))
