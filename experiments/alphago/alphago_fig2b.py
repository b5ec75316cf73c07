"""AlphaGo's Fig. 2b at small scale: the mean squared error of position evaluators against the game outcome, by move
number, on the held-out positions of an agent's value data (one position per self-play game, never trained on).

    python -m experiments.alphago.alphago_fig2b --agent runs/alphago/ag9 \
        --out experiments/alphago/results/fig2b_9x9.json

Evaluators (Silver et al., Nature 2016, Fig. 2b): the value network v_θ (DIR/value) and the mean outcome of k
rollouts played to the end from each position by the fast rollout policy p_π (DIR/rollout.npz, k = --k), and by
sampling the SL and RL policy networks p_σ and p_ρ (DIR/sl, DIR/rl; k = --k-net, each rollout costs a network
evaluation with the 48 feature planes per move). Errors are mean (z − value)² with z = ±1 for the player to move
(the paper's axis reads as ½ of that: see az_jax/alphago/value_training.py). Writes OUT (the rows) and prints a
Markdown table with the seconds each evaluator took.
"""

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from az_jax.alphago import agent as agent_lib
from az_jax.alphago import apv_mcts, reinforce, rollout_policy, supervised, value_data, value_store, value_training


def _p_pi_evaluator(policy, key: jax.Array, k: int):
    """states [B] -> the mean z of k p_π rollouts from each (apv_mcts.rollout: sensible points, no own eyes)."""

    @jax.jit
    def values(states, key):
        tiled = jax.tree.map(lambda x: jnp.concatenate([x] * k), states)  # copy j of state i at j · B + i
        z, _ = apv_mcts.rollout(policy, tiled, key)
        return z.reshape(k, -1).mean(axis=0)

    calls = iter(range(1 << 30))
    return lambda states: np.asarray(values(states, jax.random.fold_in(key, next(calls))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agent", required=True, help="an AlphaGo agent directory (az_jax/alphago/agent.py)")
    parser.add_argument("--out", required=True, help="the rows, JSON")
    parser.add_argument("--k", type=int, default=16, help="p_π rollouts per position")
    parser.add_argument("--k-net", type=int, default=4, help="p_σ / p_ρ rollouts per position (0: none)")
    parser.add_argument("--positions", type=int, default=0, help="held-out positions used (0: all)")
    parser.add_argument("--bins", default="1,11,21,31,41,61,102", help="move-number bin edges")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    _, held_out = value_store.load_split(agent_lib.part(args.agent, "value_data"))
    if args.positions:
        held_out = held_out.take(np.arange(min(args.positions, len(held_out))))
    bins = [int(b) for b in args.bins.split(",")]
    n = held_out.size
    states = value_data.replay_states(held_out.moves.astype(np.int32), n)  # pgx states of the same positions
    key = jax.random.key(args.seed)
    evaluators = {}
    value_config, value_params, _ = value_training.restore_params(agent_lib.part(args.agent, "value"))
    evaluators["v_theta"] = (value_training.value_fn(value_config, value_params), held_out.position)
    policy = rollout_policy.load(agent_lib.part(args.agent, "rollout"))
    evaluators[f"p_pi rollouts (k={args.k})"] = (_p_pi_evaluator(policy, jax.random.fold_in(key, 1), args.k), states)
    if args.k_net:
        for i, (name, (config, params, _)) in enumerate(
            {
                "p_sigma": supervised.restore_params(agent_lib.part(args.agent, "sl")),
                "p_rho": reinforce.restore_policy(agent_lib.part(args.agent, "rl")),
            }.items()
        ):
            sample = value_training.sampling_policy(config, params)
            evaluator = value_training.rollout_evaluator(sample, jax.random.fold_in(key, 2 + i), args.k_net)
            evaluators[f"{name} rollouts (k={args.k_net})"] = (evaluator, states)

    results = {"agent": os.path.abspath(args.agent), "positions": len(held_out), "bins": bins, "evaluators": {}}
    for name, (fn, inputs) in evaluators.items():
        tick = time.perf_counter()
        rows = value_training.mse_by_move(fn, inputs, held_out.outcome, held_out.move_number, bins, batch_size=128)
        seconds = time.perf_counter() - tick
        counted = [r for r in rows if r["positions"]]
        mse = sum(r["mse"] * r["positions"] for r in counted) / sum(r["positions"] for r in counted)
        results["evaluators"][name] = {"rows": rows, "mse": mse, "seconds": seconds}
        print(f"{name}: mse {mse:.3f} ({seconds:.0f} s)", file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)

    header = [f"{r['from']}–{r['to']} ({r['positions']})" for r in next(iter(results["evaluators"].values()))["rows"]]
    print("| evaluator | all | " + " | ".join(header) + " |")
    print("|---" * (len(header) + 2) + "|")
    for name, entry in results["evaluators"].items():
        cells = ["—" if r["mse"] is None else f"{r['mse']:.3f}" for r in entry["rows"]]
        print(f"| {name} | {entry['mse']:.3f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
