"""The figures of an AlphaGo agent directory's stages, read from what the stages wrote, into one small JSON: the
numbers README's AlphaGo tables quote, so each can be checked without rerunning a stage.

    python -m experiments.alphago.agent_figures --agent runs/alphago/ag9-cpu --log runs/logs/ag9-pipeline.log \
        --json experiments/alphago/results/agent_9x9_cpu.json

Read: p_σ's and v_θ's last `metrics.jsonl` line (held-out accuracy / MSE), p_π's and p_τ's reports saved in their
.npz files, p_ρ's evaluations against p_σ (`win_rate_vs_sl` of `rl/metrics.jsonl`) and its self-play rate, the
value data's counts (value_store.load_split), and, from the pipeline's JSON-lines log when given, each stage's
seconds and report. With `--time`, p_π's and p_τ's time per move selection (rollout_policy.time_per_move) on the
held-out expert positions of the agent's data set, at batch 1 and 256 (a measurement, so the only part that needs the
machine quiet).
"""

import argparse
import json
import os

import numpy as np

from az_jax.alphago import agent as agent_lib
from az_jax.alphago import dataset, rollout_policy, tree_policy, value_store
from az_jax.runtime.files import read_jsonl


def _report(path: str) -> dict | None:
    if not os.path.exists(path):
        return None
    with np.load(path, allow_pickle=False) as f:
        return json.loads(str(f["report"]))


def times(directory: str, size: int) -> dict:
    """µs per move selection of p_π and p_τ at batch 1 and 256 on the held-out positions of the default data set."""
    _, test = dataset.load_split(dataset.default_path(size))
    out = {}
    for name, load, family in (
        ("p_pi", rollout_policy.load, rollout_policy.ROLLOUT),
        ("p_tau", tree_policy.load, tree_policy.TREE),
    ):
        policy = load(agent_lib.part(directory, "rollout" if name == "p_pi" else "tree"))
        out[name] = [
            rollout_policy.time_per_move(policy, test.position, b, repeats=200 if b == 1 else 20, family=family)
            for b in (1, 256)
        ]
    return out


def figures(directory: str, log: str | None = None) -> dict:
    part = lambda name: agent_lib.part(directory, name)  # noqa: E731
    out: dict = {"agent": directory}
    with open(os.path.join(directory, "preset.json")) as f:
        out["preset"] = json.load(f)
    sl = read_jsonl(os.path.join(part("sl"), "metrics.jsonl"))
    out["p_sigma"] = sl[-1] if sl else None
    out["p_pi"] = _report(part("rollout"))
    out["p_tau"] = _report(part("tree"))
    rl = read_jsonl(os.path.join(part("rl"), "metrics.jsonl"))
    out["p_rho"] = {
        "iterations": len(rl),
        "win_rate_vs_p_sigma": {str(m["iteration"]): m["win_rate_vs_sl"] for m in rl if "win_rate_vs_sl" in m},
        "mean_games_per_second": round(float(np.mean([m["games_per_second"] for m in rl[1:]])), 3) if rl else None,
        "mean_game_length": round(float(np.mean([m["mean_length"] for m in rl])), 1) if rl else None,
    }
    if os.path.exists(part("value_data")):
        train, test = value_store.load_split(part("value_data"))
        out["value_data"] = {
            "train_positions": len(train),
            "test_positions": len(test),
            "redraws": int(np.sum(train.attempts - 1) + np.sum(test.attempts - 1)),
            "mean_u": round(float((np.sum(train.u) + np.sum(test.u)) / (len(train) + len(test))), 2),
        }
    value = read_jsonl(os.path.join(part("value"), "metrics.jsonl"))
    out["v_theta"] = value[-1] if value else None
    if log:
        stages = {}
        for line in read_jsonl(log):
            if line.get("status") == "done":
                stages[line["stage"]] = {k: v for k, v in line.items() if k not in ("stage", "status", "history")}
        out["pipeline_stages"] = stages
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True)
    parser.add_argument("--log", default=None, help="the pipeline's output (JSON lines)")
    parser.add_argument("--time", action="store_true", help="also time p_π and p_τ (see above)")
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    out = figures(args.agent, args.log)
    if args.time:
        out["time_per_move"] = times(args.agent, out["preset"]["size"])
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
