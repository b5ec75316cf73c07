"""Times pgx's own AlphaZero example (the peer of issue 4) on this machine, so it can be compared side by side with
`experiments/performance/benchmark.py` at the same settings.

    python -m experiments.peers.peer_pgx_example --example-dir PGX_CHECKOUT/examples/alphazero --game connect_four \
        [--devices 2] [--threads default|one-per-device] [--iterations 6] [--json out.json]

Nothing of the example is copied here: this script imports the example's `train.py` from your checkout of
https://github.com/sotetsuk/pgx (it needs `pip install dm-haiku omegaconf pydantic`; `wandb`, which the example imports
but is not timed, is replaced by an empty module, and `pgx.make_baseline_model`, which only its untimed
`evaluate` uses, by a stub). It runs the example's own jitted functions the way its main loop
does, at the settings of the reference table in issue 4 (6 × 128 network, Gumbel search with 32 simulations, 32 games
per batch, 16 plies per iteration, training batch 128), and times, per iteration:

  * self-play: `selfplay(model, keys)` + `compute_loss_input(data)` → positions/s = games × plies / seconds;
  * training: the example's host-side shuffle and minibatching plus its loop of `train(...)` calls with a
    `.item()` per step → samples/s = the samples trained / seconds;
  * compile: the wall-clock of the first two iterations minus two steady iterations (the issue's "compile (first
    two iterations)").

Steady figures are medians over iterations 3 … N. `--threads one-per-device` adds the flag az_jax's CLI uses with one
host device per core (az_jax/runtime/host_devices.py); `default` leaves XLA's default (one Eigen pool as wide as the
machine per device), which is how the example runs when given host devices.
"""

import argparse
import json
import os
import statistics
import sys
import time

