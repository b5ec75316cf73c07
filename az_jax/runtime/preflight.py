"""Plans a run for an accelerator it does not have: compiles the run's programs for a TPU slice or NVIDIA GPUs
(az_jax/runtime/targets.py) on this machine and checks what each device will hold against the device's memory.

Per device it reports the state the run keeps (parameters + optimizer, the replay buffer, the games in progress, the
rest), each compiled program's XLA memory analysis (arguments, outputs, aliased bytes, temporaries) and compile time,
the FLOPs of one iteration counted from the network (az_jax/core/flops.py), and the MFU a measured iteration time would
mean. `check_fits` turns a plan that does not fit into one line naming the largest buffers and the keys that shrink
them.

How a program's peak is estimated, per device:
  * the iteration: arguments + outputs − aliased + temporaries (its input state is donated: the new state reuses it);
  * gating and evaluation matches: the whole state stays resident beside them, so state + outputs + temporaries;
  * the engine's search (`az-jax gtp/uci`: one game on one device, a process of its own): arguments (the network,
    the tree) + outputs − aliased + temporaries.
On a GPU the estimate is raised to what was measured against it on an H100
(experiments/accelerators/results/gpu/README.md: the device's peak was 1.17× the plan on a 5 GiB iteration, plus about
0.2 GiB the plan does not see): × 1.2 + 0.25 GiB. A TPU plan is taken as the TPU compiler states it (it refuses programs
whose temporaries exceed HBM).
"""

import dataclasses
import functools
import re
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from az_jax.core import flops as flops_lib
from az_jax.core.config import Config
from az_jax.core.devices import DEVICE_AXIS
from az_jax.runtime.loop import EvaluationFactory
from az_jax.runtime.targets import GIB, Target
from az_jax.runtime.trainer import Trainer

GPU_FACTOR, GPU_EXTRA_BYTES = 1.2, GIB // 4  # the GPU margin above (measured on one H100)
PROGRAMS = ("iteration", "gating", "evaluation", "selfplay", "learning", "engine")
# (setup, abstract variables on one device, that device's sharding) -> name -> a function lowering one of the engine's
# programs: the GTP/UCI engines' search (frontends/tree_search.engine_programs), given by the caller (the runtime
# imports no outer package)
EnginePrograms = Callable[[Any, Any, Any], dict]
DEFAULT_PROGRAMS = ("iteration", "gating", "evaluation")  # what a run compiles; the halves are for the account


class PlanError(ValueError):
    """A config that does not fit its target, or a target this machine cannot compile for."""


@dataclasses.dataclass(frozen=True)
class ProgramPlan:
    """One compiled program's memory per device (bytes) and compile time."""

    name: str
    compile_seconds: float
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temp_bytes: int
    peak_bytes: int  # the estimate of the module docstring, before the GPU margin
    error: str | None = None  # the compiler's refusal (out of memory), when it refused


# The TPU compiler refuses a program whose temporaries exceed HBM, e.g. "RESOURCE_EXHAUSTED: Ran out of memory on HBM,
# the total memory required for HLO temporaries (35.76G) exceeds available HBM (15.75G)".
_OUT_OF_MEMORY = re.compile(r"temporaries \(([0-9.]+)([KMGT])\)")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def target_mesh(target: Target) -> Mesh:
    """A 1-D mesh over the target's compile-only devices; PlanError where libtpu or the CUDA plugin is missing."""
    try:
        devices = target.topology_devices()
    except Exception as e:  # libtpu / the CUDA plugin missing or refusing the topology: one line for the user
        extra = "tpu" if target.platform == "tpu" else "cuda"
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PlanError(
            f"cannot compile for {target.name} on this machine ({first}); install the compiler with "
            f"pip install -e '.[{extra}]'"
        ) from None
    if len(devices) != target.devices:
        raise PlanError(f"{target.name}: expected {target.devices} devices, the topology has {len(devices)}")
    return Mesh(np.asarray(devices), (DEVICE_AXIS,))


