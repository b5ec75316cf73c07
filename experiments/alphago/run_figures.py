"""One AlphaGo stage's figures, read from what it wrote, into one small JSON beside README's quote of them: a run
directory's config.json and every metrics.jsonl line (p_σ, v_θ, p_π's or p_τ's run), or a policy file's report (a
p_π or p_τ .npz), with the command that made it and the machine it ran on.

    python -m experiments.alphago.run_figures runs/alphago/sl19-k32 --json experiments/alphago/results/sl19_k32.json \
        --command "az-jax alphago sl ..." --machine "2-core CPU VM, quiet"
"""

import argparse
import json
import os

import numpy as np

from az_jax.runtime.files import read_jsonl


def figures(path: str) -> dict:
    """{"config", "metrics"} of a run directory, or {"report"} of a policy .npz."""
    if os.path.isdir(path):
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
        return {"config": config, "metrics": read_jsonl(os.path.join(path, "metrics.jsonl"))}
    with np.load(path, allow_pickle=False) as f:
        return {"report": json.loads(str(f["report"]))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="a stage's run directory or a policy .npz")
    parser.add_argument("--command", required=True, help="the command that made it")
    parser.add_argument("--machine", required=True, help="where it ran, and what ran beside it")
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    out = {"command": args.command, "machine": args.machine, **figures(args.path)}
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in out.items() if k != "metrics"} | {"last": out.get("metrics", [None])[-1]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
