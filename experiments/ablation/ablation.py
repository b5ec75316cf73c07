"""AlphaZero vs AlphaGo Zero, and each of AlphaGo Zero's switches alone, on one game at equal compute; rated by Elo.

Every variant trains from the `small_agz` preset of the game (the `small` preset with AlphaGo Zero's switches and
their small-scale settings) with the switches set per variant, and the same seed, number of iterations, games, plies and
gradient steps per iteration (so the same positions generated and the same minibatches trained); only the switches
differ (az_jax/core/config.py VARIANT_SWITCHES). Gating matches are extra compute on top; they show on the wall-clock
axis.

Rating: the checkpoints of every run, uniform random and a rollout-MCTS baseline play each other in one pool
(az_jax/evaluation/match.py `play_jax_match`, random openings played from both sides), and one Bradley–Terry fit
(az_jax/evaluation/elo.py `fit_elo`) anchored on random = 0 rates them all. Pairings: each run's first checkpoint vs
random, every checkpoint vs the MCTS baseline, consecutive checkpoints of a run, and at every checkpoint step each
variant against alphazero's checkpoint of the same step (the direct comparison). Every checkpoint is played with the
SAME evaluation search — the alphazero config's: greedy by visits, no noise, no random symmetries — so the ratings
compare the networks the switches trained, not the search used to play them. For gated runs the checkpoint is the
latest weights (the candidate), as the AlphaGo Zero paper's Fig. 3a rates each checkpoint.

The training runs go to RUNS_DIR/<variant>/ (default runs/ablation/GAME, not in git; a re-run resumes them); the
outputs to OUT_DIR: matches.jsonl (played pairings, reused on a re-run), ratings.csv, ratings.md, elo_vs_step.png,
elo_vs_time.png.

    python -m experiments.ablation.ablation --out experiments/ablation --iterations 20 --games 40
"""

import argparse
import os
import time

import jax

from az_jax.runtime.files import write_csv
from az_jax.runtime.metrics import read_metrics

ABLATION_SWITCHES = {
    "alphazero": ["variant=alphazero"],
    "alphago_zero": [],
    "gating": ["variant=alphazero", "gating=true"],
    "resign": ["variant=alphazero", "resign=true"],
    "augment_symmetries": ["variant=alphazero", "augment_symmetries=true"],
    "search_symmetries": ["variant=alphazero", "search_symmetries=true"],
}


def variant_config(game: str, variant: str, iterations: int, overrides: list[str]):
    """The `small_agz` preset (= `small` with the AlphaGo Zero variant and small gating/resignation settings), with
    the variant's switches: every run shares every other value, including the switches' own parameters."""
    # after the device set-up in main(): importing pgx starts JAX's backend
    from az_jax.core import overrides as overrides_lib
    from az_jax.core import presets as presets_lib

    # In-training evaluation off (rating is done afterwards, for every run alike); every checkpoint kept.
    common = [f"num_iterations={iterations}", "eval_every=0", "keep_checkpoints=0", *overrides]
    return overrides_lib.override(presets_lib.preset(game, "small_agz"), ABLATION_SWITCHES[variant] + common)


def train_all(runs_dir: str, game: str, variants: list[str], iterations: int, overrides: list[str], log) -> dict:
    """Trains (or resumes) every variant's run; returns {variant: run_dir}."""
    # after the device set-up in main(): importing pgx starts JAX's backend
    from az_jax.evaluation.in_training import train_and_evaluate

    runs = {}
    for variant in variants:
        config = variant_config(game, variant, iterations, overrides)
        run_dir = os.path.join(runs_dir, variant)
        runs[variant] = run_dir
        t0 = time.perf_counter()
        log(f"training {variant} ({', '.join(k for k, v in config.switches.items() if v) or 'no switches'})")
        train_and_evaluate(config, run_dir, progress=False)
        log(f"{variant}: {time.perf_counter() - t0:.0f} s")
    return runs


def training_seconds(run_dir: str) -> dict[int, float]:
    """{iteration: seconds of training up to it}: self-play + learning + gating matches (metrics.jsonl). The first
    iteration (and the first gating match) include their compilation."""
    total, out = 0.0, {}
    for r in read_metrics(run_dir):
        total += r["perf/iteration_seconds"] + r.get("gating/seconds", 0.0)
        out[int(r["iteration"])] = total
    return out


