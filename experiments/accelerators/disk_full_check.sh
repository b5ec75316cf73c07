#!/usr/bin/env bash
# A real full disk while saving (tests/test_disk_full.py uses a file-size limit, which needs no root): `az-jax train`
# (tic-tac-toe, tiny settings, a checkpoint every iteration, 2 kept) in a 640 KiB tmpfs, which holds two checkpoints
# but not a third beside them. Needs root (mount). Prints each step's exit status, stderr's last line and the
# checkpoints left; then resumes on a normal disk.
#
#   sudo experiments/accelerators/disk_full_check.sh [AZ_JAX_BINARY]
set -u
cd "$(dirname "$0")/../.."
AZ=${1:-.venv/bin/az-jax}
FS=$(mktemp -d)
mount -t tmpfs -o size=640k tmpfs "$FS" || exit 1
trap 'umount "$FS"; rmdir "$FS"' EXIT
SETS=(num_blocks=1 num_channels=8 value_hidden=8 num_simulations=4 selfplay_batch_size=8 batch_size=16
      selfplay_steps=4 replay_capacity=256 min_replay_size=16 eval_every=0 checkpoint_every=1 keep_checkpoints=2
      train_ratio=1)
ARGS=(); for s in "${SETS[@]}"; do ARGS+=(--set "$s"); done
run() {  # run DIR ITERATIONS
  XLA_FLAGS= "$AZ" --devices 2 train --game tic_tac_toe --run-dir "$1" --no-progress "${ARGS[@]}" \
    --set "num_iterations=$2" 2> "$FS.err" > /dev/null
  echo "exit $? ; $(tail -1 "$FS.err")"
  echo "checkpoints: $(ls "$1/checkpoints" | tr '\n' ' ')"
}
echo "== 2 iterations in the 640 KiB file system"; run "$FS/run" 2
echo "== resumed to 6 iterations there"; run "$FS/run" 6
df -k "$FS" | tail -1
RESUMED=$(mktemp -d); cp -r "$FS/run" "$RESUMED/"
echo "== moved to a normal disk, resumed to 6"; run "$RESUMED/run" 6
echo "logged iterations: $(python3 -c "import json,sys; print([json.loads(l)['iteration'] for l in open('$RESUMED/run/metrics.jsonl')])")"
rm -rf "$RESUMED" "$FS.err"
