#!/usr/bin/env bash
# The strength of the agents that ship in the package (az_jax/agents/*.azagent), each loaded by its name, as README's
# "Shipped agents" table quotes it. Writes experiments/agents/results/{tic_tac_toe,connect_four,go_9x9}.jsonl
# (appends: one line per measurement). About 35 minutes on 2 CPU cores, most of it the GNU Go games.
#
#   experiments/agents/measure.sh [tic_tac_toe] [connect_four] [go_9x9]     (default: all three)
#
#   tic_tac_toe:  every one of the 4,520 positions with a move to make against the minimax oracle, raw policy and
#                 32-simulation search (experiments/tic_tac_toe/tic_tac_toe_check.py);
#   connect_four: the share of optimal moves on the project's solver-labelled positions, raw policy and 64-simulation
#                 search, and 100 games against rollout MCTS-1000 (experiments/strength/solver_benchmark.py); the file
#                 is checkpoint 366 of an H100 run (experiments/accelerators/results/gpu/README.md §6), its last line
#                 in the results the one README quotes (the lines before it are of the agent it replaced);
#   go_9x9:       40 games against GNU Go levels 1 and 5, colours alternating, Tromp-Taylor scoring (`az-jax eval`;
#                 the last two lines with the agent's passes checked by the count, `pass_check`, the two before without).
#                 (Its committed lines were made by the same command on the same file before it shipped, as
#                 runs/gpu/go_9x9_gpu_341.azagent: experiments/accelerators/results/gpu/README.md §5.)
set -eu
cd "$(dirname "$0")/../.."
OUT=experiments/agents/results
mkdir -p "$OUT"
WANT=" ${*:-tic_tac_toe connect_four go_9x9} "
PY=${PYTHON:-python}
if [[ "$WANT" == *" tic_tac_toe "* ]]; then
  $PY -m experiments.tic_tac_toe.tic_tac_toe_check tic_tac_toe --simulations 32 --json "$OUT/tic_tac_toe.jsonl"
fi
if [[ "$WANT" == *" connect_four "* ]]; then
  $PY -m experiments.strength.solver_benchmark connect_four --simulations 64 --mcts 1000 --games 100 \
    --json "$OUT/connect_four.jsonl"
fi
if [[ "$WANT" == *" go_9x9 "* ]]; then
  for level in 1 5; do
    rm -rf /tmp/az_jax_agents_eval
    az-jax eval --run-dir go_9x9 --opponent gnugo:level=$level --games 40 --out-dir /tmp/az_jax_agents_eval --no-games
    cat /tmp/az_jax_agents_eval/eval/results.jsonl >> "$OUT/go_9x9.jsonl"
  done
fi
