"""What a run's self-play search would teach its policy: for positions of uniformly random play, the spread of the
training target (PUCT's root visit distribution, Gumbel's completed-Q policy `action_weights`) at a few simulation
counts, against the network's own prior.

    python -m experiments.go_9x9.search_targets RUN_DIR [--step K] [--positions 64] [--max-plies 60] \
        [--searches puct:32,puct:16,gumbel:16]

Each search is the run's self-play search (its c_init / c_base, root Dirichlet noise, Gumbel noise) with the algorithm
and simulation count replaced. Printed per search, averaged over the positions: how many root children were visited,
the target's largest share and its entropy (nats) beside the prior's, and how often the target's favourite is the
prior's. A target that is one-hot on a move the prior does not favour trains the policy on the root noise.
Positions: `--positions` games of uniformly random moves, game i stopped after a uniformly drawn number of plies in
[0, --max-plies) (or where it ended).
"""

import argparse
import dataclasses
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np

from az_jax.core import search as search_lib
from az_jax.runtime.agent import load_agent
from az_jax.runtime.checkpoint import CheckpointError


def random_positions(env, key: jax.Array, count: int, max_plies: int):
    """`count` states [count, ...] of uniformly random play, each stopped after its own number of plies."""
    init_key, plies_key, key = jax.random.split(key, 3)
    state = jax.vmap(env.init)(jax.random.split(init_key, count))
    plies = jax.random.randint(plies_key, (count,), 0, max_plies)
    step = jax.jit(jax.vmap(env.step))
    for ply in range(max_plies):
        key, move_key = jax.random.split(key)
        action = jax.random.categorical(move_key, jnp.where(state.legal_action_mask, 0.0, -jnp.inf))
        moved = step(state, action)
        keep = (ply >= plies) | moved.terminated  # [count]
        state = jax.tree.map(functools.partial(_where_rows, keep), state, moved)
    return state


def _where_rows(keep: jax.Array, old: jax.Array, new: jax.Array) -> jax.Array:
    """Row i of `old` where keep[i], else of `new` ([count, ...])."""
    return jnp.where(keep.reshape((-1,) + (1,) * (new.ndim - 1)), old, new)


def entropy(p: np.ndarray) -> np.ndarray:
    return -np.where(p > 0, p * np.log(np.maximum(p, 1e-30)), 0.0).sum(-1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--step", type=int, default=None)
    parser.add_argument("--positions", type=int, default=64)
    parser.add_argument("--max-plies", type=int, default=60)
    parser.add_argument(
        "--searches", default="puct:32,puct:16,gumbel:16", help="algorithm:simulations, comma-separated"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        searches = [(a, int(n)) for a, n in (s.split(":") for s in args.searches.split(","))]
    except ValueError:
        print(f"search_targets: --searches wants algorithm:simulations pairs, got {args.searches!r}", file=sys.stderr)
        return 2
    if any(a not in ("puct", "gumbel") or n < 1 for a, n in searches) or args.positions < 1 or args.max_plies < 1:
        print("search_targets: algorithms are puct or gumbel, counts and sizes >= 1", file=sys.stderr)
        return 2
    try:
        agent = load_agent(args.run_dir, args.step)
    except (CheckpointError, FileNotFoundError, ValueError) as e:
        print(f"search_targets: {e}", file=sys.stderr)
        return 2
    env, apply_fn = agent.env, agent.setup.apply_fn
    positions_key, search_key = jax.random.split(jax.random.key(args.seed))
    states = random_positions(env, positions_key, args.positions, args.max_plies)
    logits, _ = apply_fn(agent.variables, states.observation)
    prior = np.asarray(jax.nn.softmax(search_lib.mask_logits(logits, states.legal_action_mask)))  # [P, A]
    legal = np.asarray(states.legal_action_mask).sum(-1).mean()
    print(
        f"{args.run_dir} step {agent.step} ({agent.config.game}): {args.positions} positions, {legal:.0f} legal moves "
        f"on average, prior entropy {entropy(prior).mean():.2f}"
    )
    for (algorithm, simulations), key in zip(searches, jax.random.split(search_key, len(searches))):
        settings = dataclasses.replace(
            search_lib.SearchConfig.for_selfplay(agent.config), algorithm=algorithm, num_simulations=simulations
        )
        run = jax.jit(lambda v, k, s, settings=settings: search_lib.run_search(apply_fn, env, v, k, s, settings))
        out = run(agent.variables, key, states)
        target = np.asarray(out.action_weights)  # [P, A]
        visited = (np.asarray(search_lib.visit_counts(out)) > 0).sum(-1)
        same = np.mean(target.argmax(-1) == prior.argmax(-1))
        print(
            f"  {algorithm}:{simulations}: children visited {visited.mean():.1f}, target's largest share "
            f"{target.max(-1).mean():.2f}, target entropy {entropy(target).mean():.2f}, target's favourite is the "
            f"prior's in {same:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
