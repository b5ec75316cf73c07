"""Connect four against the exact solver: the share of optimal moves of a run's raw policy and of its N-simulation
search on the labelled position set (az_jax/evaluation/connect_four_solver.py), overall and in won / drawn positions,
and optionally its score against rollout MCTS (`az-jax eval`).

    python -m experiments.strength.solver_benchmark RUN_DIR [RUN_DIR ...] [--step K | --steps K1,K2,...]
        [--simulations 64] [--positions experiments/data/connect_four_positions.jsonl]
        [--mcts 200,1000 --games 100] [--json FILE] [--by-depth [--depths 0,8,16,24]] [--search puct|gumbel]
        [--symmetry-ensemble]

Any other connect-four player is scored the same way: wrap it as a `(states, key) -> actions` function and call
`connect_four_solver.evaluate`.
"""

import argparse
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np

from az_jax.evaluation import connect_four_solver as solver_lib
from az_jax.evaluation.evaluate import evaluate, with_play_settings
from az_jax.evaluation.positions import Result, states_from_moves
from az_jax.runtime.agent import load_agent
from az_jax.runtime.checkpoint import CheckpointError

DEFAULT_POSITIONS = solver_lib.DEFAULT_POSITIONS


def depth_buckets(starts: str) -> tuple[tuple[int, int], ...]:
    """ "0,8,16,24" -> ((0, 8), (8, 16), (16, 24), (24, 42)): from each count to the next, the last to a full board."""
    firsts = [int(k) for k in starts.split(",")]
    if not firsts or firsts != sorted(set(firsts)) or firsts[0] < 0 or firsts[-1] >= 42:
        raise ValueError(f"--depths must be increasing stone counts in 0-41, got {starts!r}")
    return tuple(zip(firsts, [*firsts[1:], 42]))


# Stones on the board: the depth buckets of `--by-depth`, by the stone count each starts at (`--depths` sets others)
DEFAULT_DEPTHS = "0,8,16,24"
DEPTHS = depth_buckets(DEFAULT_DEPTHS)


def load_connect_four(run_dir: str, step: int | None):
    """load_agent(run_dir, step); CheckpointError (one line) if it does not load or trains another game."""
    agent = load_agent(run_dir, step)
    if agent.config.game != "connect_four":
        raise CheckpointError(f"{run_dir} trains {agent.config.game}, not connect_four")
    return agent


ENSEMBLE = ("eval_symmetry_ensemble=true",)  # the greedy-play setting of --symmetry-ensemble


def agent_results(agent, positions: solver_lib.PositionSet, simulations: int) -> tuple[Result, Result]:
    """The agent's raw-policy move (argmax) and its N-simulation search's move in every position."""
    raw_fn = lambda states, key: jnp.argmax(agent.policy_value(states)[0], axis=-1)
    raw = solver_lib.evaluate(raw_fn, positions, jax.random.key(0))
    return raw, solver_lib.evaluate(agent.player(simulations), positions, jax.random.key(1))


def benchmark_agent(
    agent, positions: solver_lib.PositionSet, simulations: int, by_depth: bool = False, depths=DEPTHS
) -> dict:
    """{"raw": summary, "searchN": summary} and with `by_depth` {"depth": {"a-b": {"raw": share, "searchN": share,
    "positions": n, "value_won": mean, "value_drawn": mean}}} for the buckets `depths` ((first, past last) stones;
    a mean is None where the bucket has no such position)."""
    raw, search = agent_results(agent, positions, simulations)
    row = {"raw": raw.summary(), f"search{simulations}": search.summary()}
    if by_depth:
        depth, won, drawn = positions.depth, positions.value == 1, positions.value == 0
        states = states_from_moves(agent.env, positions.moves)
        value = np.asarray(agent.policy_value(states)[1])  # [P] the network's value for the mover
        mean = lambda mask: float(value[mask].mean()) if mask.any() else None
        row["depth"] = {
            f"{lo}-{hi - 1}": {
                "positions": int(m.sum()),
                "raw": float(raw.optimal[m].mean()),
                f"search{simulations}": float(search.optimal[m].mean()),
                "value_won": mean(m & won),
                "value_drawn": mean(m & drawn),
            }
            for lo, hi in depths
            if (m := (depth >= lo) & (depth < hi)).any()
        }
    return row


