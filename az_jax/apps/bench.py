"""Performance harness: throughput, where a self-play step's time goes, compile time, memory, FLOPs and MFU.

`run_benchmark(config)` measures one game/config on the devices it is given and returns a JSON-ready dict; the CLI
(`az-jax bench`, experiments/performance/benchmark.py) prints it and a short table (`format_table`). Everything is timed
with `jax.block_until_ready` after a warm-up call, and each figure is the median of `repeats` timed calls.

What is measured (all over the same 1-D device mesh as training; per-device batches are B_local = B / devices):
  * self-play: `selfplay_program` (S plies of B games) -> positions/s = B·S / t, simulations/s = positions/s · sims
    (sims: a ply's mean, p·n + (1 − p)·fast under playout cap randomization);
  * training: `learn_program` (G gradient steps) on a buffer with outcomes -> samples/s = G · batch_size / t;
  * the split of one self-play ply, each part timed in isolation on every device at once:
      network  = one forward on [B_local] observations,        × (sims + 1) per ply (root + one per simulation),
      env step = `jax.vmap(env.step)` on [B_local] states,      × sims per ply,
      search   = one whole mctx search of [B_local] states,
      bookkeeping = search − (sims + 1)·network − sims·env step   (tree gathers/scatters, selection, backups),
      outside search = ply − search   (the move's own env step, replay write and outcome resolution, resets);
    each part runs several times inside one jitted loop (network and env step `inner_steps` times, the search
    `inner_steps // 4`; each iteration depends on the previous one or on a fresh key, so XLA cannot hoist it out)
    and is divided by that count, which keeps dispatch overhead out; the split's search is the full one of n =
    `num_simulations` simulations, so under playout cap randomization (a mean ply of fewer) its outside-search
    share is not the ply's;
  * compile: lower + compile of `Trainer.iterate` on a fresh Trainer, then the wall time of its first three
    iterations; no recompile after the first call (jit cache size, and the number of XLA backend compilations
    during calls 2 and 3);
  * memory: peak device memory from `device.memory_stats()` where the backend reports it, else the process's max RSS;
  * FLOPs: counted from the network (az_jax/core/flops.py; XLA's cost analysis counts a GPU's cuDNN convolutions as 0),
    per evaluation and per trained sample (3 forwards); MFU = achieved FLOP/s / the machine's measured peak
    (CPU: best float32 2048² matmul on every device at once; GPU/TPU: bfloat16 8192² matmul), measured at the start
    and at the end of the run, the best of both kept.
"""

import dataclasses
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from az_jax.core import flops as flops_lib
from az_jax.core import replay as replay_lib
from az_jax.core import search as search_lib
from az_jax.core.config import Config
from az_jax.core.devices import DEVICE_AXIS, device_key, make_mesh, sharded
from az_jax.core.iteration import TrainState
from az_jax.runtime.trainer import Trainer

LogFn = Callable[[str], None]


# --- small measurement helpers -------------------------------------------------------------------------------------
def timed(fn, *args) -> tuple[float, Any]:
    """(seconds, result) of one call, waiting for the result to be ready."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0, out


def median_time(fn, *args, repeats: int, warmup: int = 1) -> dict:
    """Calls fn(*args) `warmup` times untimed, then `repeats` times timed. Returns the median and all times."""
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = [timed(fn, *args)[0] for _ in range(repeats)]
    return {"seconds": statistics.median(times), "all_seconds": times}


class CompileCounter:
    """Counts XLA backend compilations (and their seconds per function) while active. Use as a context manager."""

    EVENT = "/jax/core/compile/backend_compile_duration"

    def __init__(self):
        self.count = 0
        self.seconds = 0.0
        self.by_function: dict[str, float] = {}

    def _listener(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event == self.EVENT:
            name = str(kwargs.get("fun_name", "?"))
            self.count += 1
            self.seconds += duration_secs
            self.by_function[name] = self.by_function.get(name, 0.0) + duration_secs

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self._listener)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._listener)


def peak_memory(devices) -> dict:
    """Peak memory: per-device `peak_bytes_in_use` where reported, else the process's max resident set size."""
    stats = [d.memory_stats() for d in devices]
    if all(s and "peak_bytes_in_use" in s for s in stats):
        per_device = [int(s["peak_bytes_in_use"]) for s in stats]
        return {
            "source": "device.memory_stats()['peak_bytes_in_use']",
            "per_device_bytes": per_device,
            "bytes": max(per_device),
        }
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss *= 1 if sys.platform == "darwin" else 1024  # Linux reports KiB, macOS bytes
    return {
        "source": "process max RSS (resource.getrusage), not device memory: the backend reports no device memory stats",
        "bytes": int(rss),
    }


