"""How much of the λ pool's ratings (lambda9.jsonl) the Elo fit's prior sets: the pool is refitted with 0.5, 1 and 2
virtual draws per pair (az_jax/evaluation/elo.py; its default is 1, BayesElo's 2). Many of its pairings are
shut-outs (16–0), whose maximum-likelihood gap is infinite: those gaps are the prior's.

    python -m experiments.alphago.prior_sensitivity [--pool experiments/alphago/results/lambda9.jsonl]
        [--json experiments/alphago/results/lambda9_priors.json]
"""

import argparse
import json

from az_jax.evaluation.elo import fit_elo

PRIORS = (0.5, 1.0, 2.0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default="experiments/alphago/results/lambda9.jsonl")
    parser.add_argument("--json", default="experiments/alphago/results/lambda9_priors.json")
    args = parser.parse_args(argv)
    with open(args.pool) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    results = [(r["a"], r["b"], r["wins"], r["draws"], r["losses"]) for r in rows]
    shutouts = sum(1 for r in rows if r["wins"] == 0 or r["losses"] == 0)
    fits = {p: fit_elo(results, anchor="random", prior_draws=p) for p in PRIORS}
    players = sorted(fits[1.0].players, key=lambda name: -fits[1.0].rating(name))
    print(f"{len(rows)} pairings, {shutouts} of them shut-outs (one side won every game)")
    print(f"{'player':32s}" + "".join(f"  prior {p:g}" for p in PRIORS))
    for name in players:
        print(f"{name:32s}" + "".join(f"  {fits[p].rating(name):+9.0f}" for p in PRIORS))
    out = {
        "pairings": len(rows),
        "shutouts": shutouts,
        "ratings": {str(p): {n: round(fits[p].rating(n), 1) for n in players} for p in PRIORS},
    }
    with open(args.json, "w") as f:
        f.write(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
