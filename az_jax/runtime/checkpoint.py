"""Orbax save/restore of the whole TrainState plus its config, in `RUN_DIR/checkpoints/<iteration>/`.

A checkpoint has three items, so that an agent can load the network without the (large) replay buffer:
  model  — params and batch-norm averages
  train  — optimizer state, games in progress, replay buffer, RNG key, iteration (and, with AlphaGo Zero's switches,
           the best player's weights and the resignation state)
  config — the resolved Config as JSON

Restores are verified: every item read must restore, its iteration must be the step's, and its weights must be
finite; a checkpoint that fails is a DamagedCheckpointError, with one line saying which item failed and why (orbax's
own exception is not chained, so its traceback never reaches the user). Damaged checkpoints are moved aside, never
deleted, to RUN_DIR/checkpoints_damaged/ (`move_aside`), outside the directory the CheckpointManager manages.
"""

import contextlib
import dataclasses
import logging
import os
import sys
import traceback
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from az_jax.core import config as config_lib
from az_jax.core import overrides as overrides_lib
from az_jax.core.gating import BestPlayer
from az_jax.core.replay import ReplayBuffer
from az_jax.core.selfplay import SelfPlayState


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt, or belongs to another run (game, network, shapes)."""


class DamagedCheckpointError(CheckpointError):
    """A checkpoint whose files do not read back whole: an item that does not restore, a config item that does not
    parse, a train item of another iteration, or weights that are not finite."""


def checkpoint_dir(run_dir: str) -> str:
    return os.path.join(os.path.abspath(run_dir), "checkpoints")


def damaged_dir(run_dir: str) -> str:
    """Where damaged checkpoints of `run_dir` are moved: beside checkpoints/, so orbax never lists or deletes them."""
    return os.path.join(os.path.abspath(run_dir), "checkpoints_damaged")


def make_manager(run_dir: str, keep: int = 3, read_only: bool = False) -> ocp.CheckpointManager:
    # Readers (agents) open the manager without creating anything and never save, so nothing can be deleted.
    options = ocp.CheckpointManagerOptions(max_to_keep=None if read_only or keep == 0 else keep, create=not read_only)
    return ocp.CheckpointManager(checkpoint_dir(run_dir), options=options, item_names=("model", "train", "config"))


def _split(state):
    model = {"params": state.params, "batch_stats": state.batch_stats}
    train = {
        "opt_state": state.opt_state,
        "games": _later_fields_dropped(state.games, SelfPlayState, _LATER_GAMES_FIELDS),
        "replay": _replay_item(state.replay),
        "key": state.key,
        "iteration": state.iteration,
    }
    # present only when their switch is on, so an alphazero checkpoint has exactly the items it always had
    train.update({k: getattr(state, k) for k in ("best", "resign") if getattr(state, k) is not None})
    return model, train


# Replay fields added after checkpoints existed: saved only when their switch is on (not None), so a checkpoint of a
# run without them has exactly the train item it had before them, and older checkpoints restore.
_LATER_REPLAY_FIELDS = ("ownership", "score", "policy_index", "scored", "state", "value_known")
# ReplayBuffer's static fields (not arrays): never saved, restored from the abstract state the config makes
_STATIC_REPLAY_FIELDS = ("num_actions",)
# Self-play state fields added after checkpoints existed (game forking's candidates), saved the same way
_LATER_GAMES_FIELDS = ("fork", "fork_ply", "fork_offers")


def _replay_item(replay: Any) -> Any:
    return _later_fields_dropped(replay, ReplayBuffer, _LATER_REPLAY_FIELDS, _STATIC_REPLAY_FIELDS)


def _later_fields_dropped(item: Any, cls: Any, later: tuple[str, ...], static: tuple[str, ...] = ()) -> Any:
    """A `cls` dataclass as the dict of its fields, less its static ones and its `later` ones that are None;
    anything else (a placeholder: agents' test checkpoints) as it is."""
    if not isinstance(item, cls):
        return item
    fields = {f.name: getattr(item, f.name) for f in dataclasses.fields(item) if f.name not in static}
    return {k: v for k, v in fields.items() if v is not None or k not in later}


def save(manager: ocp.CheckpointManager, state, config: config_lib.Config) -> int:
    """Saves `state` at step = its iteration count (asynchronously; `manager.wait_until_finished()` to block)."""
    step = int(jax.device_get(state.iteration))
    model, train = _split(state)
    manager.save(
        step,
        args=ocp.args.Composite(
            model=ocp.args.StandardSave(model),
            train=ocp.args.StandardSave(train),
            config=ocp.args.JsonSave(dataclasses.asdict(config)),
        ),
    )
    return step


class SaveError(CheckpointError):
    """A checkpoint that could not be written (a full disk, a quota, a file-size limit): the checkpoints already
    written are whole (orbax writes each into a temporary folder and renames it when complete, and deletes old ones
    only after a save succeeds)."""


class Saver:
    """`save` and `wait` of a run's checkpoints, whose failures (orbax's asynchronous writes raise in a later call)
    are one SaveError naming the checkpoint that failed and those that are whole. Orbax's own error log of a failed
    write (absl tracebacks from its background threads) is silenced: the SaveError says it in a line."""

    def __init__(self, manager: ocp.CheckpointManager):
        self.manager = manager
        self.attempted: list[int] = []
        logging.getLogger("absl").addFilter(_drop_orbax_save_errors)

    def save(self, state, config: config_lib.Config) -> int:
        step = int(jax.device_get(state.iteration))
        self.attempted.append(step)
        with self._failing():
            save(self.manager, state, config)
        return step

    def wait(self) -> None:
        with self._failing():
            self.manager.wait_until_finished()

    @contextlib.contextmanager
    def _failing(self):
        try:
            yield
        except SaveError:
            raise
        except Exception as e:  # whatever orbax, TensorStore or the file system raised while writing
            raise self._error(e) from None

    def _error(self, e: BaseException) -> SaveError:
        # the checkpoints on disk now, as a reader sees them (this manager's own list may hold the failed step)
        steps = list(make_manager(os.path.dirname(str(self.manager.directory)), read_only=True).all_steps())
        failed = [s for s in self.attempted if s not in steps]
        step = min(failed) if failed else self.attempted[-1] if self.attempted else None
        if steps:
            names = ", ".join(str(s) for s in steps)
            kept = f"checkpoint {names} is whole" if len(steps) == 1 else f"checkpoints {names} are whole"
            todo = "make room and run the same command to resume"
        else:
            kept, todo = "no checkpoint was written yet", "make room and run the same command to start again"
        return SaveError(f"could not save checkpoint {step} ({_one_line(e)}); {kept}: {todo}")


def _drop_orbax_save_errors(record: logging.LogRecord) -> bool:
    """absl's log filter: False (dropped) for orbax's error records of a failed background write."""
    text = record.getMessage()
    return not (record.levelno >= logging.ERROR and ("save" in text.lower() or "Signaling" in text or "commit" in text))


def _one_line(e: BaseException, limit: int = 240) -> str:
    """`Type: first line of the message` of the innermost exception in `e`'s chain that has a message (orbax wraps
    TensorStore's precise error in a vaguer one), cut to `limit` characters."""
    chain = [e]
    while (inner := chain[-1].__cause__ or chain[-1].__context__) is not None and len(chain) < 10:
        chain.append(inner)
    for x in reversed(chain):
        message = x.args[0] if isinstance(x, KeyError) and x.args else x  # KeyError's str() is the repr of its key
        lines = str(message).strip().splitlines()
        if lines:
            text = f"{type(x).__name__}: {lines[0]}"
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return type(e).__name__


def _damaged(manager: ocp.CheckpointManager, step: int, what: str) -> DamagedCheckpointError:
    return DamagedCheckpointError(f"checkpoint {step} in {manager.directory} is damaged: {what}")


def _is_read_echo(unraisable) -> bool:
    """True for what a failed orbax restore leaves behind: a read coroutine of orbax whose error nobody retrieved, or
    a TensorStore read that completes after orbax's event loop closed ("Event loop is closed")."""
    files = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(unraisable.exc_traceback)]
    in_orbax = any(f"{os.sep}orbax{os.sep}checkpoint{os.sep}" in f for f in files)
    closed_loop = isinstance(unraisable.exc_value, RuntimeError) and str(unraisable.exc_value) == "Event loop is closed"
    return in_orbax or closed_loop


