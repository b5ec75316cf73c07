"""`az-jax ladder RUN_DIR`: Elo of every checkpoint of a run, rated together with fixed baselines.

Pairings: each checkpoint against the next one, each checkpoint against every baseline, and consecutive baselines
against each other; the games of all pairings go into one maximum-likelihood Bradley–Terry fit
(az_jax/evaluation/elo.py) anchored on a named player (uniform random = 0 by default) — the shape of the AlphaZero
paper's Figure 1. Played matches are kept in RUN_DIR/ladder/matches.jsonl, so re-running after more training only
plays the new pairings. Outputs, all in RUN_DIR/ladder/: ratings.csv, ratings.md, elo_vs_step.png, elo_vs_time.png
(time = the run's own training wall-clock: the sum of its iteration, evaluation and gating seconds in
metrics.jsonl).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

import jax

from az_jax.evaluation import elo
from az_jax.evaluation import match as match_lib
from az_jax.evaluation import players as players_lib
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.agent import load_agent
from az_jax.runtime.files import append_jsonl, read_jsonl, write_csv
from az_jax.runtime.metrics import read_metrics
from envs import get_game


def checkpoint_steps(run_dir: str) -> list[int]:
    if not os.path.isdir(ckpt.checkpoint_dir(run_dir)):
        raise ckpt.CheckpointError(f"{run_dir} has no checkpoints/ directory")
    steps = sorted(ckpt.make_manager(run_dir, read_only=True).all_steps())
    if not steps:
        raise ckpt.CheckpointError(f"{run_dir} has no checkpoints")
    return steps


def training_seconds(run_dir: str) -> dict[int, float]:
    """{iteration: seconds of training up to and including it} from metrics.jsonl (iteration + evaluation time)."""
    total, out = 0.0, {}
    for record in read_metrics(run_dir):
        total += record.get("perf/iteration_seconds", 0.0) + sum(
            v for k, v in record.items() if k.startswith(("eval/", "gating/")) and k.endswith("seconds")
        )
        out[int(record["iteration"])] = total
    return out


def _matches_path(run_dir: str) -> str:
    return os.path.join(run_dir, "ladder", "matches.jsonl")


def pairings(checkpoints: list[str], baselines: list[str]) -> list[tuple[str, str]]:
    """Consecutive checkpoints, every checkpoint × every baseline, consecutive baselines."""
    pairs = list(zip(checkpoints, checkpoints[1:]))
    pairs += [(c, b) for c in checkpoints for b in baselines]
    pairs += list(zip(baselines, baselines[1:]))
    return pairs


def play_pairings(
    game: str,
    players: dict,
    todo: list[tuple[str, str]],
    *,
    games: int,
    simulations: int | None,
    seed: int,
    path: str,
    log: Callable[[str], None],
) -> list[tuple[str, str, int, int, int]]:
    """Plays pairing i of `todo` (names of `players`, JAX players) with key fold_in(key(seed), i), `games` games from
    the game's random openings, unless `path` (JSON Lines, one record per pairing) already holds it: an interrupted
    ladder resumes where it stopped. Returns (a, b, wins, draws, losses) of A for every pairing."""
    opening_plies = get_game(game).opening_plies
    done = {
        (m["a"], m["b"], m["games"], m["simulations"], m.get("opening_plies", opening_plies), m["seed"]): m
        for m in read_jsonl(path)
    }
    os.makedirs(os.path.dirname(path), exist_ok=True)
    results = []
    for index, (a, b) in enumerate(todo):
        key = (a, b, games, simulations, opening_plies, seed)
        m = done.get(key)
        if m is None:
            t0 = time.perf_counter()
            rng = jax.random.fold_in(jax.random.key(seed), index)
            played = match_lib.play_jax_match(game, players[a], players[b], rng, games, opening_plies=opening_plies)
            r = [g.result for g in played]
            m = {
                "a": a,
                "b": b,
                "wins": sum(x > 0 for x in r),
                "draws": sum(x == 0 for x in r),
                "losses": sum(x < 0 for x in r),
                "games": games,
                "simulations": simulations,
                "opening_plies": opening_plies,
                "seed": seed,
                "seconds": time.perf_counter() - t0,
            }
            append_jsonl(path, m)
            log(
                f"[{index + 1}/{len(todo)}] {a} vs {b}: +{m['wins']} ={m['draws']} -{m['losses']} "
                f"({m['seconds']:.0f} s)"
            )
        results.append((a, b, m["wins"], m["draws"], m["losses"]))
    return results


def run_ladder(
    run_dir: str,
    *,
    games: int = 100,
    simulations: int | None = None,
    baselines: Sequence[str] = ("random", "mcts:sims=200"),
    anchor: str = "random",
    seed: int = 0,
    steps: str | None = None,
    weights: str = "best",
    log=print,
) -> str:
    """Plays the missing pairings, fits the ratings, writes the table and plots; returns the table (markdown)."""
    all_steps = checkpoint_steps(run_dir)
    if steps:
        try:
            wanted = sorted({int(s) for s in steps.split(",")})
        except ValueError:
            raise players_lib.PlayerSpecError(f"--steps must be comma-separated integers, got {steps!r}") from None
        missing = [s for s in wanted if s not in all_steps]
        if missing:
            raise ckpt.CheckpointError(f"{run_dir} has no checkpoint(s) {missing} (has {all_steps})")
        all_steps = wanted
    agents = {f"step{s}": load_agent(run_dir, step=s, weights=weights) for s in all_steps}
    game = next(iter(agents.values())).config.game
    players = {name: players_lib.agent_player(a, simulations, name=name) for name, a in agents.items()}
    sims = next(iter(players.values())).simulations
    baseline_players = [players_lib.make_player(spec, game) for spec in baselines]
    for p in baseline_players:
        if not isinstance(p, players_lib.JaxPlayer):
            raise players_lib.PlayerSpecError(
                f"ladder baselines run on device; {p.name} is an engine (rate it with `az-jax eval`)"
            )
        players[p.name] = p
    anchor_name = players_lib.make_player(anchor, game).name if anchor not in players else anchor
    if anchor_name not in players:
        raise players_lib.PlayerSpecError(
            f"anchor {anchor!r} is not one of the ladder's players ({', '.join(players)})"
        )
    todo = pairings(list(agents), [p.name for p in baseline_players])
    results = play_pairings(
        game, players, todo, games=games, simulations=sims, seed=seed, path=_matches_path(run_dir), log=log
    )
    fit = elo.fit_elo(results, anchor=anchor_name)
    return write_outputs(run_dir, fit, agents, [p.name for p in baseline_players], sims)


def write_outputs(run_dir: str, fit: elo.EloFit, agents: dict, baselines: list[str], sims: int) -> str:
    out_dir = os.path.join(run_dir, "ladder")
    seconds = training_seconds(run_dir)
    rows = []
    for name in list(agents) + baselines:
        step = agents[name].step if name in agents else None
        low, high = fit.interval(name)
        rows.append(
            {
                "player": name,
                "step": step,
                "train_seconds": seconds.get(step) if step is not None else None,
                "elo": fit.rating(name),
                "elo_low": low,
                "elo_high": high,
                "games": int(fit.games[fit.players.index(name)]),
            }
        )
    write_csv(os.path.join(out_dir, "ratings.csv"), rows)
    lines = [
        f"Elo (anchor {fit.anchor} = {fit.anchor_rating:g}; checkpoints search {sims} simulations; "
        f"{fit.confidence:.0%} intervals; virtual draws per pair {fit.prior_draws:g})",
        "",
        "| player | step | training time | Elo | interval | games |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        t = f"{r['train_seconds'] / 60:.1f} min" if r["train_seconds"] is not None else ""
        lines.append(
            f"| {r['player']} | {r['step'] if r['step'] is not None else ''} | {t} | {r['elo']:.0f} | "
            f"[{r['elo_low']:.0f}, {r['elo_high']:.0f}] | {r['games']} |"
        )
    table = "\n".join(lines)
    with open(os.path.join(out_dir, "ratings.md"), "w") as f:
        f.write(table + "\n")
    plot(rows, baselines, out_dir, os.path.basename(os.path.abspath(run_dir)))
    return table


def plot(rows: list[dict], baselines: list[str], out_dir: str, title: str) -> None:
    import matplotlib  # local: slow to import, and only the plots need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ckpts = [r for r in rows if r["step"] is not None]
    for x_key, x_label, file, scale in (
        ("step", "training iteration", "elo_vs_step.png", 1.0),
        ("train_seconds", "training time (minutes)", "elo_vs_time.png", 60.0),
    ):
        points = [r for r in ckpts if r[x_key] is not None]
        fig, ax = plt.subplots(figsize=(6, 4))
        xs = [r[x_key] / scale for r in points]
        ys = [r["elo"] for r in points]
        err = [[r["elo"] - r["elo_low"] for r in points], [r["elo_high"] - r["elo"] for r in points]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label="az_jax checkpoints")
        for i, r in enumerate(rr for rr in rows if rr["player"] in baselines):
            ax.axhline(r["elo"], linestyle="--", color=f"C{i + 1}", label=r["player"])
        ax.set_xlabel(x_label)
        ax.set_ylabel("Elo")
        ax.set_title(title)
        ax.legend(loc="lower right")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, file), dpi=100)
        plt.close(fig)
