"""Throughput of a population trained in one program (az_jax/apps/population.py: `jax.vmap` over the training iteration)
against the same members trained one after another.

    python -m experiments.populations.population_benchmark [--game connect_four] [--preset small] [--members 8] \
        [--iterations 3] [--set key=value ...] [--devices N] [--json PATH]

Both ways run every member for 1 + `iterations` iterations from its own seed (seeds 0..M-1) on the same devices:
  * population: one PopulationTrainer program; the first iteration (compile + run) is timed apart, then each of the
    `iterations` calls trains all M members one iteration;
  * one after another: one Trainer program (compiled once: the seed reaches the initial state as data), each member
    trained for its iterations before the next starts.
Throughput = positions generated per second by self-play, over all members (M · B · S per population iteration,
B · S per single-member iteration), from the median steady call. With --member-shards 1 (the default) each member's
games are split over the devices as when it is trained alone, so member 0's parameters from both ways are compared
as a check that both trained the same thing. Prints a table and writes the JSON (default
experiments/populations/results/population_<backend>_<game>_<M>members.json).
"""

import argparse
import json
import os
import statistics
import sys
import time

# They import only jax: no backend starts before host_devices.setup in main().
from az_jax.core.devices import make_mesh  # noqa: E402
from az_jax.runtime import host_devices  # noqa: E402


def timed(fn, *args):
    import jax

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0, out


def run_population(config, num_members: int, iterations: int, member_shards: int, network_batching, log):
    # after the device set-up in main(): importing pgx starts JAX's backend
    from az_jax.apps.population import Member, PopulationTrainer

    trainer = PopulationTrainer.create(
        config,
        [Member(seed=i) for i in range(num_members)],
        member_shards=member_shards,
        network_batching=network_batching,
    )
    init_seconds, state = timed(trainer.init_state)
    first, (state, _) = timed(trainer.iterate, state)
    log(
        f"population: mesh {dict(trainer.mesh.shape)}, init {init_seconds:.1f} s, first iteration (compile + run) "
        f"{first:.1f} s"
    )
    times = []
    for i in range(iterations):
        seconds, (state, metrics) = timed(trainer.iterate, state)
        times.append(seconds)
        log(f"population: iteration {i + 2}: {seconds:.2f} s")
    return {
        "mesh": dict(trainer.mesh.shape),
        "network_batching": trainer.network_batching,
        "init_seconds": init_seconds,
        "first_iteration_seconds": first,
        "iteration_seconds": times,
    }, trainer.member_state(state, 0).params


