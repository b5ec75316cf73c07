"""Hyperparameter sweeps: one JSON spec -> trials (grid × random samples × seeds), each an `az-jax train` process in
its own run dir under the sweep dir; finished trials are skipped on a re-run; the final metrics go into one CSV table
with plots. `spec` expands a spec into trials (the spec format is described there), `run` runs them in processes
pinned to devices, `results` tabulates and plots them, and `command` is `az-jax sweep`.
"""

from az_jax.apps.sweep.command import sweep_command
from az_jax.apps.sweep.results import (
    collect,
    default_metrics,
    final_metrics,
    markdown_table,
    plot,
    read_records,
    report,
    summarise,
)
from az_jax.apps.sweep.run import (
    CACHE_DIR,
    DONE_FILE,
    PLATFORMS,
    TRIAL_FILE,
    LogFn,
    available_ids,
    check_sweep_dir,
    detect_platform,
    device_groups,
    is_finished,
    parse_ids,
    parse_shard,
    run_sweep,
    run_trial,
    trial_command,
    trial_dir,
    trial_env,
    write_sweep_file,
)
from az_jax.apps.sweep.spec import DISTRIBUTIONS, SPEC_KEYS, Sweep, SweepError, Trial, build_sweep, cli_value, load_spec

__all__ = [
    # spec
    "SPEC_KEYS",
    "DISTRIBUTIONS",
    "SweepError",
    "Trial",
    "Sweep",
    "load_spec",
    "cli_value",
    "build_sweep",
    # run
    "PLATFORMS",
    "DONE_FILE",
    "TRIAL_FILE",
    "CACHE_DIR",
    "LogFn",
    "parse_shard",
    "device_groups",
    "parse_ids",
    "available_ids",
    "detect_platform",
    "trial_env",
    "trial_command",
    "trial_dir",
    "is_finished",
    "check_sweep_dir",
    "write_sweep_file",
    "run_trial",
    "run_sweep",
    # results
    "read_records",
    "final_metrics",
    "collect",
    "summarise",
    "markdown_table",
    "default_metrics",
    "plot",
    "report",
    # command
    "sweep_command",
]