def pairings(variants: list[str], steps: list[int], mcts: str) -> list[tuple[str, str]]:
    name = lambda v, s: f"{v}@{s}"
    pairs = [(name(v, steps[0]), "random") for v in variants]
    pairs += [(name(v, s), mcts) for v in variants for s in steps]
    pairs += [(name(v, a), name(v, b)) for v in variants for a, b in zip(steps, steps[1:])]
    pairs += [(name(v, s), name(variants[0], s)) for v in variants[1:] for s in steps]
    pairs.append((mcts, "random"))
    return pairs


def rate(out_dir: str, game: str, runs: dict, games: int, simulations: int, mcts_spec: str, seed: int, log):
    """Plays the missing pairings (kept in OUT_DIR/matches.jsonl) and fits the ratings; returns (fit, rows)."""
    # after the device set-up in main(): importing pgx starts JAX's backend
    from az_jax.evaluation import elo
    from az_jax.evaluation import players as players_lib
    from az_jax.evaluation.ladder import checkpoint_steps, play_pairings
    from az_jax.runtime.agent import load_agent

    variants = list(runs)
    steps = checkpoint_steps(runs[variants[0]])
    eval_config = load_agent(runs[variants[0]], step=steps[0]).config  # alphazero's: the one evaluation search
    apply = players_lib.network_apply(eval_config, simulations)
    players: dict[str, players_lib.JaxPlayer] = {}
    for v, run_dir in runs.items():
        if checkpoint_steps(run_dir) != steps:
            raise SystemExit(f"{run_dir} has checkpoints {checkpoint_steps(run_dir)}, expected {steps}")
        for s in steps:
            players[f"{v}@{s}"] = players_lib.JaxPlayer(
                f"{v}@{s}", apply, load_agent(run_dir, step=s).variables, step=s, simulations=simulations
            )
    for spec in ("random", mcts_spec):
        p = players_lib.make_player(spec, game)
        assert isinstance(p, players_lib.JaxPlayer)  # random and MCTS players run on device
        players[p.name] = p
    mcts = players_lib.make_player(mcts_spec, game).name
    todo = pairings(variants, steps, mcts)
    results = play_pairings(
        game,
        players,
        todo,
        games=games,
        simulations=simulations,
        seed=seed,
        path=os.path.join(out_dir, "matches.jsonl"),
        log=log,
    )
    fit = elo.fit_elo(results, anchor="random")
    rows = []
    for v, run_dir in runs.items():
        seconds = training_seconds(run_dir)
        for s in steps:
            low, high = fit.interval(f"{v}@{s}")
            rows.append(
                {
                    "variant": v,
                    "iteration": s,
                    "train_minutes": seconds[s] / 60,
                    "elo": fit.rating(f"{v}@{s}"),
                    "elo_low": low,
                    "elo_high": high,
                }
            )
    baselines = {name: (fit.rating(name), *fit.interval(name)) for name in ("random", mcts)}
    return fit, rows, baselines, results


def head_to_head(results, variants: list[str], steps: list[int]) -> dict:
    """{variant: (wins, draws, losses)} against alphazero's checkpoint of the same step, summed over the steps."""
    out = {}
    for v in variants[1:]:
        w = d = l = 0
        for a, b, wins, draws, losses in results:
            if a.startswith(f"{v}@") and b == f"{variants[0]}@{a.split('@')[1]}":
                w, d, l = w + wins, d + draws, l + losses
        out[v] = (w, d, l)
    return out


def write_outputs(
    out_dir: str, rows: list[dict], baselines: dict, h2h: dict, steps_per_iteration: int, header: str
) -> str:
    write_csv(os.path.join(out_dir, "ratings.csv"), rows)
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    steps = sorted({r["iteration"] for r in rows})
    lines = [
        header,
        "",
        "Elo (95% interval) at each checkpoint; anchor uniform random = 0. "
        f"Gradient steps = iteration × {steps_per_iteration}.",
        "",
        "| variant | "
        + " | ".join(f"it {s}" for s in steps)
        + " | minutes to last | vs alphazero, same step (W-D-L) |",
        "|---|" + "---|" * (len(steps) + 2),
    ]
    for v in variants:
        cells = [f"{r['elo']:.0f} [{r['elo_low']:.0f}, {r['elo_high']:.0f}]" for r in rows if r["variant"] == v]
        minutes = [r["train_minutes"] for r in rows if r["variant"] == v][-1]
        w, d, l = h2h.get(v, ("", "", ""))
        lines.append(
            f"| {v} | " + " | ".join(cells) + f" | {minutes:.1f} | " + (f"{w}-{d}-{l}" if v in h2h else "—") + " |"
        )
    lines += [""] + [f"{name}: {e:.0f} [{lo:.0f}, {hi:.0f}]" for name, (e, lo, hi) in baselines.items()]
    table = "\n".join(lines)
    with open(os.path.join(out_dir, "ratings.md"), "w") as f:
        f.write(table + "\n")
    plot(rows, baselines, out_dir, steps_per_iteration)
    return table