class _DropReadEchoes:
    """A sys.unraisablehook that drops the read echoes of failed restores and passes anything else on."""

    def __init__(self, previous):
        self.previous = previous

    def __call__(self, unraisable) -> None:
        if not _is_read_echo(unraisable):
            self.previous(unraisable)


def _restore_item(manager: ocp.CheckpointManager, step: int, name: str, args):
    """One item of checkpoint `step`; any failure inside orbax or TensorStore is a DamagedCheckpointError.

    After a failure the reads orbax started and abandoned end later, when they complete or are garbage-collected, and
    Python would print each one's traceback ("Exception ignored in …"); the error is already reported as one line,
    so from then on the process drops those echoes (`_DropReadEchoes`, and asyncio's log of the abandoned futures:
    `_drop_read_futures`)."""
    try:
        return manager.restore(step, args=ocp.args.Composite(**{name: args}))[name]
    except Exception as e:  # orbax raises many types (ValueError, FileNotFoundError, TensorStore's) for bad files
        if not isinstance(sys.unraisablehook, _DropReadEchoes):
            sys.unraisablehook = _DropReadEchoes(sys.unraisablehook)
        asyncio_log = logging.getLogger("asyncio")
        if _drop_read_futures not in asyncio_log.filters:
            asyncio_log.addFilter(_drop_read_futures)
        raise _damaged(manager, step, f"its {name} item cannot be read ({_one_line(e)})") from None


