#!/usr/bin/env bash
# The accelerator check, in one command that fits a short GPU lease (about 9 minutes on one H100):
#
#   experiments/accelerators/device_check.sh OUT_DIR [gpu|tiny] [STEPS]
#
# STEPS (default "tests bench memory peer mfu") picks steps; "split" (not in the default) benches go_9x9 at the pgx
# example's scale for where a ply's time goes; "learn" (not in the default) trains go_9x9 for LEARN_SECONDS (default
# 240) and brings its agents back; LEARN_GAME=connect_four trains connect four instead (5 × 128, bfloat16, 1,024 games,
# the solver set scored every 10 iterations in its metrics). SPLIT_SETS adds `--set` pairs to the "split" bench (e.g.
# "compute_dtype=bfloat16"), LEARN_EXTRA to the learning run's. PEER_PLIES / PEER_ITERATIONS change the side by
# side's plies per iteration (default 32) and iterations (default 4); PEER_VARIANTS (default
# "bf16:compute_dtype=bfloat16") adds az_jax variants to it.
#
# 0. pgx's own AlphaZero example side by side, first, on a quiet device (experiments/peers/peer_pgx_example.py --az-jax,
#    the two interleaved in one process): go_9x9, 1,024 games, 6 × 128, Gumbel with 32 simulations, training batch
#    4,096; az_jax like for like (float32) and as PEER_VARIANTS (bfloat16);
# 1. it runs: a handful of tests on the device, `az-jax bench` of the connect_four and go_9x9 small presets (JSON;
#    `compile.no_recompile_after_first_iteration` says whether the iteration retraced);
# 2. the memory plan: experiments/accelerators/memory_check.py, one process per config: XLA's compile-time memory analysis of the
#    training iteration against the device's peak bytes in use after running it;
# 4. self-play utilisation at AlphaZero's scale (experiments/accelerators/selfplay_mfu.py): go_19x19, 19 × 256, bfloat16.
# 3. AlphaGo's search speed ("rollout", "apv"; not in the default), first on a quiet device: µs per p_π rollout move at
#    batch 1 and 256, one and 8 plies per loop iteration (experiments/alphago/rollout_speed.py) and APV-MCTS moves
#    per second for one game at 400 simulations by leaves per step under virtual loss, 9×9 and 19×19
#    (experiments/alphago/apv_speed.py);
# 4. MFU_SIMULATIONS (default 32) sets the self-play MFU's simulations; at 800 (the papers') one ply a call;
# 4b. "scaling" (not in the default): the same self-play at go_19x19's 19 × 256, bfloat16, SCALING_BATCH games (default
#    256) for each of SCALING_SIMS simulations (default "32 200 800"), with az_jax's batched backward pass and with
#    mctx's own (az_jax/core/backup.py), one ply a call: mfu_scaling_<sims>_<backward>.json;
# 5. learning ("learn"): `az-jax train` of go_9x9 at a GPU's scale (6 × 128, bfloat16, 1,024 games) for LEARN_SECONDS,
#    stopped by SIGTERM (the iteration in flight finishes and is saved), then `az-jax export` of its checkpoint nearest
#    the middle and of its last (agent files, for matches against GNU Go on any machine) and its metrics.jsonl;
#    the tests run beside it in the background.
#
# Each step has its own time limit and the script goes on after a failure (the log says which). Everything goes to
# OUT_DIR: log.txt (all output), env.txt, tests.txt, bench_*.json, memory.jsonl, peer_go_9x9.json,
# mfu_go_19x19_<simulations>sims.json, mfu_scaling_<simulations>_<backward>.json, rollout_speed.json, apv_speed_{9x9,19x19}.json.
# `tiny` runs the same steps with tiny settings (a CPU machine, minutes), to check the script itself.
#
# On the lent machine, the packages its image lacks (pgx, mctx, ... and for the example dm-haiku, omegaconf, pydantic)
# travel as wheels in .whl/, and the example's two files (examples/alphazero/{train,network}.py of
# https://github.com/sotetsuk/pgx, never committed here) in .pgx_example/; both are ignored paths.
set -u
OUT_DIR=${1:?usage: experiments/accelerators/device_check.sh OUT_DIR [gpu|tiny]}
SCALE=${2:-gpu}
STEPS=" ${3:-tests bench memory peer mfu} "
want() { [[ "$STEPS" == *" $1 "* ]]; }
mkdir -p "$OUT_DIR"
exec > >(tee -a "$OUT_DIR/log.txt") 2>&1
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=1
START=$(date +%s)
step() { echo "=== [$(($(date +%s) - START)) s] $*"; }
run() {  # run LIMIT_SECONDS command...: the command's status, or 124 when it ran out of time
  local limit=$1; shift
  timeout --kill-after=5 "$limit" "$@"; local rc=$?
  [ $rc -ne 0 ] && echo "!!! exit $rc: $*"
  return $rc
}