def measure_peak_flops(mesh, repeats: int = 4) -> dict:
    """The machine's peak FLOP/s, measured: the best of `repeats` matmuls run on every device of `mesh` at once.

    CPU: float32 2048×2048 per device; GPU/TPU: bfloat16 8192×8192 per device. FLOPs = 2·n³ per device."""
    platform = mesh.devices.flat[0].platform
    n, dtype = (2048, jnp.float32) if platform == "cpu" else (8192, jnp.bfloat16)
    sharding = NamedSharding(mesh, P(DEVICE_AXIS))
    ka, kb = jax.random.split(jax.random.key(0))
    a = jax.device_put(jax.random.normal(ka, (mesh.size * n, n), dtype), sharding)
    b = jax.device_put(jax.random.normal(kb, (mesh.size * n, n), dtype), sharding)
    matmul = sharded(lambda x, y: x @ y, mesh, (P(DEVICE_AXIS), P(DEVICE_AXIS)), P(DEVICE_AXIS))
    jax.block_until_ready(matmul(a, b))
    best = min(timed(matmul, a, b)[0] for _ in range(repeats))
    return {
        "flops_per_second": 2.0 * n**3 * mesh.size / best,
        "method": f"{jnp.dtype(dtype).name} {n}x{n} matmul on each of {mesh.size} device(s) at once, best of {repeats}",
        "seconds": best,
    }


# --- the state the measurements start from -----------------------------------------------------------------------
def _replicated(trainer: Trainer, value, like: jax.Array) -> jax.Array:
    """`value` as a replicated array with `like`'s dtype, placed like the state's replicated leaves."""
    return jax.device_put(jnp.asarray(value, like.dtype), NamedSharding(trainer.mesh, P()))


def _outcomes_per_device(trainer: Trainer, buffer: replay_lib.ReplayBuffer) -> np.ndarray:
    """Positions with a known outcome on each device's replay shard [D]."""
    return np.asarray(jax.device_get(buffer.done)).reshape(trainer.num_devices, -1).sum(axis=1)


def learning_ready(trainer: Trainer, buffer: replay_lib.ReplayBuffer) -> bool:
    """The learner's own condition: enough outcomes in total and at least one on every device."""
    done = _outcomes_per_device(trainer, buffer)
    return bool(done.sum() >= max(trainer.config.min_replay_size, 1) and done.min() > 0)


# --- the two halves of the iteration, each alone ----------------------------------------------------------------
def selfplay_program(trainer: Trainer):
    """(state, key) -> (games, replay, summed metrics): the self-play half of the iteration alone (Trainer.selfplay)."""
    return trainer.selfplay


def learn_program(trainer: Trainer):
    """(state, key) -> (params, batch_stats, opt_state, ready, metrics): the G gradient steps alone (Trainer.learn)."""
    return trainer.learn


# --- the parts of a self-play ply in isolation -------------------------------------------------------------------
def network_loop(trainer: Trainer, inner_steps: int):
    """(variables, observations [B, ...]) -> values: `inner_steps` dependent forwards on each device's [B_local]."""

    def local(variables, obs):
        def body(_, obs):
            _, value = trainer.setup.apply_fn(variables, obs)
            flip = (value > 2.0).reshape((-1,) + (1,) * (obs.ndim - 1))  # never true (tanh), unknown to XLA
            return jnp.where(flip, jnp.zeros_like(obs), obs)

        return jax.lax.fori_loop(0, inner_steps, body, obs)

    return sharded(local, trainer.mesh, (P(), P(DEVICE_AXIS)), P(DEVICE_AXIS))


