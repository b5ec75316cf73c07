"""The AlphaGo pipeline's programs compiled for an accelerator this machine does not have (az_jax/runtime/preflight.py
does the same for an AlphaZero run): each stage's step at a preset's shapes, for a TPU slice or NVIDIA GPUs
(az_jax/runtime/targets.py), with XLA's memory analysis per device.

    plans = compile_stages(PRESETS["19x19"], mesh)   # [ProgramPlan], one per program below

The programs (Silver et al., Nature 2016, Methods), each with the preset's batch split over the mesh's devices as the
stage runs it:
  * `sl step`       one SGD step of p_σ on m positions (supervised.make_train_step)
  * `rollout step`  one SGD step of p_π on its batch, one device (rollout_policy._sgd_step) with the paper's feature
                    counts (Extended Data Table 4: 32,207 response and 69,338 non-response patterns), since ours
                    depend on the data
  * `rl games`      n games of p_ρ against a pool member (reinforce._play_program)
  * `rl update`     one REINFORCE step on those games (reinforce._update_program)
  * `value games`   a batch of the value data's games, one position each (value_data._generator)
  * `value step`    one SGD step of v_θ on m positions (value_training.make_train_step)
  * `search`        one APV-MCTS move of one game (apv_mcts.search, batch 1 on one device: the engine), with p_σ,
                    v_θ and p_π as the preset plays

Every program's peak per device is its arguments + outputs − aliased + temporaries (each takes what it works on as
arguments: the weights, the batch)."""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from az_jax.alphago import (
    apv_mcts,
    pattern_training,
    reinforce,
    rollout_policy,
    supervised,
    value_data,
    value_training,
)
from az_jax.alphago.networks import PolicyNetwork
from az_jax.alphago.position import Position
from az_jax.alphago.presets import AlphaGoPreset
from az_jax.core import devices
from az_jax.runtime import preflight as preflight_lib
from az_jax.runtime.targets import Target

PAPER_RESPONSE_PATTERNS, PAPER_PATTERNS = 32_207, 69_338  # Extended Data Table 4
PAPER_FEATURES = rollout_policy.NUM_FIXED + PAPER_RESPONSE_PATTERNS + PAPER_PATTERNS  # p_pi's weights
STAGES = ("sl step", "rollout step", "rl games", "rl update", "value games", "value step", "search")


def _abstract(tree: Any, sharding: Any) -> Any:
    """The shapes of `tree` (arrays or ShapeDtypeStructs) placed by `sharding` (one, or a matching tree of them)."""
    if isinstance(sharding, jax.sharding.Sharding):
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree)
    return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, sharding)


def _abstract_rollout(weights: Any, sharding: Any) -> rollout_policy.RolloutPolicy:
    """p_π at the paper's vocabulary sizes, abstract: sorted vocabularies, their hash tables (`rollout_policy.hashed`,
    what a loaded p_π looks its patterns up with, at their first size) and `weights`."""
    array = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.uint32, sharding=sharding)  # noqa: E731
    return rollout_policy.RolloutPolicy(
        response_vocabulary=array(PAPER_RESPONSE_PATTERNS),
        pattern_vocabulary=array(PAPER_PATTERNS),
        weights=weights,
        response_table=array(rollout_policy.table_size(PAPER_RESPONSE_PATTERNS), 2),
        pattern_table=array(rollout_policy.table_size(PAPER_PATTERNS), 2),
    )


def _jitted(fn: Callable) -> Any:
    """A stage's program as what it is, a jitted function (the stage modules type it as a Callable), for `.lower`."""
    return fn


def _positions(size: int, batch: int) -> Position:
    """A batch of positions' shapes (position.py's dtypes)."""
    p = size * size
    return Position(
        board=jax.ShapeDtypeStruct((batch, p), jnp.int8),
        turns_since=jax.ShapeDtypeStruct((batch, p), jnp.int8),
        ko=jax.ShapeDtypeStruct((batch,), jnp.int32),
        black_to_move=jax.ShapeDtypeStruct((batch,), jnp.bool_),
    )


def _divisible(name: str, count: int, mesh: Mesh) -> None:
    if count % mesh.size:
        raise preflight_lib.PlanError(f"{name} = {count} does not split over the target's {mesh.size} devices")