if [ -z "${NO_WHEELS:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then
  step "installing the carried wheels"
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || echo "!!! wheel install failed"
  export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
AZ="$PY -m az_jax.apps.cli"

if [ "$SCALE" = tiny ]; then
  BENCH_SETS=(--set num_simulations=4 --set selfplay_batch_size=16 --set batch_size=32 --set num_blocks=1 --set num_channels=8)
  MEM_SETS=(--set num_simulations=4 --set selfplay_batch_size=16 --set batch_size=32 --set num_blocks=1 --set num_channels=8)
  PEER=(--selfplay-batch 16 --plies 4 --training-batch 32 --simulations 4 --iterations 3)
  MFU=(--game go_9x9 --preset small --set compute_dtype=bfloat16 --set num_simulations=4 --set selfplay_batch_size=8
       --set selfplay_steps=2 --set num_blocks=1 --set num_channels=8 --set replay_capacity=4096)
  read -r -a TESTS <<< "${TESTS_LIST:-tests/test_conv.py}"
  ROLLOUT=(--sizes 9 --batches 1,4 --repeats 1 --plies-per-loop 1,2)
  APV9=(--sizes 9 --leaves 1,4 --simulations 8 --moves 1)
  APV19=(--sizes 19 --leaves 4 --simulations 4 --moves 1)
  SCALING=(--game go_19x19 --preset paper --set num_blocks=1 --set num_channels=8 --set selfplay_batch_size=${SCALING_BATCH:-4}
           --set replay_capacity=4096 --set min_replay_size=1024 --set batch_size=64)
  SCALING_SIMS=${SCALING_SIMS:-4 16}
  LEARN_SETS=(--set num_blocks=1 --set num_channels=8 --set selfplay_batch_size=16 --set batch_size=32
              --set num_simulations=4 --set min_replay_size=64 --set checkpoint_every=2 --set eval_every=0)
  LEARN_SETS_C4=(--set num_blocks=1 --set num_channels=8 --set selfplay_batch_size=16 --set batch_size=32
                 --set num_simulations=4 --set min_replay_size=64 --set checkpoint_every=2 --set eval_every=2
                 --set eval_opponents=random --set eval_games=4 --set eval_solver_simulations=4)
  PEER_SCALE=(--set num_simulations=4 --set selfplay_batch_size=16 --set batch_size=32 --set num_blocks=1
              --set num_channels=8)
  MEM_CONFIGS=("connect_four small" "go_9x9 small")
else
  BENCH_SETS=()
  MEM_SETS=()
  # the example's default scale; 32 plies an iteration (its default is 256) to fit the lease: both sides play the
  # same plies and train on every position once
  PEER=(--selfplay-batch 1024 --plies "${PEER_PLIES:-32}" --training-batch 4096 --simulations 32
        --iterations "${PEER_ITERATIONS:-4}")
  MFU_SIMULATIONS=${MFU_SIMULATIONS:-32}
  MFU=(--game go_19x19 --preset paper --set compute_dtype=bfloat16 --set num_simulations=$MFU_SIMULATIONS
       --set selfplay_batch_size=1024 --set replay_capacity=131072)
  # at the papers' 800 simulations a ply is ~25 s: one ply a call, one timed call
  if [ "$MFU_SIMULATIONS" -ge 200 ]; then MFU+=(--set selfplay_steps=1 --repeats 1); else MFU+=(--set selfplay_steps=2); fi
  ROLLOUT=(--sizes 9,19 --batches 1,256 --repeats 2 --plies-per-loop 1,8)
  APV9=(--sizes 9 --leaves 1,16 --simulations 400 --moves 2)
  APV19=(--sizes 19 --leaves 1,16 --simulations 400 --moves 1)
  SCALING=(--game go_19x19 --preset paper --set compute_dtype=bfloat16 --set selfplay_batch_size=${SCALING_BATCH:-256}
           --set replay_capacity=131072)
  SCALING_SIMS=${SCALING_SIMS:-32 200 800}
  read -r -a TESTS <<< "${TESTS_LIST:-tests/test_search.py tests/test_learner.py tests/test_replay.py tests/test_conv.py
    tests/test_targets.py tests/test_parallel.py tests/test_agent_file.py}"
  # 16k positions an iteration, trained twice each (train_ratio 2) in 32 steps of 1,024; the replay window 16
  # iterations; the step-down near the end of a 4-minute run's ~10k steps (by the bench's figures at this scale)
  LEARN_SETS=(--set num_blocks=6 --set num_channels=128 --set compute_dtype=bfloat16 --set selfplay_batch_size=1024
              --set batch_size=1024 --set replay_capacity=262144 --set min_replay_size=16384 --set lr_boundaries=7000
              --set checkpoint_every=25 --set eval_every=0)
  # connect four at a GPU's scale: the small preset's recipe (Gumbel-16, mirror images, train_ratio 4, 4 random opening
  # plies; LEARN_EXTRA=random_opening_plies=0 without them) with AlphaZero.jl's 5 × 128 network, 16k positions an
  # iteration (64 SGD steps of 1,024), a window of 16 iterations, the rate's step at step 10,000 (iteration 157, about
  # 70 s in on an H100); the solver set (1,000 positions, 64-simulation search) every 10 iterations
  LEARN_SETS_C4=(--set num_blocks=5 --set num_channels=128 --set compute_dtype=bfloat16 --set selfplay_batch_size=1024
                 --set batch_size=1024 --set replay_capacity=262144 --set min_replay_size=16384
                 --set lr_boundaries=${C4_LR_STEP:-10000} --set checkpoint_every=10 --set eval_every=10
                 --set eval_opponents=random --set eval_games=64)
  PEER_SCALE=(--set num_simulations=32 --set selfplay_batch_size=1024 --set batch_size=4096 --set num_blocks=6
              --set num_channels=128)
  MEM_CONFIGS=("connect_four small" "go_9x9 small" "go_9x9 small --set selfplay_batch_size=1024 --set num_blocks=6 --set num_channels=128 --set num_simulations=32 --set batch_size=4096")
