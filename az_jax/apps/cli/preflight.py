"""`az-jax preflight`: compiles a run's programs for a TPU slice or NVIDIA GPUs on this machine and checks that they
fit the devices' memory (az_jax/runtime/preflight.py), before anyone pays for an accelerator hour."""

import argparse
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile

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
        help="plan the AlphaGo (2016) pipeline's stages of this preset (9x9-cpu, 9x9, 19x19, 19x19-smoke) instead "
        "of an AlphaZero run: --game and --preset do not apply; --set takes the pipeline's STAGE.KEY=VALUE and "
        "--programs its stages (sl step, rollout step, rl games, rl update, value games, value step, search)",
    )
    parser.add_argument("--game", default="connect_four", help="game name (see envs.GAMES)")
    parser.add_argument("--preset", default="small", help="small, hours, paper, alphago_zero or small_agz")
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
    # internal: the process that compiles one target (see run) writes its plan here and leaves the verdict to its parent
    parser.add_argument("--plan-one", default=None, help=argparse.SUPPRESS)
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
    from az_jax.runtime import preflight, targets

    programs = tuple(p.strip() for p in args.programs.split(",") if p.strip())
    unknown = [p for p in programs if p not in preflight.PROGRAMS]
    if (unknown or not programs) and not args.alphago:  # --alphago: its stages, checked by _alphago_plan
        raise UsageError(f"--programs: unknown {unknown or programs}; choose from {', '.join(preflight.PROGRAMS)}")
    try:
        chosen = [targets.get_target(name.strip()) for name in args.target.split(",") if name.strip()]
    except targets.UnknownTargetError as e:
        raise UsageError(str(e)) from None
    if not chosen:
        raise UsageError("--target: name at least one target")
    log = lambda message: print(f"{PROGRESS}{message}", file=sys.stderr, flush=True)
    plan = _alphago_plan(args, log) if args.alphago else _run_plan(args, programs, log)  # checks the settings
    if args.plan_one:  # the child of `_plan_in_child`: one target, its plan to a file, no verdict
        try:
            result = plan(chosen[0])
        except preflight.PlanError as e:
            raise UsageError(str(e)) from None
        print(preflight.format_table(result), flush=True)
        with open(args.plan_one, "w") as f:
            f.write(json.dumps(result) + "\n")
        return 0
    results = [_plan_in_child(args, target) for target in chosen]
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
    """target -> the plan of an AlphaZero run (az_jax/runtime/preflight.py), the engines' search included when asked."""
    # these start JAX's backend, which before_backend (called by main) first keeps on the CPU
    from az_jax.core import overrides as overrides_lib
    from az_jax.core import presets as presets_lib
    from az_jax.evaluation import in_training
    from az_jax.frontends import tree_search
    from az_jax.runtime import preflight

    check_game_overrides(args.game, args.set or [])
    config = overrides_lib.override(presets_lib.preset(args.game, args.preset), args.set or [])
    in_training.check_opponents(config)

    def engine(setup, variables, sharding):
        return tree_search.engine_programs(
            setup.play_apply, setup.env, config.c_init, config.c_base, variables, sharding
        )

    def plan(target):
        result = preflight.plan(config, target, programs, args.iteration_seconds, log, engine, in_training.evaluation)
        result.update(preset=args.preset, overrides=list(args.set or []))
        return result

    return plan


def _alphago_plan(args, log):
    """target -> the plan of the AlphaGo pipeline's stages (az_jax/alphago/preflight.py)."""
    # these start JAX's backend: see run
    from az_jax.alphago import preflight as alphago_preflight
    from az_jax.alphago.presets import PRESETS, PresetError, override

    if args.iteration_seconds:
        raise UsageError("--alphago plans the stages of its preset: --iteration-seconds does not apply")
    if args.alphago not in PRESETS:
        raise UsageError(f"--alphago: unknown preset {args.alphago!r}; known: {', '.join(PRESETS)}")
    try:
        preset = override(PRESETS[args.alphago], args.set or [])
    except PresetError as e:
        raise UsageError(str(e)) from None
    stages = alphago_preflight.STAGES
    if args.programs != "iteration,gating,evaluation":  # the AlphaZero default: every stage
        stages = tuple(p.strip() for p in args.programs.split(",") if p.strip())
        unknown = [p for p in stages if p not in alphago_preflight.STAGES]
        if unknown or not stages:
            raise UsageError(
                f"--programs: unknown AlphaGo stage {(unknown or ['(none)'])[0]!r}; choose from "
                f"{', '.join(alphago_preflight.STAGES)}"
            )

    def plan(target):
        result = alphago_preflight.plan(preset, target, stages, log=log)
        result.update(preset=preset.name, overrides=list(args.set or []))
        return result

    return plan


PROGRESS = "az-jax preflight: "
# a compiler's fatal check, e.g. "F1126 11:39:10.150379     822 fusion_emitter.cc:4582] Check failed: ... (5 vs. 1)"
_FATAL = re.compile(r"^F\d{4} [\d:.]+\s+\d+ (\S+:\d+)\] (.*\S)")


def _plan_in_child(args, target) -> dict:
    """Compiles `target`'s plan in a process of its own: a compiler that aborts (libtpu's fatal checks end the process)
    becomes one line here, not a core dump. Its table goes to stdout, its progress lines to stderr as they come."""
    command = [sys.executable, "-m", "az_jax.apps.cli", "preflight", "--target", target.name]
    if args.alphago:
        command += ["--alphago", args.alphago, "--programs", args.programs]
        command += [arg for kv in args.set or [] for arg in ("--set", kv)]
    else:
        command += ["--game", args.game, "--preset", args.preset, "--programs", args.programs]
        command += [arg for kv in args.set or [] for arg in ("--set", kv)]
        command += ["--iteration-seconds", str(args.iteration_seconds)] if args.iteration_seconds else []
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "plan.json")
        child = subprocess.Popen([*command, "--plan-one", out], stderr=subprocess.PIPE, text=True, errors="replace")
        kept, program = [], "its programs"
        assert child.stderr is not None
        for line in child.stderr:
            if line.startswith(PROGRESS):
                print(line, end="", file=sys.stderr, flush=True)
                program = line[len(PROGRESS) :].strip().removeprefix("compiling ")
            else:
                kept.append(line.rstrip("\n"))
        child.wait()
        if child.returncode == 0:
            with open(out) as f:
                return json.load(f)
    errors = [line for line in kept if line.startswith("az-jax: error: ")]
    if child.returncode == 2 and errors:
        raise UsageError(errors[-1].removeprefix("az-jax: error: "))
    fatal = [m for m in map(_FATAL.match, kept) if m]
    detail = (
        f"{fatal[0].group(1)}: {fatal[0].group(2)}"
        if fatal
        else next((line.strip() for line in reversed(kept) if line.strip()), f"exit status {child.returncode}")
    )
    raise UsageError(
        f"the {_compiler(target)} crashed compiling {program} for {target.name} ({detail}); this plan cannot be "
        "checked on this machine: try another target or other settings"
    )


def _compiler(target) -> str:
    package = "libtpu" if target.platform == "tpu" else "jax-cuda13-plugin"
    try:
        version = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    return f"TPU compiler (libtpu {version})" if target.platform == "tpu" else f"GPU compiler ({package} {version})"
