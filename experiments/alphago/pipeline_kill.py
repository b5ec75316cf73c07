"""The AlphaGo pipeline killed with SIGKILL inside each of its stages and run again each time, until it finishes; then
the agent it made plays a move. Checks that `az-jax alphago pipeline` resumes after kill -9 at any stage.

    python -m experiments.alphago.pipeline_kill --preset 19x19-smoke --dir runs/alphago/ag19-kill \
        [--json experiments/alphago/results/pipeline_kill_19x19_smoke.json]

The pipeline prints one JSON line per progress report and per stage's end. A stage is killed at its first progress
line (sl and v_θ: a checkpoint written; p_ρ: an iteration; value data: a batch of games), once that point's
checkpoint is on disk (each stage writes it just after the line; value data: `--delay` seconds), unless the stage
has finished meanwhile; p_π, which reports only at its end, `--rollout-delay` seconds after it starts. The next run
must go on from there, not repeat it ("resumed" in the JSON: the stage's first line in the next run is a later step
than the killed one's, or the stage's end). Value data is appended to its directory every 60 s of games
(value_data.build), so a kill before its first save repeats its games: "resumed" false for it says so, and is
expected when a stage is that short.
The directory must not exist (a fresh run).
"""

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import jax

from az_jax.alphago import play_agent

AZ_JAX = os.path.join(os.path.dirname(sys.executable), "az-jax")
PROGRESS_STAGES = ("sl", "rl", "value-data", "value")  # stages that print progress before their end


def _lines(proc: subprocess.Popen, out: queue.Queue) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        out.put(line)
    out.put(None)


CHECKPOINTED = {"sl": ("sl", "step"), "rl": ("rl", "iteration"), "value": ("value", "step")}


def _wait_for_checkpoint(directory: str, record: dict, delay: float) -> None:
    """Until the checkpoint of the point `record` reports is on disk (orbax renames it into place when complete),
    at most 10 s; for value data (appended to at its saves), `delay` seconds."""
    if record["stage"] not in CHECKPOINTED:
        time.sleep(delay)
        return
    run_dir, key = CHECKPOINTED[record["stage"]]
    path = os.path.join(directory, run_dir, "checkpoints", str(record[key]))
    deadline = time.monotonic() + 10.0
    while not os.path.isdir(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="19x19-smoke")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--rollout-delay", type=float, default=3.0)
    parser.add_argument("--delay", type=float, default=1.0, help="value data: seconds from a progress line to the kill")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if os.path.exists(args.dir):
        raise SystemExit(f"{args.dir} exists: give a new directory")
    command = [AZ_JAX, "alphago", "pipeline", "--preset", args.preset, "--dir", args.dir]
    killed: dict[str, str] = {}  # stage -> the line it was killed after
    runs: list[dict] = []
    start = time.monotonic()
    final = None
    while final is None:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(proc, lines), daemon=True).start()
        run: dict[str, Any] = {"started_s": round(time.monotonic() - start, 1), "lines": []}
        runs.append(run)
        deadline = None  # when to kill p_π
        while True:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    proc.send_signal(signal.SIGKILL)
                    killed["rollout"] = f"{args.rollout_delay} s into the stage"
                    run["killed_in"] = "rollout"
                    deadline = None
                continue
            if line is None:
                break
            record = json.loads(line)
            run["lines"].append(
                {k: record[k] for k in ("stage", "status", "step", "iteration", "games") if k in record}
            )
            if "preset" in record:
                final = record
                continue
            stage = record["stage"]
            if stage == "sl" and "status" in record and "rollout" not in killed:
                deadline = time.monotonic() + args.rollout_delay
            if stage in PROGRESS_STAGES and "status" not in record and stage not in killed:
                _wait_for_checkpoint(args.dir, record, args.delay)
                if proc.poll() is not None:  # it finished meanwhile: nothing was killed
                    continue
                proc.send_signal(signal.SIGKILL)
                killed[stage] = line.strip()
                run["killed_in"] = stage
                run["killed_after"] = run["lines"][-1]
        code = proc.wait()
        run["exit"] = code
        if final is None and code != -signal.SIGKILL:
            raise SystemExit(f"the pipeline exited with {code} without being killed: {run['lines'][-1:]}")
    resumed = {}  # stage -> the run after its kill went on past the killed line (or found the stage complete)
    for before, after in zip(runs, runs[1:]):
        stage, mark = before.get("killed_in"), before.get("killed_after")
        if stage in PROGRESS_STAGES and mark is not None:
            first = next(line for line in after["lines"] if line.get("stage") == stage)
            later = [k for k in ("step", "iteration", "games") if k in mark and k in first and first[k] > mark[k]]
            resumed[stage] = bool(later) or "status" in first
    agent = play_agent.load(args.dir)
    env = agent.env
    state = jax.tree.map(lambda x: x[None], env.init(jax.random.key(0)))
    action, _ = agent.search(state, jax.random.key(1))
    result = {
        "preset": args.preset,
        "command": " ".join(command),
        "runs": len(runs),
        "killed": sorted(killed),
        "resumed": resumed,
        "stages": {k: v.get("status") for k, v in final["stages"].items()},
        "seconds": round(time.monotonic() - start, 1),
        "first_move": int(action[0]),
        "first_move_legal": bool(state.legal_action_mask[0, int(action[0])]),
        "per_run": [
            {
                "started_s": r["started_s"],
                "exit": r["exit"],
                "killed_in": r.get("killed_in"),
                "after": r.get("killed_after"),
            }
            for r in runs
        ],
        "lines": [r["lines"] for r in runs],
    }
    print(json.dumps({k: v for k, v in result.items() if k != "lines"}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    complete = set(killed) == {*PROGRESS_STAGES, "rollout"} and all(v for k, v in resumed.items() if k != "value-data")
    return 0 if complete and result["first_move_legal"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
