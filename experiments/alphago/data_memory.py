"""Memory of the AlphaGo stages' data, whole (.npz) against streamed (a data set directory, az_jax/runtime/columns.py).

    python -m experiments.alphago.data_memory --out experiments/alphago/results/data_memory_19x19.json

Builds the 19×19 professional corpus in both forms (into --work; reused when there), then runs each case in a fresh
process and reads that process's memory from /proc/self/status at its end: VmHWM (the peak resident set), RssAnon
(memory the process owns: arrays, encodings) and RssFile (pages of mapped files, which the kernel drops under pressure
and reads again). Cases:
  import       python with jax and az_jax imported: what every case starts from
  sl           load_split, then 50 random minibatches of 256 positions gathered and their 48 planes computed; also
               on the directory with its training part 10 times over (1.25 M positions, 0.9 GB), which only the
               directory form can show: a whole-set load would hold 10× the data
  rollout      pattern_training.train: p_π's vocabularies from every training position, encoded a buffer at a time
               (10^9: every position at once, as the training did before it had a buffer), then 100 SGD steps of 256
               (each minibatch's features computed in the step; before Nov. 27 the steps sampled a buffer's encodings)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CASE = r"""
import json, sys, tempfile, time
import numpy as np
case, path, buffer = sys.argv[1], sys.argv[2], int(sys.argv[3])
import jax
from az_jax.alphago import dataset, features, pattern_training
start = time.perf_counter()
out = {}
if case == "sl":
    train, test = dataset.load_split(path)
    planes = jax.jit(features.features)
    rng = np.random.default_rng(0)
    for _ in range(50):
        index = rng.integers(0, len(train), 256)
        batch = jax.tree.map(lambda x: np.asarray(x[index]), train.position)
        planes(batch).block_until_ready()
    out = {"train_positions": len(train), "test_positions": len(test)}
elif case == "rollout":
    train, test = dataset.load_split(path)
    config = pattern_training.TrainConfig(steps=100, batch_size=256, learning_rate=2.0, buffer=buffer)
    _, report = pattern_training.train(config, train, test, tempfile.mkdtemp())
    out = {k: report[k] for k in ("train_positions", "buffers", "test_accuracy", "seconds_vocabularies")}
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
mib = lambda key: round(int(status[key].split()[0]) / 1024, 1)
print(json.dumps({**out, "seconds": round(time.perf_counter() - start, 1),
                  "peak_mib": mib("VmHWM"), "anon_mib": mib("RssAnon"), "file_mib": mib("RssFile")}))
"""


def run_case(case: str, path: str, buffer: int = 0) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CASE, case, path, str(buffer)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{case} on {path} failed: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="runs/alphago/data_memory", help="where the two forms are built")
    parser.add_argument("--out", default=None, help="write the figures here (JSON)")
    args = parser.parse_args(argv)
    from az_jax.alphago import corpus, dataset

    work = Path(args.work)
    forms = {"npz": work / "go_19x19_positions.npz", "directory": work / "go_19x19_positions"}
    for form, path in forms.items():
        if not path.exists():
            start = time.perf_counter()
            report = dataset.build(corpus.default_sources(19), 19, path)
            print(f"built {form}: {report['positions']} positions in {time.perf_counter() - start:.0f} s", flush=True)
    tenfold = work / "go_19x19_positions_x10"
    if not tenfold.exists():  # the same positions appended 10 times to the training part
        from az_jax.runtime import columns

        building = work / "x10.building"
        shutil.rmtree(building, ignore_errors=True)
        shutil.copytree(forms["directory"], building)
        rows_, _ = columns.read(building / "train")
        whole = {k: np.asarray(v) for k, v in rows_.items()}
        for _ in range(9):
            columns.append(building / "train", whole)
        os.replace(building, tenfold)
    forms["directory x10"] = tenfold
    sizes = {
        form: round(sum(f.stat().st_size for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file()) / 2**20, 1)
        for form, p in forms.items()
    }
    rows: list[dict] = [{"case": "import", "form": "-", **run_case("import", "-")}]
    for case, form, buffer in (
        ("sl", "npz", 0),
        ("sl", "directory", 0),
        ("sl", "directory x10", 0),
        ("rollout", "npz", 10**9),  # every position encoded at once: as before the buffer
        ("rollout", "directory", 65_536),  # the default buffer
        ("rollout", "directory", 8_192),
    ):
        row = {"case": case, "form": form, "buffer": buffer or None, **run_case(case, str(forms[form]), buffer)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    result = {"machine": f"{os.cpu_count()} CPUs", "disk_mib": sizes, "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
