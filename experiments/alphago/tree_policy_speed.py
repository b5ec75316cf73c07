"""Microseconds per p_τ (tree policy) move selection, its pattern lookups by hash table against binary search.

    python -m experiments.alphago.tree_policy_speed --out experiments/alphago/results/tree_policy_speed_cpu.json
        [--sizes 9,19] [--batches 1,64,256] [--vocabulary 32207,69338,32207] [--repeats 20]

p_τ with random weights and random vocabularies of the sizes given (default: the paper's, Extended Data Table 4:
32,207 response patterns, 69,338 3×3 patterns, 32,207 12-point diamonds) picks a move (features, logits and a sample:
rollout_policy.time_per_move) in B positions after random play (20 plies on 9×9, 80 on 19×19), once with the
vocabularies' hash tables (what a loaded or trained p_τ uses) and once by binary search (tables None), same positions,
same policy. p_τ is the placeholder prior of APV-MCTS's expansion threshold, evaluated once per expanded node (AlphaGo,
Methods, "Search algorithm"; the paper's takes 2 µs on one CPU thread, Methods, "Rollout policy").
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import numpy as np
import pgx

from az_jax.alphago import rollout_policy as rollout_lib
from az_jax.alphago import tree_policy
from az_jax.alphago.position import from_pgx
from experiments.alphago.rollout_speed import cpu_model, midgame, random_policy


def random_tree_policy(seed: int, responses: int, patterns: int, diamonds: int) -> tree_policy.TreePolicy:
    """p_τ with random weights and vocabularies (tables None: binary search; `tree_policy.hashed` adds them)."""
    front = random_policy(seed, responses, patterns)
    diamond = random_policy(seed + 1, diamonds, 0).response_vocabulary
    count = rollout_lib.NUM_FIXED + responses + patterns + tree_policy.NUM_EXTRA + diamonds
    return tree_policy.TreePolicy(
        response_vocabulary=front.response_vocabulary,
        pattern_vocabulary=front.pattern_vocabulary,
        diamond_vocabulary=diamond,
        weights=jax.random.normal(jax.random.key(seed), (count,)) * 2.0,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="9,19")
    parser.add_argument("--batches", default="1,64,256")
    parser.add_argument("--vocabulary", default="32207,69338,32207", help="response, 3x3 and diamond sizes 'R,K,D'")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    try:
        responses, patterns, diamonds = (int(v) for v in args.vocabulary.split(","))
    except ValueError:
        parser.error(f"--vocabulary: three counts 'R,K,D', not {args.vocabulary!r}")
    if min(responses, patterns, diamonds) < 0 or args.repeats < 1:
        parser.error("--vocabulary counts must be >= 0 and --repeats >= 1")
    searched = random_tree_policy(0, responses, patterns, diamonds)
    policies = {"sorted": searched, "hashed": tree_policy.hashed(searched)}
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        env = pgx.make(f"go_{size}x{size}")
        plies = {9: 20, 19: 80}.get(size, size * size // 5)
        for batch in (int(b) for b in args.batches.split(",")):
            positions = jax.tree.map(np.asarray, from_pgx(midgame(env, batch, plies)))
            for lookup, policy in policies.items():
                # repeats scaled so each case runs about as many positions: batch 1 is the noisiest
                repeats = args.repeats * max(1, 64 // batch)
                timed = rollout_lib.time_per_move(policy, positions, batch, repeats, family=tree_policy.TREE)
                row = {"size": size, "batch": batch, "lookup": lookup, "vocabulary": [responses, patterns, diamonds]}
                row.update(repeats=repeats, us_per_position=round(timed["us_per_position"], 2))
                print(json.dumps(row), flush=True)
                rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": f"XLA CPU, {os.cpu_count()} CPUs ({cpu_model()})", "rows": rows}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