fi

step "environment"
{
  date -u; uname -a; nvidia-smi 2>/dev/null || echo "no nvidia-smi"
  $PY -c "import jax, sys; print(sys.version); print('jax', jax.__version__, jax.default_backend(), jax.devices())"
  $PY -m pip list 2>/dev/null | grep -i -E '^(jax|jaxlib|jax-cuda|flax|optax|chex|orbax|numpy|mctx|pgx|dm-haiku) '
} > "$OUT_DIR/env.txt" 2>&1
cat "$OUT_DIR/env.txt"

# 0. pgx's example side by side, on a quiet device.
if ! want peer; then
  :
elif [ -f .pgx_example/train.py ]; then
  step "pgx example side by side"
  VARIANTS=()
  for v in ${PEER_VARIANTS-bf16:compute_dtype=bfloat16}; do VARIANTS+=(--az-jax-variant "$v"); done
  run 240 $PY experiments/peers/peer_pgx_example.py --example-dir .pgx_example --game go_9x9 "${PEER[@]}" --az-jax \
    "${VARIANTS[@]}" --json "$OUT_DIR/peer_go_9x9.json"
else
  step "no .pgx_example/train.py: pgx example skipped"
fi

# 3. AlphaGo's search speed, on a quiet device.
if want apv; then
  step "AlphaGo APV-MCTS speed, 9x9"
  run ${APV9_LIMIT:-100} $PY -m experiments.alphago.apv_speed "${APV9[@]}" --json "$OUT_DIR/apv_speed_9x9.json"
  step "AlphaGo APV-MCTS speed, 19x19"
  run ${APV19_LIMIT:-130} $PY -m experiments.alphago.apv_speed "${APV19[@]}" --json "$OUT_DIR/apv_speed_19x19.json"
fi
if want rollout; then
  step "AlphaGo rollout speed"
  run ${ROLLOUT_LIMIT:-90} $PY -m experiments.alphago.rollout_speed "${ROLLOUT[@]}" --out "$OUT_DIR/rollout_speed.json"
fi

