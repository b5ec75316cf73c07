"""Microseconds per rollout move, p_π on the lean rollout game (az_jax/alphago/rollout_game.py) against the same
rollout stepped by pgx (the rollout of apv_mcts.py before the lean game), at batch 1 and 256, 9×9 and 19×19.

    python -m experiments.alphago.rollout_speed --out experiments/alphago/results/rollout_speed_cpu.json
        [--sizes 9,19] [--batches 1,256] [--games 'pgx step,lean'] [--plies-per-loop 1,4,8] [--lookup hashed,sorted]

Each case plays B games from positions after `--plies` random moves to their end, `--repeats` times after a warm-up
(compilation), and divides the time by the moves played (the moves of every game, passes included): µs per move,
to set beside the paper's 2 µs a move (Methods, "Rollout policy", one CPU thread). The policy has random weights and
`--vocabulary R,K` random response and 3x3 pattern codes (default 5,003 and 8,885: the 19×19 p_π's, trained on
131,590 professional positions, `experiments/alphago/results/rollout19.json`; `0,0`: none, as the figures before
it). The step costs the same whatever the weights; the pattern lookups probe the vocabularies' hash tables
(`--lookup hashed`, what a loaded or trained p_π uses) or binary-search the sorted vocabularies (`sorted`, the lookup
before the tables), one case each.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pgx

from az_jax.alphago import apv_mcts, rollout_game
from az_jax.alphago import rollout_policy as rollout_lib
from az_jax.alphago.position import from_pgx


def pgx_rollout(policy: rollout_lib.RolloutPolicy, states: pgx.State, key: jax.Array, env: pgx.Env):
    """The reference: p_π's moves stepped by pgx (its rules and legality); (z, final states, moves each game made)."""
    n = int(round(states._x.board.shape[-1] ** 0.5))
    batch = jnp.arange(states.current_player.shape[0])
    player = states.current_player

    def body(carry):
        s, z, key, moves = carry
        key, sample_key = jax.random.split(key)
        position = from_pgx(s)
        scores = rollout_lib.logits(policy, position)
        sensible = jnp.isfinite(scores) & s.legal_action_mask[:, : n * n] & ~apv_mcts.own_eyes(position.board, n)
        point = rollout_lib.sample(sample_key, jnp.where(sensible, scores, -jnp.inf))
        action = jnp.where(sensible.any(-1), point, n * n).astype(jnp.int32)
        going = ~(s.terminated | s.truncated)
        s = jax.vmap(env.step)(s, action)
        return s, z + s.rewards[batch, player], key, moves + going

    def running(carry):
        return (~(carry[0].terminated | carry[0].truncated)).any()

    zeros = jnp.zeros(batch.shape[0])
    s, z, _, moves = jax.lax.while_loop(running, body, (states, zeros, key, jnp.zeros(batch.shape[0], jnp.int32)))
    return z, s, moves


def random_policy(seed: int = 0, responses: int = 0, patterns: int = 0) -> rollout_lib.RolloutPolicy:
    """p_π with random weights and vocabularies of `responses` and `patterns` distinct random codes."""
    rng = np.random.default_rng(seed)

    def vocabulary(count: int) -> jax.Array:
        codes = np.unique(rng.integers(0, 2**32, 2 * count + 16, dtype=np.uint64).astype(np.uint32))
        return jnp.asarray(np.sort(rng.permutation(codes)[:count]))

    count = rollout_lib.NUM_FIXED + responses + patterns
    weights = jax.random.normal(jax.random.key(seed), (count,)) * 2.0
    return rollout_lib.RolloutPolicy(
        response_vocabulary=vocabulary(responses), pattern_vocabulary=vocabulary(patterns), weights=weights
    )


def midgame(env: pgx.Env, batch: int, plies: int, seed: int = 0) -> pgx.State:
    s = jax.vmap(env.init)(jax.random.split(jax.random.key(seed), batch))

    @jax.jit
    def move(s, key):
        logits = jnp.where(s.legal_action_mask, 0.0, -jnp.inf).at[:, -1].set(-1e9)
        return jax.vmap(env.step)(s, jax.random.categorical(key, logits, axis=-1))

    for i in range(plies):
        s = move(s, jax.random.key(seed * 1000 + i))
    return s


