"""`az-jax preflight`: compiles a run's programs for a TPU slice or NVIDIA GPUs on this machine and checks that they
fit the devices' memory (az_jax/preflight.py), before anyone pays for an accelerator hour."""

import argparse
import json
import os
import sys

from az_jax.apps.cli.args import UsageError, check_game_overrides, path, positive_float


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "preflight", help="compile a run for a TPU slice or GPU on this machine; check its memory and FLOPs"
    )
    parser.add_argument(
        "--target",
        required=True,
        help="what you will rent, e.g. v5litepod-8, v4-8, v5p-8, v6e-8, v6e-1, h100, h100x8, a100, l4 (comma list)",
    )
    parser.add_argument(
        "--alphago",
        default=None,
        metavar="PRESET",
        help="plan the AlphaGo (2016) pipeline's stages of this preset (9x9-cpu, 9x9, 19x19) instead of an "
        "AlphaZero run: --game, --preset, --set and --programs do not apply",
    )
    parser.add_argument("--game", default="connect_four", help="game name (see envs.GAMES)")
    parser.add_argument("--preset", default="small", help="small, paper, alphago_zero or small_agz")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (repeatable)")
    parser.add_argument(
        "--programs",
        default="iteration,gating,evaluation",
        help="programs to compile (comma list): iteration, gating, evaluation (what a run compiles), engine (the "
        "gtp/uci engines' search of one game on one device), selfplay and learning (the iteration's halves alone: "
        "where its memory goes)",
    )
    parser.add_argument(
        "--iteration-seconds", type=positive_float, default=None, help="a measured iteration time: prints its MFU"
    )
    parser.add_argument("--json", type=path, default=None, metavar="PATH", help="also write the plans here")
    return parser


def before_backend() -> None:
    """Compile-only devices need no accelerator: keep JAX's own backend on the CPU and keep libtpu from looking for a
    TPU (the metadata server, the worker hostnames) before anything starts it."""
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_platforms", "cpu")


def run(args) -> int:
    # imported only now: they start JAX's backend, which before_backend (called by main) first keeps on the CPU
    from az_jax import preflight, targets

    programs = tuple(p.strip() for p in args.programs.split(",") if p.strip())
    unknown = [p for p in programs if p not in preflight.PROGRAMS]
    if unknown or not programs:
        raise UsageError(f"--programs: unknown {unknown or programs}; choose from {', '.join(preflight.PROGRAMS)}")
    try:
        chosen = [targets.get_target(name.strip()) for name in args.target.split(",") if name.strip()]
    except targets.UnknownTargetError as e:
        raise UsageError(str(e)) from None
    if not chosen:
        raise UsageError("--target: name at least one target")
    log = lambda message: print(f"az-jax preflight: {message}", file=sys.stderr, flush=True)
    plan = _alphago_plan(args, log) if args.alphago else _run_plan(args, programs, log)
    results = []
    for target in chosen:
        try:
            result = plan(target)
        except preflight.PlanError as e:
            raise UsageError(str(e)) from None
        results.append(result)
        print(preflight.format_table(result), flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            f.write(json.dumps(results, indent=1) + "\n")
    for result in results:
        try:
            preflight.check_fits(result)
        except preflight.PlanError as e:
            raise UsageError(str(e)) from None
    return 0


def _run_plan(args, programs: tuple[str, ...], log):
    """target -> the plan of an AlphaZero run (az_jax/preflight.py), the engines' search included when asked."""
    from az_jax import config as config_lib  # starts JAX's backend: see run
    from az_jax import preflight
    from az_jax.frontends import tree_search

    check_game_overrides(args.game, args.set or [])
    config = config_lib.override(config_lib.preset(args.game, args.preset), args.set or [])

    def engine(setup, variables, sharding):
        return tree_search.engine_programs(setup.apply_fn, setup.env, config.c_init, config.c_base, variables, sharding)

    def plan(target):
        result = preflight.plan(config, target, programs, args.iteration_seconds, log, engine)
        result.update(preset=args.preset, overrides=list(args.set or []))
        return result

    return plan


def _alphago_plan(args, log):
    """target -> the plan of the AlphaGo pipeline's stages (az_jax/alphago/preflight.py)."""
    from az_jax.alphago import preflight as alphago_preflight  # starts JAX's backend: see run
    from az_jax.alphago.presets import PRESETS

    if args.set or args.programs != "iteration,gating,evaluation" or args.iteration_seconds:
        raise UsageError(
            "--alphago plans every stage of its preset: --set, --programs and --iteration-seconds do not apply"
        )
    if args.alphago not in PRESETS:
        raise UsageError(f"--alphago: unknown preset {args.alphago!r}; known: {', '.join(PRESETS)}")
    preset = PRESETS[args.alphago]

    def plan(target):
        result = alphago_preflight.plan(preset, target, log=log)
        result.update(preset=preset.name, overrides=[])
        return result

    return plan
