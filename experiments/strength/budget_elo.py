"""One Elo pool over the checkpoints of several connect-four runs, against their training minutes (issue 29's
compute-scaling study: the budget runs of strength_ablation.py and `make train`, rated together).

    python -m experiments.strength.budget_elo --out experiments/strength/results/budget \
        --run budget90=runs/budget/budget90-s0:2.5,5,10,20,30,45,60,75,90 \
        --run budget30=runs/budget/budget30-s0:30 --run make_train=runs/connect_four-small:28 \
        --baselines "mcts:sims=200;mcts:sims=1000;run:connect_four" --anchor mcts:sims=200 --games 60

Each `--run LABEL=DIR:MINUTES` adds DIR's checkpoints nearest to those minutes of its own training wall-clock
(`ladder.training_seconds`; the last point takes the last checkpoint), named LABEL@STEP. Pairings, in the shape of
`az-jax ladder`'s but across runs: the pool's checkpoints sorted by training time, each against the next; each against
every baseline; consecutive baselines. All games go into one Bradley-Terry fit (az_jax/evaluation/elo.py) anchored
on `--anchor` = 0. Matches are kept in OUT/pool_matches.jsonl, so an interrupted pool resumes and a longer run's new
points only play their own pairings. Writes OUT/pool_elo.jsonl (a line per player), OUT/pool_elo.md and
OUT/pool_elo_vs_minutes.png.
"""

import argparse
import json
import os
import sys

from az_jax.evaluation import elo, ladder
from az_jax.evaluation import players as players_lib
from az_jax.runtime.agent import load_agent
from az_jax.runtime.files import replaced_whole
from experiments.strength.strength_elo import steps_at


def parse_run(text: str) -> tuple[str, str, list[float]]:
    """'LABEL=DIR:M1,M2' -> (LABEL, DIR, [M1, M2]); SystemExit with one line on a malformed value."""
    label, eq, rest = text.partition("=")
    run_dir, colon, minutes = rest.rpartition(":")
    try:
        if not (eq and colon and label and run_dir):
            raise ValueError
        return label, run_dir, sorted(float(m) for m in minutes.split(","))
    except ValueError:
        raise SystemExit(f"budget_elo: --run takes LABEL=DIR:MINUTES[,MINUTES...], got {text!r}") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", action="append", required=True, help="LABEL=DIR:MINUTES,... (repeatable)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--baselines", default="mcts:sims=200;mcts:sims=1000", help="fixed players, ';'-separated")
    parser.add_argument("--anchor", default="mcts:sims=200", help="the baseline rated 0")
    parser.add_argument("--games", type=int, default=60, help="games per pairing")
    parser.add_argument("--simulations", type=int, default=None, help="checkpoints' search (default: each run's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    runs = [parse_run(r) for r in args.run]
    for _, run_dir, _ in runs:
        if not os.path.isdir(run_dir):
            parser.error(f"no run dir {run_dir}")

    players: dict = {}
    minutes: dict[str, float] = {}
    origin: dict[str, tuple] = {}
    for label, run_dir, points in runs:
        seconds = ladder.training_seconds(run_dir)
        for step in steps_at(run_dir, points):
            name = f"{label}@{step}"
            agent = load_agent(run_dir, step=step)
            players[name] = players_lib.agent_player(agent, args.simulations, name=name)
            minutes[name] = seconds[step] / 60
            origin[name] = (label, run_dir, step)
    checkpoints = sorted(players, key=lambda n: (minutes[n], n))
    sims = {players[n].simulations for n in checkpoints}
    if len(sims) != 1:
        parser.error(f"the runs search with different simulations {sorted(sims)}: give --simulations")
    baselines = [players_lib.make_player(spec, "connect_four") for spec in args.baselines.split(";")]
    for b in baselines:
        if not isinstance(b, players_lib.JaxPlayer):
            parser.error(f"baselines run on device; {b.name} is an engine")
        players[b.name] = b
    anchor = players_lib.make_player(args.anchor, "connect_four").name
    if anchor not in players:
        parser.error(f"--anchor {args.anchor!r} is not one of the baselines")

    os.makedirs(args.out, exist_ok=True)
    todo = ladder.pairings(checkpoints, [b.name for b in baselines])
    results = ladder.play_pairings(
        "connect_four",
        players,
        todo,
        games=args.games,
        simulations=sims.pop(),
        seed=args.seed,
        path=os.path.join(args.out, "pool_matches.jsonl"),
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    fit = elo.fit_elo(results, anchor=anchor)
    rows = []
    for name in checkpoints + [b.name for b in baselines]:
        low, high = fit.interval(name)
        label, run_dir, step = origin.get(name, (None, None, None))
        rows.append(
            {
                "player": name,
                "run": label,
                "run_dir": run_dir,
                "step": step,
                "minutes": round(minutes[name], 2) if name in minutes else None,
                "elo": round(fit.rating(name), 1),
                "elo_low": round(low, 1),
                "elo_high": round(high, 1),
                "games": int(fit.games[fit.players.index(name)]),
            }
        )
    with replaced_whole(os.path.join(args.out, "pool_elo.jsonl")) as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    table = [
        f"One Elo pool, anchor {anchor} = 0, {args.games} games a pairing, checkpoints at "
        f"{players[checkpoints[0]].simulations} simulations, {fit.confidence:.0%} intervals, "
        f"virtual draws per pair {fit.prior_draws:g}",
        "",
        "| player | run | iteration | training minutes | Elo | interval | games |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t = f"{r['minutes']:.1f}" if r["minutes"] is not None else ""
        table.append(
            f"| {r['player']} | {r['run'] or ''} | {r['step'] if r['step'] is not None else ''} | {t} | "
            f"{r['elo']:+.0f} | [{r['elo_low']:+.0f}, {r['elo_high']:+.0f}] | {r['games']} |"
        )
    with open(os.path.join(args.out, "pool_elo.md"), "w") as f:
        f.write("\n".join(table) + "\n")
    print("\n".join(table))
    plot(rows, os.path.join(args.out, "pool_elo_vs_minutes.png"))
    return 0


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label in dict.fromkeys(r["run"] for r in rows if r["run"]):
        pts = [r for r in rows if r["run"] == label]
        err = [[r["elo"] - r["elo_low"] for r in pts], [r["elo_high"] - r["elo"] for r in pts]]
        ax.errorbar([r["minutes"] for r in pts], [r["elo"] for r in pts], yerr=err, marker="o", capsize=3, label=label)
    for i, r in enumerate(r for r in rows if not r["run"]):
        ax.axhline(r["elo"], linestyle="--", color=f"C{i + 3}", label=r["player"])
    ax.set_xlabel("training time, 2 CPU cores (minutes)")
    ax.set_ylabel("Elo")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