def _programs(preset: AlphaGoPreset, mesh: Mesh) -> dict[str, Callable[[], Any]]:
    """name -> a function lowering that program for `mesh` (the stage's own jitted function, abstract arguments)."""
    size = preset.size
    replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P(devices.DEVICE_AXIS))
    one = Mesh(np.asarray(mesh.devices).reshape(-1)[:1], (devices.DEVICE_AXIS,))  # a single device: the engine's
    on_one = NamedSharding(one, P())
    key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=replicated)
    sl, value, rl = preset.sl, preset.value, preset.rl
    sl_state = _abstract(jax.eval_shape(lambda: supervised.init_state(sl)), replicated)
    value_state = _abstract(jax.eval_shape(lambda: value_training.init_state(value)), replicated)
    policy_params = sl_state.params
    network = PolicyNetwork(layers=sl.layers, filters=sl.filters)
    plies = rl.plies(size)

    def sl_step():
        _divisible("sl.batch_size", sl.batch_size, mesh)
        action = jax.ShapeDtypeStruct((sl.batch_size,), jnp.int32, sharding=batch)
        positions = _abstract(_positions(size, sl.batch_size), batch)
        return _jitted(supervised.make_train_step(sl, mesh)).lower(sl_state, key, positions, action)

    def rollout_step():  # p_π's step, its minibatch's features computed in it (pattern_training.py)
        m, config = preset.rollout.batch_size, preset.rollout
        weights: Any = jax.ShapeDtypeStruct((PAPER_FEATURES,), jnp.float32, sharding=on_one)
        step: Any = jax.ShapeDtypeStruct((), jnp.int32, sharding=on_one)
        policy = _abstract_rollout(weights, on_one)
        opt_state = _abstract(jax.eval_shape(pattern_training.optimizer(config).init, weights), on_one)
        state = pattern_training.PatternState(weights, opt_state, step)
        positions = _abstract(_positions(size, m), on_one)
        actions = jax.ShapeDtypeStruct((m,), jnp.int32, sharding=on_one)
        return pattern_training._train_step.lower(
            policy, state, positions, actions, family=rollout_policy.ROLLOUT, config=config
        )

    def play():
        _divisible("rl.games / 2", rl.games // 2, mesh)
        return _jitted(reinforce._play_program(network, sl.planes, size, rl.games, plies, mesh))

    def rl_games():
        return play().lower(policy_params, policy_params, key)

    def rl_update():
        games = jax.eval_shape(play(), policy_params, policy_params, key)
        games = _abstract(games, jax.tree.map(lambda s: NamedSharding(mesh, s), reinforce._GAMES_SPECS))
        opt_state = _abstract(jax.eval_shape(reinforce.optimizer(rl).init, policy_params), replicated)
        iteration: Any = jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated)
        state = reinforce.RLState(params=policy_params, opt_state=opt_state, iteration=iteration)
        return _jitted(reinforce._update_program(network, rl.learning_rate, mesh)).lower(state, games)

    def value_games():
        _divisible("value_batch", preset.value_batch, mesh)
        shape = (sl.layers, sl.filters, sl.planes)  # value_data._shape of p_σ (p_ρ has its shape)
        generate = _jitted(value_data._generator(size, shape, shape, mesh))
        settings = {
            "u_lo": jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated),
            "u_hi": jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated),
            "temperature": jax.ShapeDtypeStruct((), jnp.float32, sharding=replicated),
            "max_attempts": jax.ShapeDtypeStruct((), jnp.int32, sharding=replicated),
        }
        index = jax.ShapeDtypeStruct((preset.value_batch,), jnp.int32, sharding=batch)
        return generate.lower(policy_params, policy_params, key, settings, index)

    def value_step():
        _divisible("value.batch_size", value.batch_size, mesh)
        z = jax.ShapeDtypeStruct((value.batch_size,), jnp.float32, sharding=batch)
        positions = _abstract(_positions(size, value.batch_size), batch)
        return _jitted(value_training.make_train_step(value, mesh)).lower(value_state, key, positions, z)

    def search():
        env = apv_mcts._env(size)
        one_game = jax.eval_shape(lambda: jax.vmap(env.init)(jax.random.split(jax.random.key(0), 1)))
        states = _abstract(one_game, on_one)
        rollout = _abstract_rollout(jax.ShapeDtypeStruct((PAPER_FEATURES,), jnp.float32, sharding=on_one), on_one)
        nets = apv_mcts.Nets(
            policy_params=_abstract(policy_params, on_one),
            value_params=_abstract(value_state.params, on_one),
            rollout=rollout,
            policy=network,
            policy_planes=sl.planes,
            value=value_training.network(value),
            value_planes=value.planes,
        )
        one_key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=on_one)
        return apv_mcts._search_jit.lower(preset.search, nets, states, one_key)

    return {
        "sl step": sl_step,
        "rollout step": rollout_step,
        "rl games": rl_games,
        "rl update": rl_update,
        "value games": value_games,
        "value step": value_step,
        "search": search,
    }


def compile_stages(
    preset: AlphaGoPreset, mesh: Mesh, stages=STAGES, log: Callable[[str], None] = lambda m: None
) -> list[preflight_lib.ProgramPlan]:
    """Compiles `stages` of `preset` for `mesh` (a target's compile-only devices); a ProgramPlan each."""
    programs = _programs(preset, mesh)
    unknown = [s for s in stages if s not in programs]
    if unknown:
        raise preflight_lib.PlanError(f"unknown AlphaGo stage {unknown[0]!r}; known: {', '.join(STAGES)}")
    plans = []
    for name in stages:
        log(f"compiling AlphaGo's {name}")
        plans.append(preflight_lib.compile_program(name, programs[name], 0, donated=True))
    return plans


SHRINKS = {"temporaries": "the stage's batch (sl.batch_size, rl.games, value_batch, value.batch_size)"}


def plan(preset: AlphaGoPreset, target: Target, stages=STAGES, log: Callable[[str], None] = lambda m: None) -> dict:
    """Every stage of `preset` compiled for `target`, JSON-ready as az_jax/preflight.plan's (bytes per device)."""
    plans = compile_stages(preset, preflight_lib.target_mesh(target), stages, log)
    result = preflight_lib.summarize(target, f"AlphaGo {preset.name}", plans)
    result["shrinks"] = SHRINKS
    return result
