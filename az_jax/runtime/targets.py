"""The accelerators a run can be planned for on a CPU machine: TPU slices and NVIDIA GPUs by the names people rent.

JAX compiles ahead of time for devices it does not have: `jax.experimental.topologies.get_topology_desc` returns the
compile-only devices of a TPU slice (through libtpu, `pip install -e '.[tpu]'`) or of NVIDIA GPUs described by an XLA
GPU target config (through the CUDA plugin, `pip install -e '.[cuda]'`). A Target names those devices and the facts
the plan is checked against: memory per device and the bf16 peak of one device.

Sources of the figures (the vendors' published specifications):
  * TPU: Cloud TPU documentation, "TPU v4", "TPU v5e", "TPU v5p", "TPU v6e" (HBM capacity and peak bf16 compute per
    chip). v4 and v5p run one megacore device per chip (both TensorCores of the chip as one JAX device).
  * GPU: NVIDIA's H100 SXM, A100 80GB SXM and L4 datasheets (memory, streaming multiprocessors, L2, memory bandwidth,
    boost clock, dense bf16 tensor rate). JAX's GPU allocator takes 75% of a GPU's memory by default
    (XLA_PYTHON_CLIENT_MEM_FRACTION), so that is the budget a plan is checked against on a GPU.
"""

import dataclasses
import os
from typing import Any

from az_jax.runtime.platforms import captured_stderr

GB = 10**9
GIB = 2**30


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    """The facts of one NVIDIA GPU an XLA GPU target config needs (gpu_device_info fields)."""

    name: str  # the device name CUDA reports
    compute_capability: tuple[int, int]
    cores: int  # streaming multiprocessors
    memory_bytes: int
    l2_bytes: int
    memory_bandwidth: int  # bytes/s
    clock_ghz: float
    shared_memory_per_core: int
    shared_memory_per_block_optin: int
    threads_per_core: int

    def target_config(self) -> str:
        """An XLA GPU target config (text protobuf of stream_executor's GpuTargetConfigProto) for this GPU."""
        major, minor = self.compute_capability
        return f"""gpu_device_info {{
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: {self.shared_memory_per_core}
  threads_per_core_limit: {self.threads_per_core}
  core_count: {self.cores}
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: {self.memory_bandwidth}
  l2_cache_size: {self.l2_bytes}
  clock_rate_ghz: {self.clock_ghz}
  device_memory_size: {self.memory_bytes}
  shared_memory_per_block_optin: {self.shared_memory_per_block_optin}
  cuda_compute_capability {{ major: {major} minor: {minor} }}
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 10 }}
device_description_str: "{self.name}"
"""


H100 = GpuSpec("NVIDIA H100 80GB HBM3", (9, 0), 132, 80 * GIB, 50 * 2**20, 3_350 * GB, 1.98, 233_472, 232_448, 2048)
A100 = GpuSpec("NVIDIA A100-SXM4-80GB", (8, 0), 108, 80 * GIB, 40 * 2**20, 2_039 * GB, 1.41, 167_936, 166_912, 2048)
L4 = GpuSpec("NVIDIA L4", (8, 9), 58, 24 * GIB, 48 * 2**20, 300 * GB, 2.04, 102_400, 101_376, 1536)


@dataclasses.dataclass(frozen=True)
class Target:
    """A slice or machine by the name people rent it under, and what its devices offer."""

    name: str
    platform: str  # "tpu" or "cuda"
    devices: int  # JAX devices of the whole target (TPU: chips, one megacore device per v4/v5p chip)
    memory_bytes: int  # memory of one device
    peak_bf16_flops: float  # dense bf16 FLOP/s of one device
    topology: str  # get_topology_desc's topology name
    chip_config_name: str | None = None  # "megacore" for v4 and v5p
    single_chip: bool = False  # a 1-chip host (chips_per_host_bounds=(1, 1, 1))
    gpu: GpuSpec | None = None
    about: str = ""

    @property
    def budget_bytes(self) -> int:
        """What one device's programs may use: a TPU's HBM; on a GPU the fraction JAX's allocator takes."""
        if self.platform == "cuda":
            fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
            return int(self.memory_bytes * fraction)
        return self.memory_bytes

    def topology_devices(self) -> list:
        """The compile-only devices of this target (libtpu or the CUDA plugin must be installed)."""
        from jax.experimental import topologies

        if self.platform == "tpu":
            # compile-only: no metadata server to ask, and several processes (pytest -n 2) may load libtpu at once
            os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
            os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
            kwargs: dict[str, Any] = {}
            if self.chip_config_name:
                kwargs["chip_config_name"] = self.chip_config_name
            if self.single_chip:
                kwargs["chips_per_host_bounds"] = (1, 1, 1)
            # libtpu logs its search for a real TPU (none is needed to compile) on stderr when it first loads
            with captured_stderr():
                return list(topologies.get_topology_desc(self.topology, "tpu", **kwargs).devices)
        assert self.gpu is not None
        desc = topologies.get_topology_desc(
            platform="cuda", target_config=self.gpu.target_config(), topology=self.topology
        )
        return list(desc.devices)


def _tpu(name, chips, memory, peak, topology, about, **kw) -> Target:
    return Target(name, "tpu", chips, memory, peak, topology, about=about, **kw)


def _gpu(name, spec: GpuSpec, count: int, peak: float, about: str) -> Target:
    return Target(name, "cuda", count, spec.memory_bytes, peak, f"1x1x{count}", gpu=spec, about=about)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        _tpu("v5litepod-8", 8, 16 * GB, 197e12, "v5e:2x4", "TPU v5e, 8 chips of 16 GB (one host)"),
        _tpu("v5litepod-4", 4, 16 * GB, 197e12, "v5e:2x2", "TPU v5e, 4 chips of 16 GB"),
        _tpu("v5litepod-1", 1, 16 * GB, 197e12, "v5e:1x1", "TPU v5e, one chip (Colab's v5e-1)", single_chip=True),
        _tpu("v4-8", 4, 32 * GIB, 275e12, "v4:2x2x1", "TPU v4, 4 chips of 32 GiB", chip_config_name="megacore"),
        _tpu("v5p-8", 4, 95 * GB, 459e12, "v5:2x2x1", "TPU v5p, 4 chips of 95 GB", chip_config_name="megacore"),
        _tpu("v6e-8", 8, 32 * GB, 918e12, "v6e:2x4", "TPU v6e (Trillium), 8 chips of 32 GB"),
        _tpu("v6e-1", 1, 32 * GB, 918e12, "v6e:1x1", "TPU v6e, one chip (Colab's v6e-1)", single_chip=True),
        _gpu("h100", H100, 1, 989e12, "one NVIDIA H100 SXM 80 GB"),
        _gpu("h100x8", H100, 8, 989e12, "8 NVIDIA H100 SXM 80 GB in one host"),
        _gpu("a100", A100, 1, 312e12, "one NVIDIA A100 SXM 80 GB"),
        _gpu("l4", L4, 1, 121e12, "one NVIDIA L4 24 GB (Colab's L4)"),
    )
}
ALIASES = {"v5e-8": "v5litepod-8", "v5e-4": "v5litepod-4", "v5e-1": "v5litepod-1"}


class UnknownTargetError(ValueError):
    pass


def get_target(name: str) -> Target:
    """The Target called `name` (or an alias); UnknownTargetError listing the known ones."""
    target = TARGETS.get(ALIASES.get(name, name))
    if target is None:
        known = ", ".join([*TARGETS, *ALIASES])
        raise UnknownTargetError(f"unknown target {name!r}; known targets: {known}")
    return target