def _local_bytes(tree: Any, num_devices: int) -> int:
    """Bytes of one device's share of an abstract tree whose leaves carry shardings."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        size = int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
        spec = getattr(leaf.sharding, "spec", ())
        total += size // num_devices if any(axis is not None for axis in spec) else size
    return total


def state_bytes(trainer: Trainer, state: Any = None) -> dict[str, int]:
    """Per-device bytes of the state a run keeps, by part (`state`: the trainer's abstract state, if at hand)."""
    state = trainer.abstract_state() if state is None else state
    n = trainer.num_devices
    parts = {
        "parameters_and_optimizer": _local_bytes((state.params, state.batch_stats, state.opt_state), n),
        "replay_buffer": _local_bytes(state.replay, n),
        "games_in_progress": _local_bytes(state.games, n),
        "other": _local_bytes((state.key, state.iteration, state.best, state.resign), n),
    }
    parts["total"] = sum(parts.values())
    return parts


def _memory(compiled) -> tuple[int, int, int, int]:
    m = compiled.memory_analysis()
    return (
        int(m.argument_size_in_bytes),
        int(m.output_size_in_bytes),
        int(m.alias_size_in_bytes),
        int(m.temp_size_in_bytes),
    )


def compile_program(name: str, lower: Callable[[], Any], state_total: int, donated: bool = False) -> ProgramPlan:
    """Compiles one program. `state_total`: the state's bytes, resident beside the program (or, `donated`, taken by it
    as its argument and reused for its outputs: the iteration)."""
    t0 = time.perf_counter()
    lowered = lower()
    try:
        compiled = lowered.compile()
    except Exception as e:  # jax's XlaRuntimeError; only the compiler's out-of-memory refusal is a plan's answer
        text = str(e)
        found = _OUT_OF_MEMORY.search(text)
        if "RESOURCE_EXHAUSTED" not in text or not found:
            raise
        temp = int(float(found.group(1)) * _UNITS[found.group(2)])
        line = next(line for line in text.splitlines() if "RESOURCE_EXHAUSTED" in line).strip()
        return ProgramPlan(name, time.perf_counter() - t0, state_total, 0, 0, temp, state_total + temp, error=line)
    seconds = time.perf_counter() - t0
    argument, output, alias, temp = _memory(compiled)
    peak = argument + output - alias + temp if donated else state_total + output + temp
    return ProgramPlan(name, seconds, argument, output, alias, temp, peak)


def compile_programs(
    trainer: Trainer,
    programs=DEFAULT_PROGRAMS,
    log: Callable[[str], None] = lambda m: None,
    engine: EnginePrograms | None = None,
    evaluation: EvaluationFactory | None = None,
) -> list:
    """Compiles the run's programs for the trainer's mesh; a ProgramPlan each (gating only where the config gates,
    evaluation only where it evaluates and `evaluation` gives its matches (the loop's own: az_jax/evaluation/
    in_training.py), the engine's search only where `engine` is given: one game on one device)."""
    config, state = trainer.config, trainer.abstract_state()
    resident = state_bytes(trainer, state)["total"]
    plans = []
    if "iteration" in programs:
        log("compiling the training iteration")
        plans.append(compile_program("iteration", lambda: trainer.iterate.lower(state), resident, donated=True))
    replicated = NamedSharding(trainer.mesh, P())
    key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=replicated)
    if "selfplay" in programs:  # the iteration's halves alone: which of them holds the temporaries
        log("compiling the self-play half")
        plans.append(compile_program("selfplay", lambda: trainer.selfplay.lower(state, key), resident))
    if "learning" in programs:
        log("compiling the learning half")
        plans.append(compile_program("learning", lambda: trainer.learn.lower(state, key), resident))
    if "gating" in programs and config.gating:
        log("compiling gating")
        gate_args = (state.params, state.batch_stats, state.best, state.iteration, key)
        plans.append(compile_program("gating", lambda: trainer.gate.lower(*gate_args), resident))
    if "engine" in programs and engine is not None:
        one = NamedSharding(Mesh(np.asarray(trainer.mesh.devices).reshape(-1)[:1], (DEVICE_AXIS,)), P())
        variables = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=one),
            {"params": state.params, "batch_stats": state.batch_stats},
        )
        for name, lower_engine in engine(trainer.setup, variables, one).items():
            log(f"compiling the {name}")
            plans.append(compile_program(name, lower_engine, 0, donated=True))
    if "evaluation" in programs and config.eval_every and evaluation is not None:
        variables = {"params": state.params, "batch_stats": state.batch_stats}
        for name, match in evaluation(trainer).matches.items():
            log(f"compiling the evaluation match against {name}")
            lower: Callable[[], Any] = functools.partial(match.lower, variables, key)
            plans.append(compile_program(f"evaluation vs {name}", lower, resident))
    return plans


def required_bytes(target: Target, peak_bytes: int) -> int:
    """A program's estimated peak with the target's margin (module docstring)."""
    if target.platform == "cuda":
        return int(peak_bytes * GPU_FACTOR) + GPU_EXTRA_BYTES
    return peak_bytes


