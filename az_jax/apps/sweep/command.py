"""The `az-jax sweep` command: plan and check the sweep, run this shard's trials, then report."""

from __future__ import annotations

import os
from collections.abc import Sequence

from az_jax.apps.sweep.results import report
from az_jax.apps.sweep.run import (
    PLATFORMS,
    LogFn,
    available_ids,
    check_sweep_dir,
    detect_platform,
    device_groups,
    is_finished,
    parse_ids,
    parse_shard,
    run_sweep,
    trial_command,
    trial_dir,
    write_sweep_file,
)
from az_jax.apps.sweep.spec import SweepError, build_sweep, load_spec


def sweep_command(
    spec_path: str,
    *,
    sweep_dir: str | None = None,
    parallel: int = 1,
    devices: str | None = None,
    platform: str = "auto",
    shard: str | None = None,
    extra_set: Sequence[str] = (),
    metrics: Sequence[str] | None = None,
    dry_run: bool = False,
    collect_only: bool = False,
    log: LogFn = print,
    out: LogFn = print,
) -> int:
    """What `az-jax sweep` does: plan and check everything, run this shard's unfinished trials, then write
    results.csv, summary.csv/.md and plots. Returns the exit status (1 if a trial failed)."""
    spec = load_spec(spec_path)
    if platform == "auto":
        platform = detect_platform()
    if platform not in PLATFORMS:
        raise SweepError(f"--platform must be auto or one of {', '.join(PLATFORMS)}, got {platform!r}")
    groups = device_groups(parse_ids(devices, available_ids(platform)), parallel)
    shard_index = parse_shard(shard)
    sweep = build_sweep(spec, extra_set, num_devices=len(groups[0]))
    sweep_dir = sweep_dir or os.path.join("runs", "sweeps", sweep.name)
    check_sweep_dir(sweep, sweep_dir)
    if dry_run:
        for trial in sweep.trials:
            if trial.index % shard_index[1] == shard_index[0]:
                run_dir = trial_dir(sweep_dir, trial)
                done = " (finished)" if is_finished(run_dir, trial.config) else ""
                out(" ".join(trial_command(sweep, trial, run_dir, platform, groups[0])) + done)
        return 0
    status = {}
    if not collect_only:
        write_sweep_file(sweep, sweep_dir, spec)
        status = run_sweep(sweep, sweep_dir, groups=groups, platform=platform, shard=shard_index, log=log)
    rows, table, paths = report(sweep, sweep_dir, metrics)
    out(table)
    log(
        f"{sum(r['status'] == 'done' for r in rows)} of {len(rows)} trials done; table "
        f"{os.path.join(sweep_dir, 'results.csv')}"
        + (f", plots in {os.path.join(sweep_dir, 'plots')}" if paths else "")
    )
    return 1 if any(s.startswith("failed") for s in status.values()) else 0
