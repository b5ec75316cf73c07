"""Self-play utilisation at a given scale: positions/s, network FLOP/s against the device's measured bf16 matmul peak
(MFU), where a ply's time goes (network / pgx's step / the rest: tree and outside the search), memory and compile time.

    python -m experiments.accelerators.selfplay_mfu --game go_19x19 --preset paper --set compute_dtype=bfloat16 \
        --set num_simulations=32 --set selfplay_batch_size=1024 --set selfplay_steps=2 [--json out.json]

A lighter cousin of `az-jax bench` (az_jax/apps/bench.py, whose pieces it reuses) for networks too large to compile
every program of the bench in a short session: it compiles the self-play half of the iteration, one network forward
loop and one env-step loop, and nothing of training. Figures:
  * ply seconds = one self-play call (`selfplay_steps` plies of `selfplay_batch_size` games) / plies, median of
    --repeats calls after one warm-up call;
  * MFU = positions/s × (simulations + 1) × FLOPs per evaluation / peak, FLOPs per evaluation counted from the
    network (az_jax/core/flops.py); the peak is the best bf16 8192² matmul (bench.measure_peak_flops);
  * network share = (simulations + 1) × one forward on [B] / ply; env share = simulations × one vmapped pgx step / ply;
    the rest is mctx's tree work plus the move's own step, replay write and resets.
"""

import argparse
import json
import statistics
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", required=True)
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--inner-steps", type=int, default=4, help="forwards / env steps per timed loop")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--backward",
        choices=("batched", "mctx"),
        default="batched",
        help="the search's backward pass: az_jax's batched one (the default everywhere) or mctx's own vmapped loop, "
        "whose cost grows with the tree (az_jax/core/backup.py)",
    )
    args = parser.parse_args(argv)

    import jax

    from az_jax.apps import bench
    from az_jax.core import backup
    from az_jax.core import overrides as overrides_lib
    from az_jax.core import presets as presets_lib
    from az_jax.core.devices import make_mesh
    from az_jax.runtime.trainer import Trainer

    backup.use_batched_backward(args.backward == "batched")  # before anything is traced
    config = overrides_lib.override(presets_lib.preset(args.game, args.preset), args.set)
    mesh = make_mesh()
    config.validate(mesh.size)
    log = lambda message: print(f"selfplay_mfu: {message}", file=sys.stderr, flush=True)
    figures: dict = {"game": args.game, "preset": args.preset, "overrides": args.set, "jax": jax.__version__}
    figures["backward"] = args.backward
    figures["device_kind"] = mesh.devices.flat[0].device_kind
    figures["num_devices"] = mesh.size

    def save() -> None:
        if args.json:
            with open(args.json, "w") as f:
                f.write(json.dumps(figures, indent=1) + "\n")

    log("peak bf16 matmul")
    peak = bench.measure_peak_flops(mesh)
    figures["peak"] = peak
    trainer = Trainer(config, mesh)
    state = trainer.init_state()
    selfplay = bench.selfplay_program(trainer)
    log("compile self-play")
    t0 = time.perf_counter()
    selfplay = selfplay.lower(state, jax.random.key(0)).compile()
    figures["selfplay_compile_seconds"] = time.perf_counter() - t0
    figures["selfplay_memory_plan"] = _plan(selfplay)
    save()
    log("self-play calls")
    times = []
    for call in range(1 + args.repeats):
        seconds, (games, replay, _) = bench.timed(selfplay, state, jax.random.key(call))
        state = state.replace(games=games, replay=replay)  # type: ignore[attr-defined]
        if call:
            times.append(seconds)
    B, S, sims = config.selfplay_batch_size, config.selfplay_steps, config.num_simulations
    ply = statistics.median(times) / S
    positions_per_second = B / ply
    figures.update(selfplay_call_seconds=times, ply_seconds=ply, positions_per_second=positions_per_second)
    save()
    log("network and env-step loops")
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    n = args.inner_steps
    net = bench.median_time(
        bench.network_loop(trainer, n), variables, state.games.env.observation, repeats=args.repeats
    )
    env = bench.median_time(bench.env_step_loop(trainer, n), state.games.env, repeats=args.repeats)
    forward, step = net["seconds"] / n, env["seconds"] / n
    flops_eval = bench.network_flops_per_evaluation(trainer)
    achieved = positions_per_second * (sims + 1) * flops_eval
    shares = {"network": (sims + 1) * forward / ply, "env_step": sims * step / ply}
    shares["tree_and_rest"] = 1.0 - shares["network"] - shares["env_step"]
    figures.update(
        network_forward_seconds=forward,
        env_step_seconds=step,
        share_of_ply=shares,
        network_flops_per_evaluation=flops_eval,
        selfplay_network_flops_per_second=achieved,
        selfplay_mfu=achieved / peak["flops_per_second"],
        network_isolated_mfu=B * flops_eval / forward / peak["flops_per_second"],
        memory=bench.peak_memory(list(mesh.devices.flat)),
    )
    save()
    print(
        f"{args.game}/{args.preset} {' '.join(args.set)} ({args.backward} backward): "
        f"{positions_per_second:.1f} positions/s, ply {ply:.3f} s, "
        f"{flops_eval / 1e9:.2f} GFLOP/evaluation, MFU self-play {100 * figures['selfplay_mfu']:.1f}% "
        f"(network alone {100 * figures['network_isolated_mfu']:.1f}%) of {peak['flops_per_second'] / 1e12:.0f} "
        f"TFLOP/s; ply: network {100 * shares['network']:.0f}%, env step {100 * shares['env_step']:.0f}%, "
        f"tree and rest {100 * shares['tree_and_rest']:.0f}%; compile {figures['selfplay_compile_seconds']:.1f} s; "
        f"peak memory {figures['memory']['bytes'] / 2**30:.2f} GiB",
        flush=True,
    )
    return 0


def _plan(compiled) -> dict:
    from experiments.accelerators.memory_check import memory_plan

    return memory_plan(compiled)


if __name__ == "__main__":
    raise SystemExit(main())