def run_sequential(config, num_members: int, iterations: int, log):
    import jax
    import jax.numpy as jnp

    # after the device set-up in main(): importing pgx starts JAX's backend
    from az_jax.core.iteration import init_state
    from az_jax.runtime.trainer import Trainer

    trainer = Trainer(config, make_mesh())
    init = jax.jit(lambda seed: init_state(trainer.setup, seed), out_shardings=trainer.shardings)  # seed as data
    out: dict[str, list[float]] = {"init_seconds": [], "first_iteration_seconds": [], "iteration_seconds": []}
    params0 = None
    for member in range(num_members):
        seconds, state = timed(init, jnp.int32(member))
        out["init_seconds"].append(seconds)
        first, (state, _) = timed(trainer.iterate, state)
        out["first_iteration_seconds"].append(first)
        times = []
        for _ in range(iterations):
            seconds, (state, _) = timed(trainer.iterate, state)
            times.append(seconds)
        out["iteration_seconds"].extend(times)
        log(
            f"one after another: member {member}: first iteration {first:.1f} s, then "
            f"{', '.join(f'{t:.2f}' for t in times)} s"
        )
        if member == 0:
            params0 = jax.device_get(state.params)
        del state
    return out, params0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations after the first")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--devices", type=int, default=None, help="host CPU devices (default: one per core)")
    parser.add_argument(
        "--member-shards",
        type=int,
        default=1,
        help="device groups the members are split over (default 1: every member's games over all "
        "devices, as each member alone is trained, so member 0 can be compared exactly)",
    )
    parser.add_argument(
        "--network-batching",
        choices=["vmap", "loop"],
        default=None,
        help="the network under the member vmap: batched (vmap) or once per member (loop); "
        "default loop on CPU, vmap on GPU/TPU (az_jax/apps/population.py)",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)

    host_devices.setup(args.devices)  # as az-jax does: one device per core, one thread each
    import jax
    import numpy as np

    # after the device set-up in main(): importing pgx starts JAX's backend
    from az_jax.core import overrides as overrides_lib
    from az_jax.core import presets as presets_lib

    log = lambda message: print(f"population_benchmark: {message}", file=sys.stderr, flush=True)
    config = overrides_lib.override(
        presets_lib.preset(args.game, args.preset), [*args.set, f"num_iterations={1 + args.iterations}"]
    )
    positions = config.positions_per_iteration
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    population, pop_params = run_population(
        config, args.members, args.iterations, args.member_shards, args.network_batching, log
    )
    population["wall_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sequential, seq_params = run_sequential(config, args.members, args.iterations, log)
    sequential["wall_seconds"] = time.perf_counter() - t0
    load_after = os.getloadavg()

    pop_iter = statistics.median(population["iteration_seconds"])
    seq_iter = statistics.median(sequential["iteration_seconds"])
    population["positions_per_second"] = args.members * positions / pop_iter
    sequential["positions_per_second"] = positions / seq_iter
    for mode in (population, sequential):
        mode["positions_per_second_per_member"] = mode["positions_per_second"] / args.members
    # Only with the same game split (member_shards 1) does member 0 play the same games both ways.
    diff = (
        max(
            float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
            for a, b in zip(jax.tree.leaves(pop_params), jax.tree.leaves(seq_params))
        )
        if args.member_shards == 1
        else None
    )
    result = {
        "game": args.game,
        "preset": args.preset,
        "overrides": args.set,
        "members": args.members,
        "iterations": 1 + args.iterations,
        "backend": jax.default_backend(),
        "devices": jax.device_count(),
        "device_kind": jax.devices()[0].device_kind,
        "positions_per_member_iteration": positions,
        "num_simulations": config.num_simulations,
        "train_steps_per_iteration": config.train_steps_per_iteration,
        "population": population,
        "one_after_another": sequential,
        "speedup_steady": population["positions_per_second"] / sequential["positions_per_second"],
        "speedup_wall": sequential["wall_seconds"] / population["wall_seconds"],
        "member0_max_abs_param_diff": diff,
        "load_average_before": load_before,
        "load_average_after": load_after,
    }
    path = args.json or os.path.join(
        os.path.dirname(os.path.abspath(__file__)),
        "results",
        f"population_{result['backend']}_{args.game}_{args.members}members_{population['network_batching']}.json",
    )
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    print(
        f"{args.members} × {args.game} ({args.preset}; {positions} positions per member-iteration, "
        f"{config.num_simulations} simulations/move) on {result['devices']} {result['backend']} devices"
    )
    print(f"{'':22}{'positions/s':>12}{'per member':>12}{'s per call':>13}{'first call s':>13}{'wall s':>9}")
    for name, mode, per_it in (
        (f"one program ({population['network_batching']})", population, pop_iter),
        ("one after another", sequential, seq_iter),
    ):
        first = mode["first_iteration_seconds"]
        first = first if isinstance(first, float) else first[0]
        print(
            f"{name:22}{mode['positions_per_second']:>12.0f}{mode['positions_per_second_per_member']:>12.0f}"
            f"{per_it:>13.2f}{first:>13.1f}{mode['wall_seconds']:>9.0f}"
        )
    print(
        f"steady speed-up {result['speedup_steady']:.2f}x, wall-clock speed-up {result['speedup_wall']:.2f}x; "
        + (f"member 0 parameters differ by at most {diff:.2e}; " if diff is not None else "")
        + f"load average {load_before[0]:.1f} -> "
        f"{load_after[0]:.1f}; JSON: {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