def env_step_loop(trainer: Trainer, inner_steps: int):
    """(pgx states [B, ...]) -> states: `inner_steps` `jax.vmap(env.step)` calls on each device's [B_local]."""
    env = trainer.setup.env
    num_actions = env.num_actions

    def local(states):
        rows = jnp.arange(states.current_player.shape[0])

        def body(i, states):
            # A cheap, varying choice among the legal actions (no random-number generation inside the timing).
            priority = (jnp.arange(num_actions)[None, :] * 7 + rows[:, None] * 5 + i * 13) % num_actions + 1
            action = jnp.argmax(jnp.where(states.legal_action_mask, priority, 0), axis=-1)
            return jax.vmap(env.step)(states, action)

        return jax.lax.fori_loop(0, inner_steps, body, states)

    return sharded(local, trainer.mesh, (P(DEVICE_AXIS),), P(DEVICE_AXIS))


def search_loop(trainer: Trainer, inner_steps: int):
    """(variables, pgx states [B, ...], key) -> summed actions: `inner_steps` self-play searches (new keys each) of
    each device's [B_local] states."""
    setup = trainer.setup

    def local(variables, states, key):
        key = device_key(key)

        def body(i, total):
            out = search_lib.run_search(
                setup.apply_fn, setup.env, variables, jax.random.fold_in(key, i), states, setup.selfplay.search
            )
            return total + out.action

        return jax.lax.fori_loop(0, inner_steps, body, jnp.zeros(states.current_player.shape, jnp.int32))

    return sharded(local, trainer.mesh, (P(), P(DEVICE_AXIS), P()), P(DEVICE_AXIS))


