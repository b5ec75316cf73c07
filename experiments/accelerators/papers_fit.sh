#!/usr/bin/env bash
# The papers' presets on the slices people rent: `az-jax preflight` of each (game, preset) for each target, the
# training iteration only, one JSON per pair in experiments/accelerators/results/preflight/ (a pair whose JSON exists is skipped,
# so the script resumes). Then `python -m experiments.accelerators.papers_fit_table` prints README's table from those files.
#
#   experiments/accelerators/papers_fit.sh [AZ_JAX_BINARY]
set -u
cd "$(dirname "$0")/../.."
AZ=${1:-.venv/bin/az-jax}
OUT=experiments/accelerators/results/preflight
mkdir -p "$OUT"
PAIRS=(
  "go_19x19 paper" "chess paper" "shogi paper" "go_19x19 alphago_zero"
)
TARGETS=(v5litepod-8 h100 v4-8 v5p-8 v6e-8 h100x8)
for target in "${TARGETS[@]}"; do
  for pair in "${PAIRS[@]}"; do
    read -r game preset <<< "$pair"
    file="$OUT/${game}_${preset}_${target}.json"
    [ -f "$file" ] && continue
    echo "=== $(date +%T) $game $preset on $target"
    start=$(date +%s)
    $AZ preflight --target "$target" --game "$game" --preset "$preset" --programs iteration --json "$file.tmp" \
      > "$OUT/${game}_${preset}_${target}.log" 2>&1
    echo "exit $? after $(( $(date +%s) - start )) s" >> "$OUT/${game}_${preset}_${target}.log"
    if [ -f "$file.tmp" ]; then mv "$file.tmp" "$file"; fi
    tail -2 "$OUT/${game}_${preset}_${target}.log"
  done
done
