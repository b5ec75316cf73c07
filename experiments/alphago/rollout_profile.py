"""Where a rollout move's time goes: one ply of the lean rollout (az_jax/alphago/rollout_game.py) cut into its parts,
each jitted on its own and timed on the same B mid-game positions, µs per position.

    python -m experiments.alphago.rollout_profile [--sizes 9,19] [--batches 1,256] [--vocabulary 5003,8885]
        [--lookup hashed|sorted] [--repeats 200] [--out FILE]

Parts, in the order a ply runs them:
    bitsets     features._move_features from the carried chain labels (what encode read before the lean move
                features): a bitset per chain, liberties after a move at each point, captures, legality, own eyes
    lean        lean_moves.move_features, what encode reads now: the same liberties, legality, own eyes and
                liberties after capped at 2, from the per-chain scalars the rollout carries (lean_chains.py) and
                each point's 4 neighbours
    encode      rollout_game.encode: lean, then the rest of p_π's raw features (point states, save atari, the
                previous move's neighbour and diamond, the 3x3 and diamond codes)
    lookups     rollout_policy.indices: the two vocabulary lookups, hash-table probes (`--lookup hashed`, the default:
                what a loaded or trained p_π uses) or binary searches of the sorted vocabularies (`sorted`)
    sample      the weights gathered and summed, the sensible mask and one draw (rollout_policy.sample)
    play        rollout_game.step: the move played, chains merged and captured and their liberty counts, sums and
                sizes updated, turns since each stone
    ply         all of it in one program
A part timed alone still writes its outputs to memory; inside `ply` XLA may fuse across the cuts, so encode + lookups
+ sample + play is an upper bound on ply and their ratios are what the profile shows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import pgx

from az_jax.alphago import features as features_lib
from az_jax.alphago import lean_moves, rollout_game
from az_jax.alphago import rollout_policy as rollout_lib
from experiments.alphago.rollout_speed import cpu_model, midgame, random_policy


def parts(policy: rollout_lib.RolloutPolicy, n: int, max_steps: int) -> dict:
    """{name: fn(state, key)} for the parts of one ply on a lean state [B]."""

    def bitsets(s, key):
        return jax.vmap(lambda b, k, lab: features_lib._move_features(b, k, n, lab))(s.board, s.ko, s.label)

    def lean(s, key):
        return jax.vmap(lambda b, k, lab, c: lean_moves.move_features(b, k, n, lab, c))(
            s.board, s.ko, s.label, s.chains
        )

    def encode(s, key):
        return rollout_game.encode(s)

    def lookups(s, key, encoded):
        return rollout_lib.indices(policy, encoded)

    def sample(s, key, encoded_eye, idx):
        _, own_eye = encoded_eye
        scores = rollout_lib._scores(policy.weights, idx)
        sensible = jnp.isfinite(scores) & ~own_eye
        point = rollout_lib.sample(key, jnp.where(sensible, scores, -jnp.inf))
        return jnp.where(sensible.any(-1), point, n * n).astype(jnp.int32)

    def play(s, key, action):
        return rollout_game.step(s, action, n, max_steps)

    def ply(s, key):
        encoded, own_eye = rollout_game.encode(s)
        return play(s, key, sample(s, key, (encoded, own_eye), rollout_lib.indices(policy, encoded)))

    return {
        "bitsets": bitsets,
        "lean": lean,
        "encode": encode,
        "lookups": lookups,
        "sample": sample,
        "play": play,
        "ply": ply,
    }


def timed(fn, args, repeats: int) -> float:
    """Seconds per call of jitted fn(*args), after a warm-up."""
    f = jax.jit(fn)
    jax.block_until_ready(f(*args))
    start = time.perf_counter()
    for _ in range(repeats):
        out = f(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / repeats


def profile(size: int, batch: int, policy: rollout_lib.RolloutPolicy, repeats: int) -> dict:
    env = pgx.make(f"go_{size}x{size}")
    plies = {9: 20, 19: 80}.get(size, size * size // 5)
    s = rollout_game.from_states(midgame(env, batch, plies))
    key = jax.random.key(1)
    fns = parts(policy, size, env._game.max_termination_steps)  # type: ignore[attr-defined]
    encoded_eye = jax.jit(fns["encode"])(s, key)
    idx = jax.jit(fns["lookups"])(s, key, encoded_eye[0])
    action = jax.jit(fns["sample"])(s, key, encoded_eye, idx)
    args = {
        "bitsets": (s, key),
        "lean": (s, key),
        "encode": (s, key),
        "lookups": (s, key, encoded_eye[0]),
        "sample": (s, key, encoded_eye, idx),
        "play": (s, key, action),
        "ply": (s, key),
    }
    us = {name: 1e6 * timed(fn, args[name], repeats) / batch for name, fn in fns.items()}
    return {"size": size, "batch": batch, "us_per_position": us}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="9,19")
    parser.add_argument("--batches", default="1,256")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--vocabulary", default="5003,8885", help="response and 3x3 vocabulary sizes: 'R,K'")
    parser.add_argument("--lookup", default="hashed", choices=("hashed", "sorted"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    try:
        responses, patterns = (int(v) for v in args.vocabulary.split(","))
        sizes = [int(v) for v in args.sizes.split(",")]
        batches = [int(v) for v in args.batches.split(",")]
    except ValueError:
        parser.error("--sizes, --batches: comma-separated integers; --vocabulary: 'R,K'")
    policy = random_policy(0, responses, patterns)
    policy = rollout_lib.hashed(policy) if args.lookup == "hashed" else policy
    rows = []
    for size in sizes:
        for batch in batches:
            row = profile(size, batch, policy, args.repeats)
            cells = "  ".join(f"{k} {v:7.1f}" for k, v in row["us_per_position"].items())
            print(f"{size}x{size} batch {batch:4d}  µs/position: {cells}", flush=True)
            rows.append(row)
    given = sys.argv[1:] if argv is None else argv
    result = {
        "command": " ".join(["python -m experiments.alphago.rollout_profile", *given]),
        "cpu": cpu_model(),
        "devices": [str(d) for d in jax.devices()],
        "vocabulary": [responses, patterns],
        "lookup": args.lookup,
        "repeats": args.repeats,
        "rows": rows,
    }
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