from experiments.peers.pgx_example import import_example, shuffled_minibatches


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example-dir", required=True, help="pgx checkout's examples/alphazero directory")
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--threads", choices=["default", "one-per-device"], default="default")
    parser.add_argument("--iterations", type=int, default=6, help="iterations to time (the first two compile)")
    parser.add_argument("--selfplay-batch", type=int, default=32)
    parser.add_argument("--plies", type=int, default=16)
    parser.add_argument("--training-batch", type=int, default=128)
    parser.add_argument("--simulations", type=int, default=32)
    parser.add_argument(
        "--az-jax",
        action="store_true",
        help="also time az_jax's self-play and learner at the same settings, in the same process, "
        "interleaved with the example's iterations (same devices, flags and load)",
    )
    parser.add_argument(
        "--az-jax-variant",
        action="append",
        default=[],
        metavar="LABEL:KEY=VALUE,...",
        help="with --az-jax: also time az_jax with these config overrides on top of the like-for-like settings (e.g. "
        "'bf16:compute_dtype=bfloat16'), interleaved the same way; repeatable",
    )
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    train_py = os.path.join(args.example_dir, "train.py")
    if not os.path.exists(train_py):
        print(f"error: no train.py in --example-dir {args.example_dir!r}", file=sys.stderr)
        return 2
    if args.iterations < 3:
        print("error: --iterations must be at least 3 (two compile, the rest are timed)", file=sys.stderr)
        return 2

    flags = os.environ.get("XLA_FLAGS", "")
    flags += f" --xla_force_host_platform_device_count={args.devices}"
    if args.threads == "one-per-device":
        flags += " --xla_cpu_multi_thread_eigen=false"
    os.environ["XLA_FLAGS"] = flags.strip()
    load_before = os.getloadavg()

    ex = import_example(  # the example's module: its config, networks and jits
        args.example_dir,
        [
            f"env_id={args.game}",
            f"selfplay_batch_size={args.selfplay_batch}",
            f"max_num_steps={args.plies}",
            f"training_batch_size={args.training_batch}",
            f"num_simulations={args.simulations}",
        ],
    )
    import jax
    import jax.numpy as jnp

    n = ex.num_devices
    dummy = jax.vmap(ex.env.init)(jax.random.split(jax.random.key(0), 2)).observation
    model = ex.forward.init(jax.random.PRNGKey(0), dummy)
    opt_state = ex.optimizer.init(params=model[0])
    model, opt_state = jax.tree.map(lambda x: jnp.stack([x] * n), (model, opt_state))  # replicate, as pmap expects

    variants: dict[str, list[str]] = {"az_jax": []}
    for spec in args.az_jax_variant:
        label, _, assignments = spec.partition(":")
        if not label or not assignments:
            print(f"error: --az-jax-variant expects LABEL:KEY=VALUE,..., got {spec!r}", file=sys.stderr)
            return 2
        variants[f"az_jax_{label}"] = assignments.split(",")
    sides = {key: AzJaxSide(args, extra) for key, extra in variants.items()} if args.az_jax else {}
    rng_key = jax.random.PRNGKey(0)
    records = []
    for iteration in range(args.iterations):
        t0 = time.perf_counter()
        rng_key, subkey = jax.random.split(rng_key)
        data = ex.selfplay(model, jax.random.split(subkey, n))
        samples = ex.compute_loss_input(data)
        jax.block_until_ready(samples)
        t1 = time.perf_counter()
        # The example's main loop from here: shuffle on the host, minibatches, one pmapped step per minibatch.
        rng_key, subkey = jax.random.split(rng_key)
        positions, num_updates, minibatches = shuffled_minibatches(samples, subkey, n, args.training_batch)
        losses = []
        for i in range(num_updates):
            minibatch = jax.tree.map(lambda x, i=i: x[i], minibatches)
            model, opt_state, policy_loss, value_loss = ex.train(model, opt_state, minibatch)
            losses.append(policy_loss.mean().item() + value_loss.mean().item())
        t2 = time.perf_counter()
        records.append(
            {
                "selfplay_seconds": t1 - t0,
                "training_seconds": t2 - t1,
                "positions": positions,
                "samples": num_updates * args.training_batch,
                "loss": sum(losses) / len(losses),
            }
        )
        print(f"iteration {iteration}: example self-play {t1 - t0:.2f} s, training {t2 - t1:.2f} s", flush=True)
        for key, side in sides.items():
            records[-1][key] = side.iteration(iteration)
            print(
                f"iteration {iteration}: {key}  self-play {records[-1][key]['selfplay_seconds']:.2f} s, "
                f"training {records[-1][key]['training_seconds']:.2f} s",
                flush=True,
            )

    result = {
        "peer": "pgx examples/alphazero/train.py",
        "game": args.game,
        "devices": n,
        "threads": args.threads,
        "settings": {
            "selfplay_batch_size": args.selfplay_batch,
            "plies": args.plies,
            "training_batch_size": args.training_batch,
            "num_simulations": args.simulations,
        },
        **throughput(records, args.simulations),
        "iterations": records,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "jax": jax.__version__,
        "xla_flags": os.environ["XLA_FLAGS"],
    }
    for key, side in sides.items():
        result[key] = side.summary([r[key] for r in records])
        result[key].update(paired_ratios(records, key))
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(
        f"{args.game}, {n} device(s), threads {args.threads}: self-play {result['selfplay_positions_per_second']:.1f} "
        f"positions/s ({result['simulations_per_second']:,.0f} simulations/s), training "
        f"{result['training_samples_per_second']:.0f} samples/s, whole iteration "
        f"{result['iteration_positions_per_second']:.1f} positions/s, compile ≈ "
        f"{result['compile_first_two_iterations_seconds']:.1f} s"
    )
    for key in sides:
        o = result[key]
        print(
            f"{args.game}, {n} device(s), {key} ({', '.join(o['overrides']) or 'like for like'}): self-play "
            f"{o['selfplay_positions_per_second']:.1f} positions/s, "
            f"training {o['training_samples_per_second']:.0f} samples/s, whole iteration "
            f"{o['iteration_positions_per_second']:.1f} positions/s, compile ≈ "
            f"{o['compile_first_two_iterations_seconds']:.1f} s; az_jax / example: self-play "
            f"{o['selfplay_positions_per_second'] / result['selfplay_positions_per_second']:.2f}x, training "
            f"{o['training_samples_per_second'] / result['training_samples_per_second']:.2f}x; median of the "
            f"per-iteration ratios (each pair timed back to back): self-play "
            f"{o['selfplay_speed_ratio_median_of_pairs']:.2f}x, training "
            f"{o['training_speed_ratio_median_of_pairs']:.2f}x, whole iteration "
            f"{o['iteration_speed_ratio_median_of_pairs']:.2f}x"
        )
    return 0


def throughput(records: list[dict], simulations: int) -> dict:
    """Steady figures (medians over iterations 3 … N) and the compile estimate from one program's iteration records."""
    steady = records[2:]
    sp = statistics.median(r["selfplay_seconds"] for r in steady)
    tr = statistics.median(r["training_seconds"] for r in steady)
    first_two = sum(r["selfplay_seconds"] + r["training_seconds"] for r in records[:2])
    positions, samples = records[0]["positions"], records[0]["samples"]
    return {
        "selfplay_positions_per_second": positions / sp,
        "simulations_per_second": positions * simulations / sp,
        "training_samples_per_second": samples / tr,
        "iteration_positions_per_second": positions / (sp + tr),
        "compile_first_two_iterations_seconds": first_two - 2 * (sp + tr),
    }


