"""Several processes (hosts) training one run: `jax.distributed` set-up and the few multi-process helpers.

JAX's multi-controller model: the same program runs in every process; each process owns its local devices, and the
mesh, the jitted iteration and its collectives span the devices of all processes (`jax.devices()`). So a run on N
processes is the same run as on one process with all the devices, except that a value sharded over the mesh is only
partly in each process's memory (`fetch`), and files are written by one process (`is_main_process`) or, for
checkpoints, by all of them through orbax, which coordinates them over the distributed runtime.

Like `jax_num_cpu_devices`, `initialize` must run before JAX starts its backend (before any array exists; importing
pgx creates arrays). Imports only jax.
"""

import dataclasses
import os
from collections.abc import Mapping

import jax
from jax.experimental import multihost_utils

# Settings not given as arguments are read from these (`az-jax train` flags default to them).
ENV_COORDINATOR = "AZ_JAX_COORDINATOR"  # HOST:PORT of process 0's coordinator service
ENV_NUM_PROCESSES = "AZ_JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "AZ_JAX_PROCESS_ID"
JAX_ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"  # JAX's own name for the coordinator, also accepted


class DistributedError(ValueError):
    """Multi-process settings that are incomplete or invalid."""


@dataclasses.dataclass(frozen=True)
class ProcessSettings:
    """Where this process sits in a multi-process run; None = not given (JAX may detect it from the cluster)."""

    coordinator_address: str | None = None  # "HOST:PORT" of process 0
    num_processes: int | None = None
    process_id: int | None = None  # 0 .. num_processes - 1; process 0 runs the coordinator


def _int_setting(value, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise DistributedError(f"{name} must be an integer, got {value!r}") from None


def resolve_settings(
    coordinator_address: str | None = None,
    num_processes: int | str | None = None,
    process_id: int | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ProcessSettings:
    """Arguments first, then AZ_JAX_COORDINATOR (or JAX_COORDINATOR_ADDRESS), AZ_JAX_NUM_PROCESSES and
    AZ_JAX_PROCESS_ID from `environ` (default os.environ)."""
    env = os.environ if environ is None else environ
    return ProcessSettings(
        coordinator_address=coordinator_address or env.get(ENV_COORDINATOR) or env.get(JAX_ENV_COORDINATOR) or None,
        num_processes=_int_setting(
            num_processes if num_processes is not None else env.get(ENV_NUM_PROCESSES), "the number of processes"
        ),
        process_id=_int_setting(process_id if process_id is not None else env.get(ENV_PROCESS_ID), "the process id"),
    )


def detect_cluster(environ: Mapping[str, str] | None = None) -> str | None:
    """The launcher whose environment `jax.distributed.initialize()` reads by itself, or None.

    Mirrors the detectors in jax/_src/clusters (jax 0.10): a Cloud TPU VM (worker list from the GCE metadata server,
    or TPU_WORKER_HOSTNAMES / TPU_PROCESS_ADDRESSES on GKE), a SLURM job step of several tasks, an Open MPI launch
    of several ranks. A single SLURM task or MPI rank is an ordinary single-process run."""
    env = os.environ if environ is None else environ
    if env.get("TPU_WORKER_HOSTNAMES") or env.get("TPU_PROCESS_ADDRESSES"):
        return "cloud-tpu"
    # Set by `import jax` when it finds TPU chips and libtpu (jax/_src/cloud_tpu_init.py); JAX then asks the GCE
    # metadata server for the slice's workers, unless TPU_SKIP_MDS_QUERY says there is none.
    try:
        from jax._src import cloud_tpu_init  # private: JAX has no public "am I on a Cloud TPU VM"

        on_tpu_vm = bool(getattr(cloud_tpu_init, "running_in_cloud_tpu_vm", False))
    except ImportError:
        on_tpu_vm = False
    if on_tpu_vm and "TPU_SKIP_MDS_QUERY" not in env:
        return "cloud-tpu"
    slurm = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")
    if all(k in env for k in slurm) and (_int_setting(env["SLURM_NTASKS"], "SLURM_NTASKS") or 0) > 1:
        return "slurm"
    if (
        "OMPI_MCA_orte_hnp_uri" in env
        and (_int_setting(env.get("OMPI_COMM_WORLD_SIZE"), "OMPI_COMM_WORLD_SIZE") or 1) > 1
    ):
        return "open-mpi"
    return None


def validate(settings: ProcessSettings, cluster: str | None) -> None:
    """Raises DistributedError unless the settings are complete (or a detected cluster completes them) and valid."""
    given = dataclasses.astuple(settings)
    if cluster is None and any(v is not None for v in given) and any(v is None for v in given):
        raise DistributedError(
            "a multi-process run needs all of --coordinator HOST:PORT, --num-processes N and --process-id I "
            f"(or {ENV_COORDINATOR}, {ENV_NUM_PROCESSES}, {ENV_PROCESS_ID}); got "
            + ", ".join(f"{f.name}={v!r}" for f, v in zip(dataclasses.fields(settings), given))
        )
    if settings.coordinator_address is not None:
        host, sep, port = settings.coordinator_address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise DistributedError(f"the coordinator must be HOST:PORT, got {settings.coordinator_address!r}")
    if settings.num_processes is not None and settings.num_processes < 1:
        raise DistributedError(f"the number of processes must be at least 1, got {settings.num_processes}")
    if (
        settings.process_id is not None
        and settings.num_processes is not None
        and not (0 <= settings.process_id < settings.num_processes)
    ):
        raise DistributedError(f"the process id must be in 0..{settings.num_processes - 1}, got {settings.process_id}")


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    local_device_count: int | None = None,
    *,
    initialization_timeout: int = 300,
) -> bool:
    """Joins this process to a multi-process run, before JAX's backend starts; True if it did.

    Unset arguments are read from the environment (`resolve_settings`). With none given anywhere, a launcher JAX
    detects by itself (a Cloud TPU pod slice, a SLURM or Open MPI job; `detect_cluster`) gets
    `jax.distributed.initialize()` with no arguments; otherwise the run is single-process and nothing happens.

    `local_device_count` sets this process's host CPU devices (`jax_num_cpu_devices`; CPU backend only). Collectives
    between processes on CPU go through gloo over TCP (`jax_cpu_collectives_implementation`, also jax's default);
    GPUs use NCCL and TPUs their interconnect whatever it says."""
    if local_device_count is not None:
        jax.config.update("jax_num_cpu_devices", local_device_count)
    settings = resolve_settings(coordinator_address, num_processes, process_id)
    cluster = detect_cluster()
    validate(settings, cluster)
    if cluster is None and settings.coordinator_address is None:
        return False
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        settings.coordinator_address,
        settings.num_processes,
        settings.process_id,
        initialization_timeout=initialization_timeout,
    )
    return True


def is_main_process() -> bool:
    """True in the process that writes logs, metrics and config.json (process 0; always True in a 1-process run)."""
    return jax.process_index() == 0


def fetch(tree):
    """Host (NumPy) copy of a pytree of arrays, including arrays sharded over devices of other processes.

    Replicated and process-local arrays are copied from this process's devices; an array split over the devices of
    several processes is gathered with `process_allgather`, a collective: every process must call `fetch` on the
    same tree at the same point of the program."""

    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated:
            return multihost_utils.process_allgather(x, tiled=True)
        return jax.device_get(x)

    return jax.tree.map(one, tree)
