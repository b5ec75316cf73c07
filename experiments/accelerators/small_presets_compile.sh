#!/usr/bin/env bash
# Every game's small preset compiled for TPU and GPU targets on this CPU machine (`az-jax preflight`, the training
# iteration and the evaluation matches), one JSON per (game, target) in experiments/accelerators/results/preflight_small/; a pair
# whose JSON exists is skipped, so the script resumes. Then:
#   python -m experiments.accelerators.papers_fit_table --dir experiments/accelerators/results/preflight_small
set -u
cd "$(dirname "$0")/../.."
AZ=${AZ:-.venv/bin/az-jax}
OUT=experiments/accelerators/results/preflight_small
mkdir -p "$OUT"
GAMES=(tic_tac_toe connect_four othello hex go_9x9 go_19x19 chess gardner_chess shogi animal_shogi)
TARGETS=(v5litepod-8 v4-8 v5p-8 v6e-8 h100 a100)
for target in "${TARGETS[@]}"; do
  for game in "${GAMES[@]}"; do
    file="$OUT/${game}_small_${target}.json"
    [ -f "$file" ] && continue
    start=$(date +%s)
    # eval_games=128: several small presets evaluate 100 games, which 8 devices do not divide
    $AZ preflight --target "$target" --game "$game" --preset small --set eval_games=128 --programs iteration,evaluation \
      --json "$file.tmp" \
      > "$OUT/${game}_small_${target}.log" 2>&1
    echo "exit $? after $(( $(date +%s) - start )) s" >> "$OUT/${game}_small_${target}.log"
    [ -f "$file.tmp" ] && mv "$file.tmp" "$file"
    echo "$(date +%T) $game $target: $(grep -E 'needs' "$OUT/${game}_small_${target}.log")"
  done
done
