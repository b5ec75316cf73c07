#!/usr/bin/env bash
# The design changes that make the papers' presets fit (README, "The papers' scale"): `az-jax preflight` of each run
# below, one JSON and one log per run in experiments/accelerators/results/preflight_fit/ (a run whose JSON exists is skipped, so
# the script resumes). Then the AlphaGo (2016) pipeline's 19×19 stages on every target, in
# experiments/accelerators/results/preflight_alphago/. `python -m experiments.accelerators.papers_fit_table --dir ...` prints the tables.
#
#   experiments/accelerators/papers_fit_changes.sh [AZ_JAX_BINARY]
set -u
cd "$(dirname "$0")/../.."
AZ=${1:-.venv/bin/az-jax}
OUT=experiments/accelerators/results/preflight_fit
mkdir -p "$OUT"
# name | game preset target | --set keys | programs
RUNS=(
  "go19_paper_v5e8_remat_sb16|go_19x19 paper v5litepod-8|remat=true search_batch_size=16|iteration"
  "go19_paper_v5e8_halves_remat_sb16|go_19x19 paper v5litepod-8|remat=true search_batch_size=16|selfplay,learning"
  "go19_paper_v5e8_remat_sb16_mb4|go_19x19 paper v5litepod-8|remat=true search_batch_size=16 micro_batches=4|iteration,evaluation"
  "go19_paper_v5e8_remat_bf16_sb16|go_19x19 paper v5litepod-8|remat=true compute_dtype=bfloat16 search_batch_size=16|iteration"
  "go19_paper_h100_remat_sb64|go_19x19 paper h100|remat=true search_batch_size=64|iteration"
  "go19_paper_h100_remat_sb64_mb4|go_19x19 paper h100|remat=true search_batch_size=64 micro_batches=4|iteration"
  "go19_paper_h100_remat_bf16_sb64|go_19x19 paper h100|remat=true compute_dtype=bfloat16 search_batch_size=64|iteration"
  "chess_paper_v5e8_remat_bf16_sb16|chess paper v5litepod-8|remat=true compute_dtype=bfloat16 search_batch_size=16|iteration"
  "chess_paper_v5e8_halves_remat_bf16_sb16|chess paper v5litepod-8|remat=true compute_dtype=bfloat16 search_batch_size=16|selfplay,learning"
  "chess_paper_v5e8_remat_bf16_compact_sb8|chess paper v5litepod-8|remat=true compute_dtype=bfloat16 compact_replay=true search_batch_size=8|iteration"
  "chess_paper_v5e8_remat_compact_sb8_mb4|chess paper v5litepod-8|remat=true compact_replay=true search_batch_size=8 micro_batches=4|iteration"
  "chess_paper_h100_remat_compact_sb16|chess paper h100|remat=true compact_replay=true search_batch_size=16|iteration"
  "chess_paper_h100_remat_compact_sb64|chess paper h100|remat=true compact_replay=true search_batch_size=64|iteration"
  "chess_paper_h100_remat_compact_sb64_mb4|chess paper h100|remat=true compact_replay=true search_batch_size=64 micro_batches=4|iteration"
  "chess_paper_h100_remat_bf16_sb64|chess paper h100|remat=true compute_dtype=bfloat16 search_batch_size=64|iteration"
  "chess_paper_h100_remat_bf16_compact_sb64|chess paper h100|remat=true compute_dtype=bfloat16 compact_replay=true search_batch_size=64|iteration"
  "agz_go19_v5e8_remat_bf16_sb16|go_19x19 alphago_zero v5litepod-8|remat=true compute_dtype=bfloat16 search_batch_size=16|iteration"
  "agz_go19_v5e8_remat_bf16_sb8|go_19x19 alphago_zero v5litepod-8|remat=true compute_dtype=bfloat16 search_batch_size=8|iteration"
  "agz_go19_v5e8_remat_bf16_sb8_mb4|go_19x19 alphago_zero v5litepod-8|remat=true compute_dtype=bfloat16 search_batch_size=8 micro_batches=4|iteration"
  "agz_go19_h100_remat_bf16_sb64|go_19x19 alphago_zero h100|remat=true compute_dtype=bfloat16 search_batch_size=64|iteration"
  "agz_go19_v5e8_remat_sb8_mb4|go_19x19 alphago_zero v5litepod-8|remat=true search_batch_size=8 micro_batches=4|iteration"
  "agz_go19_h100_remat_sb64_mb4|go_19x19 alphago_zero h100|remat=true search_batch_size=64 micro_batches=4|iteration"
  "shogi_paper_v5e8_remat_compact_sb8_mb4|shogi paper v5litepod-8|remat=true compact_replay=true search_batch_size=8 micro_batches=4|iteration"
  "shogi_paper_h100_remat_compact_sb64_mb4|shogi paper h100|remat=true compact_replay=true search_batch_size=64 micro_batches=4|iteration"
)
for run in "${RUNS[@]}"; do
  IFS='|' read -r name what sets programs <<< "$run"
  read -r game preset target <<< "$what"
  file="$OUT/$name.json"
  [ -f "$file" ] && continue
  args=()
  for s in $sets; do args+=(--set "$s"); done
  echo "=== $(date +%T) $name"
  start=$(date +%s)
  $AZ preflight --target "$target" --game "$game" --preset "$preset" "${args[@]}" --programs "$programs" \
    --json "$file.tmp" > "$OUT/$name.log" 2>&1
  echo "exit $? after $(( $(date +%s) - start )) s" >> "$OUT/$name.log"
  if [ -f "$file.tmp" ]; then mv "$file.tmp" "$file"; fi
  tail -2 "$OUT/$name.log"
done
ALPHAGO=experiments/accelerators/results/preflight_alphago
mkdir -p "$ALPHAGO"
# alphago_plan NAME TARGET [PREFLIGHT ARGS...]: the 19x19 stages on TARGET into $ALPHAGO/NAME.json (skipped if there)
alphago_plan() {
  local name=$1 target=$2
  shift 2
  local file="$ALPHAGO/$name.json" log="$ALPHAGO/$name.log"
  [ -f "$file" ] && return
  echo "=== $(date +%T) $name"
  local start
  start=$(date +%s)
  $AZ preflight --target "$target" --alphago 19x19 "$@" --json "$file.tmp" > "$log" 2>&1
  echo "exit $? after $(( $(date +%s) - start )) s" >> "$log"
  if [ -f "$file.tmp" ]; then mv "$file.tmp" "$file"; fi
  tail -2 "$log"
}
for target in h100 v5litepod-8 v4-8 v5p-8 v6e-8 h100x8; do
  alphago_plan "alphago_19x19_$target" "$target"
done
# p_π's step compiled again on its own once it computed its minibatch's features itself; papers_fit_table puts these
# files' stage in place of the whole runs' column
for target in h100 v5litepod-8 v4-8 v5p-8 v6e-8 h100x8; do
  alphago_plan "alphago_19x19_rollout_$target" "$target" --programs "rollout step"
done