# 1 + 2. Tests, then the memory checks, in the background (no timings taken there; each process allocates on demand so
# the bench beside them keeps its memory); the small presets' bench in the foreground.
step "tests and memory checks (background)"
(
  if want tests; then
    XLA_PYTHON_CLIENT_PREALLOCATE=false run 150 $PY -m pytest -q -p no:cacheprovider -rs "${TESTS[@]}" \
      > "$OUT_DIR/tests.txt" 2>&1
    echo "tests exit $?" >> "$OUT_DIR/tests.txt"
  fi
  if want memory; then
    for c in "${MEM_CONFIGS[@]}"; do
      read -r -a words <<< "$c"
      XLA_PYTHON_CLIENT_PREALLOCATE=false run 120 $PY experiments/accelerators/memory_check.py --game "${words[0]}" \
        --preset "${words[1]}" "${words[@]:2}" "${MEM_SETS[@]}" --jsonl "$OUT_DIR/memory.jsonl"
    done
  fi
) &
BACKGROUND=$!

if want bench; then
  for game in connect_four go_9x9; do
    step "bench $game small"
    run 150 $AZ bench --game $game --preset small "${BENCH_SETS[@]}" --repeats 2 \
      --json "$OUT_DIR/bench_${game}_small.json"
  done
fi
if want split; then  # the like-for-like config of the side by side (experiments/peers/peer_pgx_example.py)
  step "bench go_9x9 at the pgx example's scale"
  run 150 $AZ bench --game go_9x9 --preset small "${PEER_SCALE[@]}" --set train_ratio=1 --set aux_ownership_weight=0 \
    --set aux_score_weight=0 --set augment_symmetries=false ${SPLIT_SETS:+$(printf -- '--set %s ' $SPLIT_SETS)} \
    --repeats 2 --json "$OUT_DIR/bench_go_9x9_pgx_scale.json"
fi
if want learn; then
  LEARN_GAME=${LEARN_GAME:-go_9x9}
  [ "$LEARN_GAME" = connect_four ] && LEARN_SETS=("${LEARN_SETS_C4[@]}")
  step "learning: $LEARN_GAME for ${LEARN_SECONDS:-240} s"
  LEARN_DIR=${LEARN_DIR:-/tmp/learn_$LEARN_GAME}
  timeout --kill-after=90 -s TERM "${LEARN_SECONDS:-240}" $AZ train --game "$LEARN_GAME" --preset small \
    --run-dir "$LEARN_DIR" --set num_iterations=100000 "${LEARN_SETS[@]}" \
    ${LEARN_EXTRA:+$(printf -- '--set %s ' $LEARN_EXTRA)}
  echo "train exit $? (124: stopped at the time limit, after saving the iteration in flight)"
  cp "$LEARN_DIR/metrics.jsonl" "$OUT_DIR/learn_metrics.jsonl"
  STEPS_SAVED=($(ls "$LEARN_DIR/checkpoints" | grep -E '^[0-9]+$' | sort -n))
  if [ ${#STEPS_SAVED[@]} -gt 0 ]; then
    LAST=${STEPS_SAVED[-1]}
    MID=${STEPS_SAVED[$(( (${#STEPS_SAVED[@]} - 1) / 2 ))]}
    BEST=  # connect four: also the checkpoint whose in-training solver share with search was highest
    [ "$LEARN_GAME" = connect_four ] && BEST=$($PY -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if 'eval/solver_search' in r]
print(max(rows, key=lambda r: r['eval/solver_search'])['iteration'] if rows else '')" "$LEARN_DIR/metrics.jsonl")
    for s in $(printf '%s\n' "$MID" "$LAST" $BEST | sort -un); do
      run 120 $AZ export "$LEARN_DIR" "$OUT_DIR/${LEARN_GAME}_gpu_$s.azagent" --step "$s" --weights latest
    done
  else
    echo "!!! no checkpoint saved"
  fi
fi
step "waiting for the tests and memory checks"
wait $BACKGROUND
[ -f "$OUT_DIR/tests.txt" ] && tail -5 "$OUT_DIR/tests.txt"

# 4. Utilisation at AlphaZero's scale.
if want mfu; then
  step "self-play MFU"
  run ${MFU_LIMIT:-170} $PY experiments/accelerators/selfplay_mfu.py "${MFU[@]}" \
    --json "$OUT_DIR/mfu_go_19x19_${MFU_SIMULATIONS:-32}sims.json"
fi

if want scaling; then
  for sims in $SCALING_SIMS; do
    for backward in batched mctx; do
      step "self-play scaling: $sims simulations, $backward backward"
      run ${SCALING_LIMIT:-100} $PY experiments/accelerators/selfplay_mfu.py "${SCALING[@]}" --set num_simulations=$sims \
        --set selfplay_steps=1 --repeats 1 --backward $backward --json "$OUT_DIR/mfu_scaling_${sims}_${backward}.json"
    done
  done
fi

step "done"