def paired_ratios(records: list[dict], key: str = "az_jax") -> dict:
    """az_jax's speed / the example's, per timed iteration (the two ran back to back, so they share the machine's
    state of the moment) and the median over iterations 3 … N. This VM's speed drifts by tens of percent within
    minutes; the ratio of medians mixes moments, the median of paired ratios does not."""
    steady = records[2:]
    speed = lambda part: [
        (r[key]["positions" if part == "selfplay" else "samples"] / r[key][f"{part}_seconds"])
        / (r["positions" if part == "selfplay" else "samples"] / r[f"{part}_seconds"])
        for r in steady
    ]
    whole = [
        (r["selfplay_seconds"] + r["training_seconds"]) / (r[key]["selfplay_seconds"] + r[key]["training_seconds"])
        for r in steady
    ]  # the example's iteration time / az_jax's (the same positions generated and samples trained per iteration)
    return {
        "iteration_speed_ratio_per_iteration": whole,
        "iteration_speed_ratio_median_of_pairs": statistics.median(whole),
        "selfplay_speed_ratio_per_iteration": speed("selfplay"),
        "selfplay_speed_ratio_median_of_pairs": statistics.median(speed("selfplay")),
        "training_speed_ratio_per_iteration": speed("training"),
        "training_speed_ratio_median_of_pairs": statistics.median(speed("training")),
    }


class AzJaxSide:
    """az_jax's self-play and learner (az_jax/apps/bench.py's `selfplay_program`, `learn_program`) at the example's
    settings, plus `extra` overrides (a variant, e.g. compute_dtype=bfloat16)."""

    def __init__(self, args, extra: list[str] | tuple[str, ...] = ()):
        import jax

        # Only with --az-jax, and after main() set XLA_FLAGS (host devices): importing pgx starts JAX's backend.
        from az_jax.apps.bench import learn_program, selfplay_program
        from az_jax.core import overrides as overrides_lib
        from az_jax.core import presets as presets_lib
        from az_jax.core.devices import make_mesh
        from az_jax.runtime.trainer import Trainer

        self.jax = jax
        self.config = overrides_lib.override(
            presets_lib.preset(args.game, "small"),
            [
                "num_blocks=6",
                "num_channels=128",
                "search=gumbel",
                f"num_simulations={args.simulations}",
                f"selfplay_batch_size={args.selfplay_batch}",
                f"selfplay_steps={args.plies}",
                f"batch_size={args.training_batch}",
                "min_replay_size=1",
                # like for like with the example: every generated position trained on once, no auxiliary heads or
                # symmetries (which the go_9x9 small preset turns on), the example's float32
                "train_ratio=1",
                "aux_ownership_weight=0",
                "aux_score_weight=0",
                "augment_symmetries=false",
                "compute_dtype=float32",
                *extra,
            ],
        )
        self.extra = list(extra)
        self.trainer = Trainer(self.config, make_mesh())
        self.state = self.trainer.init_state()
        self.selfplay, self.learn = selfplay_program(self.trainer), learn_program(self.trainer)

    def iteration(self, index: int) -> dict:
        jax = self.jax
        t0 = time.perf_counter()
        games, replay, _ = self.selfplay(self.state, jax.random.key(index))
        jax.block_until_ready(replay)
        t1 = time.perf_counter()
        self.state = self.state.replace(games=games, replay=replay)  # type: ignore[attr-defined]
        params, batch_stats, opt_state, ready, _ = self.learn(self.state, jax.random.key(10_000 + index))
        jax.block_until_ready(params)
        t2 = time.perf_counter()
        self.state = self.state.replace(  # type: ignore[attr-defined]
            params=params, batch_stats=batch_stats, opt_state=opt_state
        )
        cfg = self.config
        return {
            "selfplay_seconds": t1 - t0,
            "training_seconds": t2 - t1,
            "positions": cfg.selfplay_batch_size * cfg.selfplay_steps,
            "samples": cfg.train_steps_per_iteration * cfg.batch_size,
            "learner_ready": bool(ready),
        }

    def summary(self, records: list[dict]) -> dict:
        return {
            **throughput(records, self.config.num_simulations),
            "overrides": self.extra,
            "train_steps_per_iteration": self.config.train_steps_per_iteration,
            "learner_ready_in_timed_iterations": all(r["learner_ready"] for r in records[2:]),
            "iterations": records,
        }


if __name__ == "__main__":
    raise SystemExit(main())