def plan(
    config: Config,
    target: Target,
    programs=DEFAULT_PROGRAMS,
    iteration_seconds: float | None = None,
    log: Callable[[str], None] = lambda m: None,
    engine: EnginePrograms | None = None,
    evaluation: EvaluationFactory | None = None,
) -> dict:
    """The whole plan of `config` on `target`, JSON-ready (bytes per device)."""
    config.validate(target.devices)
    mesh = target_mesh(target)
    trainer = Trainer(config, mesh)
    state = state_bytes(trainer)
    compiled = compile_programs(trainer, programs, log, engine, evaluation)
    env = trainer.setup.env
    counted = flops_lib.iteration_flops(config, env.observation_shape, env.num_actions)
    result = summarize(target, config.game, compiled, state["total"])
    result.update(state_bytes=state, flops=counted, peak_bf16_flops_per_second=target.peak_bf16_flops * target.devices)
    if iteration_seconds:
        result["iteration_seconds"] = iteration_seconds
        peak = target.peak_bf16_flops * target.devices
        result["mfu"] = flops_lib.mfu(counted["iteration"], iteration_seconds, peak)
    return result


def summarize(target: Target, what: str, compiled: list[ProgramPlan], resident: int = 0) -> dict:
    """The plans of `compiled` on `target`, JSON-ready: each program, the largest need per device (with the target's
    margin; `resident` when nothing compiled) and whether it fits."""
    worst = max(compiled, key=lambda p: p.peak_bytes) if compiled else None
    need = required_bytes(target, worst.peak_bytes) if worst else resident
    return {
        "target": target.name,
        "about": target.about,
        "platform": target.platform,
        "devices": target.devices,
        "device_memory_bytes": target.memory_bytes,
        "budget_bytes": target.budget_bytes,
        "game": what,
        "programs": [dataclasses.asdict(p) for p in compiled],
        "required_bytes": need,
        "fits": need <= target.budget_bytes,
        "jax": jax.__version__,
    }


# What shrinks each part of a device's memory (named in the error of a plan that does not fit).
SHRINKS = {
    "replay_buffer": "replay_capacity",
    "games_in_progress": "selfplay_batch_size",
    "parameters_and_optimizer": "num_blocks, num_channels",
    "temporaries": "search_batch_size (games per search: the trees), remat=true, micro_batches and "
    "compute_dtype=bfloat16 (the learner)",
}


def check_fits(result: dict) -> None:
    """PlanError (one line) when the plan needs more than the target's budget."""
    if result["fits"]:
        return
    worst = max(result["programs"], key=lambda p: p["peak_bytes"])
    parts = {k: v for k, v in result.get("state_bytes", {}).items() if k not in ("total", "other")}
    parts["temporaries"] = worst["temp_bytes"]
    largest = sorted(parts.items(), key=lambda kv: -kv[1])[:2]
    shrinks = {**SHRINKS, **result.get("shrinks", {})}
    named = "; ".join(f"{name.replace('_', ' ')} {v / GIB:.1f} GiB (shrink: {shrinks[name]})" for name, v in largest)
    raise PlanError(
        f"{result['game']} does not fit {result['target']}: its {worst['name']} needs "
        f"{result['required_bytes'] / GIB:.1f} GiB per device, the device has {result['budget_bytes'] / GIB:.1f} GiB; "
        f"largest: {named}"
    )


def format_table(result: dict) -> str:
    """The plan as a short table (GiB per device)."""
    g = lambda b: f"{b / GIB:8.3f} GiB"
    lines = [
        f"{result['game']} on {result['target']} ({result['about']}; {result['devices']} devices, "
        f"{result['budget_bytes'] / GIB:.2f} GiB usable per device)",
    ]
    if "state_bytes" in result:  # an AlphaZero run's state (the AlphaGo stages hold theirs as arguments)
        s = result["state_bytes"]
        lines += [
            f"  parameters + optimizer {g(s['parameters_and_optimizer'])}",
            f"  replay buffer          {g(s['replay_buffer'])}",
            f"  games in progress      {g(s['games_in_progress'])}",
            f"  state in all           {g(s['total'])}",
        ]
    for p in result["programs"]:
        how = "refused by the compiler (out of memory)" if p["error"] else "compiled"
        lines.append(
            f"  {p['name']:<22} temporaries {g(p['temp_bytes'])}, peak {g(p['peak_bytes'])}, "
            f"{how} in {p['compile_seconds']:.1f} s"
        )
    f = result.get("flops")
    if f:
        lines.append(
            f"  FLOPs per iteration    {f['iteration'] / 1e12:.3g} TFLOP (self-play {f['selfplay'] / 1e12:.3g}, "
            f"training {f['training'] / 1e12:.3g}; {f['network_forward'] / 1e9:.3g} GFLOP a position)"
        )
    if "mfu" in result:
        lines.append(f"  MFU at {result['iteration_seconds']:g} s an iteration: {100 * result['mfu']:.1f}%")
    verdict = "fits" if result["fits"] else "DOES NOT FIT"
    lines.append(f"  needs {result['required_bytes'] / GIB:.2f} GiB per device: {verdict}")
    return "\n".join(lines)