def plot(rows: list[dict], baselines: dict, out_dir: str, steps_per_iteration: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for x_key, label, file, scale in (
        ("iteration", "gradient steps", "elo_vs_step.png", steps_per_iteration),
        ("train_minutes", "training wall-clock (minutes)", "elo_vs_time.png", 1),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for i, v in enumerate(variants):
            pts = [r for r in rows if r["variant"] == v]
            xs = [r[x_key] * scale for r in pts]
            ax.errorbar(
                xs,
                [r["elo"] for r in pts],
                yerr=[[r["elo"] - r["elo_low"] for r in pts], [r["elo_high"] - r["elo"] for r in pts]],
                marker="o",
                capsize=3,
                color=f"C{i}",
                label=v,
                alpha=0.85,
            )
        for name, (e, _, _) in baselines.items():
            ax.axhline(e, linestyle="--", color="grey", alpha=0.6)
            ax.annotate(name, (ax.get_xlim()[0], e), fontsize=8, color="grey", va="bottom")
        ax.set_xlabel(label)
        ax.set_ylabel("Elo (random = 0)")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, file), dpi=100)
        plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="experiments/ablation", help="output directory")
    parser.add_argument("--runs-dir", default=None, help="where the training runs go (default runs/ablation/GAME)")
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--variants", default=",".join(ABLATION_SWITCHES), help="comma-separated, alphazero first")
    parser.add_argument("--iterations", type=int, default=20, help="training iterations per run")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every run (e.g. checkpoint_every=5)",
    )
    parser.add_argument("--games", type=int, default=40, help="games per pairing")
    parser.add_argument("--simulations", type=int, default=32, help="search simulations per move of the checkpoints")
    parser.add_argument("--mcts", default="mcts:sims=100", help="the rollout-MCTS baseline's player spec")
    parser.add_argument("--devices", type=int, default=None, help="host CPU devices (default: one per core)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the rating matches")
    args = parser.parse_args(argv)
    jax.config.update("jax_num_cpu_devices", args.devices or os.cpu_count() or 1)
    variants = args.variants.split(",")
    if variants[0] != "alphazero" or any(v not in ABLATION_SWITCHES for v in variants):
        raise SystemExit(f"--variants: alphazero first, then any of {', '.join(ABLATION_SWITCHES)}")
    os.makedirs(args.out, exist_ok=True)
    log = lambda message: print(f"ablation: {message}", flush=True)
    runs_dir = args.runs_dir or os.path.join("runs", "ablation", args.game)
    runs = train_all(runs_dir, args.game, variants, args.iterations, args.set, log)
    config = variant_config(args.game, "alphazero", args.iterations, args.set)
    fit, rows, baselines, results = rate(
        args.out, args.game, runs, args.games, args.simulations, args.mcts, args.seed, log
    )
    steps = sorted({r["iteration"] for r in rows})
    header = (
        f"{args.game}: {args.iterations} iterations of {config.selfplay_batch_size} games × "
        f"{config.selfplay_steps} plies ({config.positions_per_iteration} positions) and "
        f"{config.train_steps_per_iteration} gradient steps of {config.batch_size}; {config.num_blocks} blocks × "
        f"{config.num_channels}; {config.num_simulations} simulations per self-play move. Rating: {args.games} "
        f"games per pairing, checkpoints searching {args.simulations} simulations."
    )
    print(
        write_outputs(
            args.out, rows, baselines, head_to_head(results, variants, steps), config.train_steps_per_iteration, header
        )
    )


if __name__ == "__main__":
    main()