def line(name: str, summary: dict) -> str:
    return (
        f"{name}: {summary['optimal']:.3f} optimal ({summary['positions']} positions; won "
        f"{summary['optimal_won']:.3f} of {summary['won']}, drawn {summary['optimal_drawn']:.3f} of "
        f"{summary['drawn']})"
    )


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{x:+.3f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+")
    parser.add_argument("--step", type=int, default=None)
    parser.add_argument(
        "--steps", default=None, help="comma-separated checkpoints, each scored in turn (instead of --step)"
    )
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--positions", default=DEFAULT_POSITIONS)
    parser.add_argument(
        "--mcts", default="", help="comma-separated rollout-MCTS simulation counts to play, e.g. 200,1000"
    )
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--json", default=None, help="append one JSON line per run to this file")
    parser.add_argument("--by-depth", action="store_true", help="also the shares by stones on the board")
    parser.add_argument(
        "--depths",
        default=DEFAULT_DEPTHS,
        help=f"--by-depth's buckets: the stone count each starts at (default {DEFAULT_DEPTHS})",
    )
    parser.add_argument(
        "--search",
        choices=("puct", "gumbel"),
        default=None,
        help="the search to score, solver shares and --mcts (default: the run's own)",
    )
    parser.add_argument(
        "--symmetry-ensemble",
        action="store_true",
        help="act with eval_symmetry_ensemble on (the solver shares and --mcts)",
    )
    args = parser.parse_args(argv)
    try:
        positions = solver_lib.load(args.positions)
        depths = depth_buckets(args.depths)
    except (OSError, ValueError) as e:
        print(f"solver_benchmark: {e}", file=sys.stderr)
        return 2
    steps = [int(k) for k in args.steps.split(",")] if args.steps else [args.step]
    for run_dir, step in [(r, k) for r in args.run_dirs for k in steps]:
        try:
            agent = load_connect_four(run_dir, step)
        except CheckpointError as e:
            print(f"solver_benchmark: {e}", file=sys.stderr)
            return 2
        # the greedy-play settings this scoring changes (core/play_keys.py), for the solver shares and --mcts alike
        play = ((f"eval_search={args.search}",) if args.search else ()) + (ENSEMBLE if args.symmetry_ensemble else ())
        agent = with_play_settings(agent, play)
        scores = benchmark_agent(agent, positions, args.simulations, args.by_depth, depths)
        row = {
            "run_dir": run_dir,
            "step": agent.step,
            "search": agent.config.acting_search,
            "symmetry_ensemble": agent.config.eval_symmetry_ensemble,
            "positions_file": args.positions,  # what a comparison with another run's shares must share
            "simulations": args.simulations,
            **scores,
        }
        print(f"{run_dir} @ {agent.step} ({agent.config.acting_search} search)")
        for name in ("raw", f"search{args.simulations}"):
            print("  " + line(name, row[name]))
        for bucket, shares in row.get("depth", {}).items():
            print(
                f"  {bucket} stones ({shares['positions']} positions): raw {shares['raw']:.3f}, "
                f"search {shares[f'search{args.simulations}']:.3f}; mean value in won positions "
                f"{_signed(shares['value_won'])}, in drawn {_signed(shares['value_drawn'])}"
            )
        for sims in [int(s) for s in args.mcts.split(",") if s.strip()]:
            summary = evaluate(
                run_dir,
                f"mcts:sims={sims}",
                games=args.games,
                step=agent.step,
                simulations=args.simulations,
                save_games=False,
                play=play,
                log=lambda *a: None,
            )
            row[f"vs_mcts{sims}"] = summary.to_json()
            print("  " + summary.line())
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