def _drop_read_futures(record: logging.LogRecord) -> bool:
    """The asyncio logger's filter: False (dropped) for the other echo of a failed restore, asyncio's "Future exception
    was never retrieved" of an abandoned TensorStore read, logged whenever the future is garbage-collected."""
    text = record.getMessage()
    return not (text.startswith("Future exception was never retrieved") and "tensorstore_spec" in text)


def nonfinite_leaves(tree) -> list[str]:
    """Key paths of the floating-point leaves of `tree` that hold a NaN or an infinity (host arrays, or device
    arrays each process holds whole, e.g. replicated ones)."""
    bad = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        value = np.asarray(leaf)
        if np.issubdtype(value.dtype, np.inexact) and not np.isfinite(value).all():
            bad.append(jax.tree_util.keystr(path))
    return bad


def _check_finite(manager: ocp.CheckpointManager, step: int, what: str, tree) -> None:
    bad = nonfinite_leaves(tree)
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise _damaged(manager, step, f"{what} hold NaN or infinite values ({shown})")


def _check_iteration(manager: ocp.CheckpointManager, step: int, iteration) -> None:
    saved = int(np.asarray(iteration))
    if saved != step:
        raise _damaged(manager, step, f"its train item is of iteration {saved}")


def read_config(manager: ocp.CheckpointManager, step: int) -> config_lib.Config:
    """The Config saved with checkpoint `step`; DamagedCheckpointError if its config item does not read or parse."""
    raw = _restore_item(manager, step, "config", ocp.args.JsonRestore())
    if not isinstance(raw, dict):
        raise _damaged(manager, step, f"its config item is a JSON {type(raw).__name__}, not an object")
    try:
        return overrides_lib.override(config_lib.Config(), raw)
    except (config_lib.ConfigError, TypeError, ValueError) as e:
        raise _damaged(manager, step, f"its config item is not a valid config ({_one_line(e)})") from None


def check_compatible(saved: config_lib.Config, wanted: config_lib.Config, where: str) -> None:
    """Raises CheckpointError if `saved` differs from `wanted` in a key that a resumed run cannot change."""
    diff = [
        f.name
        for f in dataclasses.fields(saved)
        if f.name not in config_lib.RESUMABLE_KEYS and getattr(saved, f.name) != getattr(wanted, f.name)
    ]
    kept = config_lib.keeps_search_value(saved)
    if not diff and kept != config_lib.keeps_search_value(wanted):
        raise CheckpointError(
            f"{where} was saved with a replay buffer that {'keeps' if kept else 'has no'} search values; "
            "value_target_mix_after_rate_step cannot change that (use another --run-dir)"
        )
    if diff:
        shown = ", ".join(f"{k}: saved {getattr(saved, k)!r} vs requested {getattr(wanted, k)!r}" for k in diff[:4])
        raise CheckpointError(f"{where} belongs to a different run ({shown}); use another --run-dir")