def selfplay_split(trainer: Trainer, state: TrainState, ply_seconds: float, repeats: int, inner_steps: int) -> dict:
    """Times the network, the env step and the whole search of one ply in isolation; attributes the ply's time."""
    sims = trainer.config.num_simulations
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    states = state.games.env
    net = median_time(network_loop(trainer, inner_steps), variables, states.observation, repeats=repeats)
    env = median_time(env_step_loop(trainer, inner_steps), states, repeats=repeats)
    search_steps = max(1, inner_steps // 4)  # a search is (sims + 1) forwards long: dispatch matters less
    search = median_time(search_loop(trainer, search_steps), variables, states, jax.random.key(1), repeats=repeats)
    network_s, env_s = net["seconds"] / inner_steps, env["seconds"] / inner_steps
    search_s = search["seconds"] / search_steps
    parts = {"network": (sims + 1) * network_s, "env_step": sims * env_s}
    parts["bookkeeping"] = search_s - parts["network"] - parts["env_step"]
    parts["outside_search"] = ply_seconds - search_s
    return {
        "local_batch": trainer.config.selfplay_batch_size // trainer.num_devices,
        "inner_steps": {"network": inner_steps, "env_step": inner_steps, "search": search_steps},
        "network_forward_seconds": network_s,
        "env_step_seconds": env_s,
        "search_seconds": search_s,
        "ply_seconds": ply_seconds,
        "seconds_per_ply": parts,
        "share_of_ply": {k: v / ply_seconds for k, v in parts.items()},
        "share_of_search": {k: parts[k] / search_s for k in ("network", "env_step", "bookkeeping")},
    }


# --- FLOPs --------------------------------------------------------------------------------------------------------
def network_flops_per_evaluation(trainer: Trainer) -> float:
    """FLOPs of one network evaluation, counted from the network (az_jax/core/flops.py)."""
    env = trainer.setup.env
    return float(flops_lib.network_forward_flops(trainer.config, env.observation_shape, env.num_actions))


def train_flops_per_sample(trainer: Trainer) -> float:
    """FLOPs of one trained sample: the forward and the backward pass, 3 forwards (az_jax/core/flops.py)."""
    return flops_lib.TRAIN_FORWARDS * network_flops_per_evaluation(trainer)


# --- the whole benchmark ------------------------------------------------------------------------------------------
def compile_and_first_iterations(trainer: Trainer) -> tuple[dict, TrainState]:
    """Lower + compile time of `trainer.iterate`, the first three iterations' wall time, and any recompiles.

    Call on a fresh Trainer (nothing compiled yet). The ahead-of-time compile fills the jit cache, so the first
    call normally compiles nothing more (`backend_compiles_in_first_call` says). Returns (figures, the state after
    the three iterations)."""
    t0 = time.perf_counter()
    lowered = trainer.iterate.lower(trainer.abstract_state())
    t1 = time.perf_counter()
    lowered.compile()
    t2 = time.perf_counter()
    state = trainer.init_state()
    cache_size = getattr(trainer.iterate, "_cache_size", lambda: None)  # jit's own count of cached signatures
    walls, sizes = [], []
    for _ in range(3):
        with CompileCounter() as counter:
            seconds, (state, _) = timed(trainer.iterate, state)  # donates the old state; only the new one is kept
        walls.append((seconds, counter.count))
        sizes.append(cache_size())
    later_compiles = walls[1][1] + walls[2][1]
    figures = {
        "iteration_lower_seconds": t1 - t0,
        "iteration_compile_seconds": t2 - t1,
        "iteration_lower_plus_compile_seconds": t2 - t0,
        "first_iteration_wall_seconds": walls[0][0],
        "second_iteration_wall_seconds": walls[1][0],
        "third_iteration_wall_seconds": walls[2][0],
        "first_call_total_seconds": t2 - t0 + walls[0][0],
        "backend_compiles_in_first_call": walls[0][1],
        "backend_compiles_in_calls_2_and_3": later_compiles,
        "jit_cache_size_after_each_call": sizes,
        "jit_cache_size_after_3_calls": sizes[-1],
        # A recompile is an XLA compilation; a new jit cache entry without one is a retrace whose lowering hit cache.
        "no_recompile_after_first_iteration": later_compiles == 0,
        "jit_cache_stays_at_one": sizes == [1, 1, 1],
        "note": "the ahead-of-time lower+compile fills the jit cache, so iteration 1's wall time excludes compilation "
        "when backend_compiles_in_first_call is 0; iteration 1 starts from an empty replay buffer and skips "
        "its gradient steps (lax.cond), later ones train once min_replay_size outcomes exist",
    }
    return figures, state


def run_benchmark(
    config: Config,
    devices=None,
    repeats: int = 3,
    inner_steps: int = 8,
    max_fill_calls: int = 2,
    log: LogFn | None = None,
) -> dict:
    """Measures `config` on `devices` (default: all of the default backend's). Returns a JSON-ready dict.

    repeats: timed calls per figure (the median is reported); inner_steps: loop length of the isolated network and
    env-step timings (the search loop is a quarter of it); max_fill_calls: extra self-play calls allowed to give the
    learner enough outcomes before the rest of the written rows are marked done.
    """
    mesh = make_mesh(devices)
    config.validate(mesh.size)
    loadavg_before = os.getloadavg()
    with CompileCounter() as compiles:
        result = _measure(config, mesh, repeats, inner_steps, max_fill_calls, log or (lambda message: None))
    result["environment"].update(loadavg_before=list(loadavg_before), loadavg_after=list(os.getloadavg()))
    slowest = sorted(compiles.by_function.items(), key=lambda item: -item[1])[:5]
    result["compile"].update(
        backend_compiles_total=compiles.count,
        backend_compile_seconds_total=compiles.seconds,
        slowest_backend_compiles_seconds=dict(slowest),
    )
    return result


def _measure(config: Config, mesh, repeats: int, inner_steps: int, max_fill_calls: int, log: LogFn) -> dict:
    marks = []  # (phase, start time): wall time of each phase, for the record

    def phase(name: str) -> None:
        marks.append((name, time.perf_counter()))
        log(name)

    plies, B = config.selfplay_steps, config.selfplay_batch_size
    sims = flops_lib.mean_simulations_per_ply(config)  # with playout cap randomization p·n + (1 − p)·fast, not n

    phase("peak FLOP/s (matmul)")
    first_peak = peak = measure_peak_flops(mesh)

    phase("compile + first iterations")
    trainer = Trainer(config, mesh)
    compile_figures, state = compile_and_first_iterations(trainer)
    selfplay_only, learn_only = selfplay_program(trainer), learn_program(trainer)

    # Self-play: S plies of B games per call; the games and the buffer carry over from call to call, and the
    # iteration counter advances so each call writes fresh buffer rows (as in training).
    phase("self-play")
    key = jax.random.key(config.seed + 1)
    iteration = int(jax.device_get(state.iteration))

    def selfplay_call(state, k):
        state = state.replace(iteration=_replicated(trainer, iteration + k, state.iteration))
        seconds, (games, buffer, _) = timed(selfplay_only, state, jax.random.fold_in(key, k))
        return seconds, state.replace(games=games, replay=buffer)

    times = []
    for call in range(1 + repeats):
        seconds, state = selfplay_call(state, call)
        if call:  # the first call compiles
            times.append(seconds)
    calls = 1 + repeats
    selfplay_seconds = statistics.median(times)
    positions_per_second = B * plies / selfplay_seconds
    selfplay_figures = {
        "seconds_per_call": selfplay_seconds,
        "all_seconds": times,
        "plies_per_call": plies,
        "positions_per_call": B * plies,
        "positions_per_second": positions_per_second,
        "simulations_per_second": positions_per_second * sims,
        "network_evaluations_per_second": positions_per_second * (sims + 1),
    }

    # Training: fill the buffer with real self-play until the learner would train; if the games are too long for
    # that, mark the written rows as having an outcome (their z stays 0): a gradient step costs the same either way.
    phase("training")
    fills = 0
    while not learning_ready(trainer, state.replay) and fills < max_fill_calls:
        _, state = selfplay_call(state, calls + fills)
        fills += 1
    real_outcomes = int(_outcomes_per_device(trainer, state.replay).sum())
    source = "self-play outcomes"
    if not learning_ready(trainer, state.replay):
        buffer = state.replay.replace(done=state.replay.done | state.replay.pending)  # type: ignore[attr-defined]
        state = state.replace(replay=jax.device_put(buffer, trainer.shardings.replay))  # type: ignore[attr-defined]
        source = "self-play positions, unfinished games marked done (synthetic z = 0)"
    ready = bool(jax.device_get(jax.block_until_ready(learn_only(state, jax.random.key(2)))[3]))  # warm-up
    learn = median_time(learn_only, state, jax.random.key(2), repeats=repeats, warmup=0)
    steps = config.train_steps_per_iteration
    samples_per_second = steps * config.batch_size / learn["seconds"]
    training_figures = {
        "seconds_per_call": learn["seconds"],
        "all_seconds": learn["all_seconds"],
        "train_steps_per_call": steps,
        "batch_size": config.batch_size,
        "samples_per_second": samples_per_second,
        "learner_ready": ready,
        "replay_positions_with_outcome": int(_outcomes_per_device(trainer, state.replay).sum()),
        "replay_real_outcomes": real_outcomes,
        "replay_source": source,
        "selfplay_calls_to_fill": fills,
    }

    phase("self-play split (network / env step / search)")
    split = selfplay_split(trainer, state, selfplay_seconds / plies, repeats, inner_steps)

    phase("FLOPs, peak FLOP/s again")
    peak_again = measure_peak_flops(mesh)  # other load only lowers a peak measurement: keep the best of the two
    peak = max(peak, peak_again, key=lambda p: p["flops_per_second"])
    peak["samples_flops_per_second"] = [first_peak["flops_per_second"], peak_again["flops_per_second"]]
    flops_eval = network_flops_per_evaluation(trainer)
    flops_sample = train_flops_per_sample(trainer)
    peak_fps = peak["flops_per_second"]
    achieved = selfplay_figures["network_evaluations_per_second"] * flops_eval
    flops_figures = {
        "network_flops_per_evaluation": flops_eval,
        "train_flops_per_sample": flops_sample,
        "peak_flops_per_second": peak_fps,
        "peak_method": peak["method"],
        "peak_samples_flops_per_second": peak["samples_flops_per_second"],
        "selfplay_network_flops_per_second": achieved,
        "selfplay_mfu": achieved / peak_fps,
        "network_isolated_mfu": B * flops_eval / split["network_forward_seconds"] / peak_fps,
        "train_flops_per_second": samples_per_second * flops_sample,
        "train_mfu": samples_per_second * flops_sample / peak_fps,
        "note": "FLOPs counted from the network (az_jax/core/flops.py: 2 per multiply-add, every kernel tap, a trained "
        "sample = 3 forwards); evaluations per position = num_simulations + 1",
    }

    marks.append(("end", time.perf_counter()))
    return {
        "game": config.game,
        "config": dataclasses.asdict(config),
        "environment": {
            "jax_version": jax.__version__,
            "backend": jax.default_backend(),
            "platform": mesh.devices.flat[0].platform,
            "device_kind": mesh.devices.flat[0].device_kind,
            "num_devices": mesh.size,
            "devices": [str(d) for d in mesh.devices.flat],
            "cpu_count": os.cpu_count(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
        },
        "repeats": repeats,
        "selfplay": selfplay_figures,
        "training": training_figures,
        "split": split,
        "compile": compile_figures,
        "flops": flops_figures,
        "memory": peak_memory(list(mesh.devices.flat)),
        "phase_wall_seconds": {name: end - start for (name, start), (_, end) in zip(marks, marks[1:])},
    }


# --- presentation -------------------------------------------------------------------------------------------------
def _si(value: float, unit: str = "") -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}".rstrip()


def format_table(result: dict) -> str:
    """A short human-readable summary of `run_benchmark`'s result."""
    env, sp, tr, split = result["environment"], result["selfplay"], result["training"], result["split"]
    comp, fl, mem = result["compile"], result["flops"], result["memory"]
    share = split["share_of_ply"]
    mem_label = "peak device memory" if mem["source"].startswith("device") else "process max RSS"
    rows = [
        ("game / devices", f"{result['game']} / {env['num_devices']} x {env['platform']} (jax {env['jax_version']})"),
        ("self-play positions/s", f"{sp['positions_per_second']:.1f}"),
        ("search simulations/s", f"{sp['simulations_per_second']:.0f}"),
        ("training samples/s", f"{tr['samples_per_second']:.1f}"),
        (
            "ply: network/env/bookkeeping/outside",
            " / ".join(f"{100 * share[k]:.0f}%" for k in ("network", "env_step", "bookkeeping", "outside_search")),
        ),
        ("compile (lower+compile)", f"{comp['iteration_lower_plus_compile_seconds']:.1f} s"),
        (
            "iterations 1, 2, 3 wall",
            ", ".join(
                f"{comp[k]:.2f} s"
                for k in (
                    "first_iteration_wall_seconds",
                    "second_iteration_wall_seconds",
                    "third_iteration_wall_seconds",
                )
            ),
        ),
        (
            "no recompile (jit cache sizes)",
            f"{comp['no_recompile_after_first_iteration']} "
            f"({', '.join(map(str, comp['jit_cache_size_after_each_call']))})",
        ),
        ("FLOPs / evaluation", _si(fl["network_flops_per_evaluation"])),
        ("peak (measured)", _si(fl["peak_flops_per_second"], "FLOP/s")),
        (
            "MFU self-play / network / train",
            " / ".join(f"{100 * fl[k]:.2f}%" for k in ("selfplay_mfu", "network_isolated_mfu", "train_mfu")),
        ),
        (mem_label, _si(mem["bytes"], "B")),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
