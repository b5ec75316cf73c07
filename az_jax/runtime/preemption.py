"""Preemption: SIGTERM stops a run at the end of the iteration in flight, with a checkpoint of that iteration.

Spot and preemptible TPU VMs, Kubernetes and SLURM at the end of a job send SIGTERM with seconds to spare (a TPU VM:
30 s). The iteration in flight cannot be abandoned for the one before it: its input state was donated to it
(Trainer.iterate), so the last complete state is the one it is computing. `StopOnSigterm` turns SIGTERM into a flag;
the loop reads it after each iteration's line, saves that iteration, waits for the write and raises `Preempted`, which
`az-jax` reports in one line with exit status 143 (128 + SIGTERM). With several processes they agree on the iteration
to stop at: each iteration's flag is gathered from every process, and all stop when any was signalled.
"""

import signal
import threading

import jax
import numpy as np
from jax.experimental import multihost_utils

EXIT_STATUS = 128 + signal.SIGTERM


class Preempted(Exception):
    """The run stopped on SIGTERM after `iteration`, whose checkpoint is written."""

    def __init__(self, iteration: int):
        super().__init__(
            f"stopped by SIGTERM after iteration {iteration}; checkpoint {iteration} is saved, run the same command "
            "to resume"
        )
        self.iteration = iteration


class StopOnSigterm:
    """While active (a context manager), SIGTERM sets `signalled` instead of ending the process. Only the main thread
    can own signal handlers: elsewhere (a notebook's worker thread) it does nothing and SIGTERM keeps its handler."""

    def __init__(self):
        self.signalled = False
        self._previous = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.signalled = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)

    def should_stop(self) -> bool:
        """Whether this process, or with several processes any of them, was signalled (a collective: every process
        calls it at the same iteration)."""
        if jax.process_count() == 1:
            return self.signalled
        flags = multihost_utils.process_allgather(np.int32(self.signalled))
        return bool(np.any(flags))