def restore(manager: ocp.CheckpointManager, step: int, abstract_state, config: config_lib.Config):
    """Restores the TrainState saved at `step` into the shapes/shardings of `abstract_state`, verified.

    CheckpointError if the checkpoint belongs to another run (check_compatible); DamagedCheckpointError if an item
    does not read back, the config item does not parse, the train item is not of iteration `step`, or the weights
    (params, batch-norm averages, optimizer state, best player) are not finite."""
    check_compatible(read_config(manager, step), config, f"checkpoint {step}")
    model, train = _split(abstract_state)
    m = _restore_item(manager, step, "model", ocp.args.StandardRestore(model))
    t = _restore_item(manager, step, "train", ocp.args.StandardRestore(train))
    _check_iteration(manager, step, t["iteration"])
    _check_finite(manager, step, "its weights", m)
    # the replicated parts of the train item (the games and the replay buffer are split over the devices)
    _check_finite(
        manager, step, "its optimizer state or best player", {k: t[k] for k in ("opt_state", "best") if k in t}
    )
    if isinstance(abstract_state.replay, ReplayBuffer):
        static = {k: getattr(abstract_state.replay, k) for k in _STATIC_REPLAY_FIELDS}
        t["replay"] = ReplayBuffer(**t["replay"], **static)
    if isinstance(abstract_state.games, SelfPlayState):
        t["games"] = SelfPlayState(**t["games"])
    return abstract_state.replace(params=m["params"], batch_stats=m["batch_stats"], **t)


def restore_model(
    manager: ocp.CheckpointManager, step: int, abstract_variables: dict, best: bool = False
) -> tuple[dict, int]:
    """({'params', 'batch_stats'}, the iteration they come from) of checkpoint `step`, verified (for agents).

    The latest weights (the model item), or with `best` the best player of a gated run (the train item's `best`).
    Both are read and checked either way, but of the train item only its iteration and best player, not its replay
    buffer. DamagedCheckpointError as in `restore`."""
    iteration: Any = jax.ShapeDtypeStruct((), np.int32, sharding=jax.tree.leaves(abstract_variables)[0].sharding)
    wanted: dict = {"iteration": iteration}
    if best:
        wanted["best"] = BestPlayer(**abstract_variables, iteration=iteration)
    restore_args = ocp.checkpoint_utils.construct_restore_args(wanted)  # onto the shardings of `wanted`
    t = _restore_item(
        manager, step, "train", ocp.args.PyTreeRestore(wanted, restore_args=restore_args, partial_restore=True)
    )
    _check_iteration(manager, step, t["iteration"])
    latest = _restore_item(manager, step, "model", ocp.args.StandardRestore(abstract_variables))
    _check_finite(manager, step, "its weights", latest)
    if not best:
        return latest, step
    _check_finite(manager, step, "its best player's weights", t["best"])
    return t["best"].variables, int(np.asarray(t["best"].iteration))


def move_aside(manager: ocp.CheckpointManager, step: int) -> str:
    """Moves the directory of checkpoint `step` to RUN_DIR/checkpoints_damaged/<step> (<step>-1, -2, … if taken),
    then re-reads the manager's list of steps so it no longer has `step`; returns the new path. Nothing is deleted."""
    source = os.path.join(str(manager.directory), str(step))
    target_dir = damaged_dir(os.path.dirname(str(manager.directory)))
    os.makedirs(target_dir, exist_ok=True)
    target, n = os.path.join(target_dir, str(step)), 0
    while os.path.exists(target):
        n += 1
        target = os.path.join(target_dir, f"{step}-{n}")
    os.rename(source, target)
    manager.reload()
    return target