def time_case(fn, states, repeats: int) -> tuple[float, int]:
    """(seconds per call, moves per call) of fn(states, key) -> (z, end, moves)."""
    jax.block_until_ready(fn(states, jax.random.key(0)))
    start, moves = time.perf_counter(), 0
    for r in range(repeats):
        out = fn(states, jax.random.key(r + 1))
        moves += int(jnp.sum(out[2]))
    return (time.perf_counter() - start) / repeats, moves // repeats


def cpu_model() -> str:
    """The CPU's model name as Linux reports it (machines differ: figures are compared on one), or '?'."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="9,19")
    parser.add_argument("--batches", default="1,256")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--games", default="pgx step,lean", help="which rollouts to time: 'pgx step', 'lean'")
    parser.add_argument(
        "--plies-per-loop", default="1", help="the lean rollout's plies per loop iteration, one case each: '1,4,8'"
    )
    parser.add_argument(
        "--vocabulary", default="5003,8885", help="p_π's response and 3x3 pattern vocabulary sizes: 'R,K'"
    )
    parser.add_argument("--lookup", default="hashed", help="pattern lookups to time: 'hashed', 'sorted' or both")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    lookups = args.lookup.split(",")
    if not lookups or set(lookups) - {"hashed", "sorted"}:
        parser.error(f"--lookup: choose from 'hashed', 'sorted', not {args.lookup!r}")
    loops = [int(k) for k in args.plies_per_loop.split(",")]
    games = args.games.split(",")
    if set(games) - {"pgx step", "lean"}:
        parser.error(f"--games: choose from 'pgx step', 'lean', not {args.games!r}")
    try:
        responses, patterns = (int(v) for v in args.vocabulary.split(","))
    except ValueError:
        parser.error(f"--vocabulary: two counts 'R,K', not {args.vocabulary!r}")
    if min(responses, patterns) < 0:
        parser.error(f"--vocabulary: counts must be >= 0, not {args.vocabulary!r}")
    rows = []
    sorted_policy = random_policy(0, responses, patterns)
    policies = {"sorted": sorted_policy, "hashed": rollout_lib.hashed(sorted_policy)}
    for lookup, size in ((lk, int(s)) for s in args.sizes.split(",") for lk in lookups):
        policy = policies[lookup]
        env = pgx.make(f"go_{size}x{size}")
        plies = {9: 20, 19: 80}.get(size, size * size // 5)
        for batch in (int(b) for b in args.batches.split(",")):
            states = midgame(env, batch, plies)

            def lean(s, key, env=env, k=1, policy=policy):
                z, end = rollout_game.play(policy, s, key, env, plies_per_loop=k)
                return z, end, end.steps - s._x.step_count

            cases = []
            if "pgx step" in games:
                cases.append(
                    ("pgx step", 1, jax.jit(lambda s, k, env=env, policy=policy: pgx_rollout(policy, s, k, env)))
                )
            if "lean" in games:
                cases += [("lean", k, jax.jit(functools.partial(lean, k=k))) for k in loops]
            for name, k, fn in cases:
                seconds, moves = time_case(fn, states, args.repeats)
                row = {
                    "size": size,
                    "batch": batch,
                    "game": name,
                    "plies_per_loop": k,
                    "vocabulary": [responses, patterns],
                    "lookup": lookup,
                    "start_plies": plies,
                    "moves": moves,
                    "seconds": round(seconds, 4),
                    "us_per_move": round(1e6 * seconds / moves, 2),
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            device = jax.devices()[0]
            cpu = f"XLA CPU, {os.cpu_count()} CPUs ({cpu_model()})"
            where = cpu if device.platform == "cpu" else device.device_kind
            json.dump({"machine": where, "rows": rows}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
