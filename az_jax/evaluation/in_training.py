"""In-training evaluation: the players a run evaluates against while it trains (Config.eval_opponents: those that run
on the devices, inside the run's own programs) and connect four's solved positions (Config.eval_solver_simulations),
resolved for the runtime's loop (az_jax/runtime/loop.py takes them as an `Evaluation`); and `train_and_evaluate`, the
loop with them: what `az-jax train` and `az_jax.train_and_evaluate` run.

    train_and_evaluate(config, run_dir, progress=True, progress_fn=None, devices=None) -> TrainState
      = train(prepare(config, run_dir, devices), progress=..., progress_fn=...)   (`az-jax train` calls the two
        itself: its errors come before it says what it trains)
    check_opponents(config)              # ConfigError (one line) for a spec that cannot run inside training
"""

from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from az_jax.core import config as config_lib
from az_jax.core.devices import DEVICE_AXIS
from az_jax.core.iteration import TrainState
from az_jax.evaluation import connect_four_solver as solver_lib
from az_jax.evaluation import positions as positions_lib
from az_jax.evaluation.players import JaxPlayer, make_player
from az_jax.runtime import distributed, loop
from az_jax.runtime.trainer import Trainer

IN_TRAINING = ("random", "mcts", "run")  # the kinds of player spec (az_jax/evaluation/players.py) a run can play


def check_opponents(config: config_lib.Config) -> config_lib.Config:
    """`config`, or a ConfigError naming the first of its eval_opponents that cannot run inside training."""
    for spec in config.eval_opponents:
        if spec.split(":")[0] not in IN_TRAINING:
            raise config_lib.ConfigError(
                f"eval_opponents: {spec!r} is not a player that runs inside training; use random, "
                f"mcts:sims=N or run:DIR@STEP (engines: `az-jax eval`)"
            )
    return config


def baseline_matches(trainer: Trainer, num_games: int, num_simulations: int) -> dict:
    """{opponent name: program (variables, key) -> results [num_games]} for the config's eval_opponents (players
    that run on device: az_jax/evaluation/players.py)."""
    matches = {}
    for spec in trainer.config.eval_opponents:
        player = make_player(spec, trainer.config.game)
        if not isinstance(player, JaxPlayer):
            raise config_lib.ConfigError(f"eval_opponents: {spec!r} is an external engine; use `az-jax eval`")
        matches[player.name] = trainer.match(player.fn, num_games, num_simulations)
    return matches


def load_solver_set() -> solver_lib.PositionSet:
    """Connect four's solver set (config.eval_solver_simulations); a ConfigError if it cannot be read."""
    try:
        return solver_lib.load(solver_lib.DEFAULT_POSITIONS)
    except (OSError, ValueError) as e:
        raise config_lib.ConfigError(f"eval_solver_simulations: cannot read the solver set: {e}") from None


def solver_probe(
    trainer: Trainer, positions: solver_lib.PositionSet, num_simulations: int
) -> Callable[[dict, jax.Array], dict]:
    """(variables, key) -> {eval/solver_*: share of optimal moves} on labelled connect-four `positions`
    (az_jax/evaluation/connect_four_solver.py): the raw policy's and the greedy search's, overall and in drawn
    positions. The positions are padded (repeating the first) to a multiple of the mesh size and sharded over it."""
    count = len(positions.moves)
    moves = np.concatenate([positions.moves, np.repeat(positions.moves[:1], -count % trainer.num_devices, axis=0)])
    host_states = jax.device_get(positions_lib.states_from_moves(trainer.setup.env, moves))
    sharding = NamedSharding(trainer.mesh, P(DEVICE_AXIS))
    states = jax.tree.map(  # every process holds the whole set and gives each of its devices that device's rows
        lambda x: jax.make_array_from_callback(x.shape, sharding, lambda index: x[index]), host_states
    )
    program = trainer.position_moves(num_simulations)
    drawn = positions.value == 0

    def probe(variables: dict, rng_key: jax.Array) -> dict:
        raw, searched = (np.asarray(distributed.fetch(a))[:count] for a in program(variables, states, rng_key))
        rows = np.arange(count)
        raw_ok, search_ok = positions.optimal[rows, raw], positions.optimal[rows, searched]
        return {
            "eval/solver_raw": float(raw_ok.mean()),
            "eval/solver_search": float(search_ok.mean()),
            "eval/solver_search_drawn": float(search_ok[drawn].mean()),
        }

    return probe


def evaluation(trainer: Trainer) -> loop.Evaluation:
    """The matches against the config's eval_opponents and, for connect four with eval_solver_simulations, the solver
    probe: what the loop evaluates with."""
    config = trainer.config
    sims = config.eval_simulations or config.num_simulations
    probe = None
    if config.eval_solver_simulations:
        probe = solver_probe(trainer, load_solver_set(), config.eval_solver_simulations)
    return loop.Evaluation(baseline_matches(trainer, config.eval_games, sims), probe)


def train_and_evaluate(
    config: config_lib.Config,
    run_dir: str,
    *,
    progress: bool = True,
    progress_fn: loop.ProgressFn | None = None,
    devices=None,
) -> TrainState:
    """Trains `config` in `run_dir` (az_jax/runtime/loop.py: resuming from its newest checkpoint) and evaluates it
    against its eval_opponents every eval_every iterations; returns the final TrainState."""
    return train(prepare(config, run_dir, devices), progress=progress, progress_fn=progress_fn)


def prepare(config: config_lib.Config, run_dir: str, devices=None) -> loop.Run:
    """The run checked once before anything is written (loop.prepare), its eval_opponents included."""
    return loop.prepare(check_opponents(config), run_dir, devices)


def train(run: loop.Run, *, progress: bool = True, progress_fn: loop.ProgressFn | None = None) -> TrainState:
    """Trains a prepared run, evaluating it against its eval_opponents."""
    return loop.train(run, evaluation=evaluation, progress=progress, progress_fn=progress_fn)
