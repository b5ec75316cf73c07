"""Damaged checkpoints and gated runs' agents.

A run whose newest checkpoint is damaged resumes from the newest one that restores whole; the damaged one is moved
aside to RUN_DIR/checkpoints_damaged/ with its files as they were, and one warning line says so. Agents read around a
damaged checkpoint without moving anything. An agent of a gated run plays its best player unless asked for the latest
weights. A run dir whose config.json cannot be read is one error.
"""

import ast
import dataclasses
import hashlib
import json
import os
import shutil

import chex
import jax
import numpy as np
import pytest

from az_jax.core.devices import make_mesh
from az_jax.core.gating import BestPlayer
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.evaluation.in_training import train_and_evaluate
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.agent import load_agent
from az_jax.runtime.loop import prepare_run_dir, restore_or_init
from az_jax.runtime.trainer import Trainer

from conftest import TINY_NETWORK, fast_compiles_here

# tests/test_resume.py's tiny run: 4 iterations, checkpoints at 2 and 4
CONFIG = override(
    preset("tic_tac_toe", "small"),
    [
        *TINY_NETWORK,
        "selfplay_steps=4",
        "replay_capacity=256",
        "min_replay_size=16",
        "eval_every=0",
        "checkpoint_every=2",
        "keep_checkpoints=5",
        "train_ratio=1",
        "num_iterations=4",
    ],
)
WARNING = "az-jax: warning: "


@dataclasses.dataclass(frozen=True)
class Trained:
    run_dir: str
    final: object  # the TrainState after iteration 4 (host copy)
    at_2: object  # the TrainState restored from checkpoint 2 (host copy)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    """The tiny run, trained once for this module with XLA's optimisation passes off (as the `fast_compiles` fixture
    does for one test; the resumed run below compiles the same way and loads the programs from the cache)."""
    with fast_compiles_here():
        run_dir = str(tmp_path_factory.mktemp("checkpoints") / "run")
        final = train_and_evaluate(CONFIG, run_dir, progress=False)
    manager = ckpt.make_manager(run_dir, read_only=True)
    assert sorted(manager.all_steps()) == [2, 4]
    at_2 = ckpt.restore(manager, 2, _trainer().abstract_state(), CONFIG)
    return Trained(run_dir, jax.device_get(final), jax.device_get(at_2))


def _trainer(config=CONFIG) -> Trainer:
    return Trainer(config, make_mesh(None))


def _tree_digest(path: str) -> dict[str, str]:
    """{relative path: sha256 of its bytes} of every file under `path`."""
    digest = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as f:
                digest[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
    return digest


def _junk(path: str) -> None:
    """Overwrites the file `path` with as many bytes of junk (never valid JSON, never a valid array chunk)."""
    size = max(os.path.getsize(path), 16)
    with open(path, "wb") as f:
        f.write(bytes(np.random.default_rng(0).integers(128, 256, size, dtype=np.uint8)))


def truncated_array_data(step_dir: str) -> None:
    """Every data file of the model's OCDBT store cut to half its length.

    Not only the largest: OCDBT may leave b-tree nodes of superseded versions in d/ that the final manifest no longer
    references, and which file is largest varies from run to run (CI once truncated an unreferenced one).
    """
    for root, _, names in os.walk(os.path.join(step_dir, "model")):
        if os.path.basename(root) == "d":
            for name in names:
                path = os.path.join(root, name)
                with open(path, "r+b") as f:
                    f.truncate(os.path.getsize(path) // 2)


def junk_metadata(step_dir: str) -> None:
    _junk(os.path.join(step_dir, "model", "_METADATA"))


def junk_train_item(step_dir: str) -> None:
    """Every file of the train item (its tree metadata, manifests and array data) overwritten with junk."""
    for root, _, names in os.walk(os.path.join(step_dir, "train")):
        for name in names:
            _junk(os.path.join(root, name))


def junk_config_item(step_dir: str) -> None:
    _junk(os.path.join(step_dir, "config", "metadata"))


def missing_item_directory(step_dir: str) -> None:
    shutil.rmtree(os.path.join(step_dir, "model"))


DAMAGES = [truncated_array_data, junk_metadata, junk_train_item, junk_config_item, missing_item_directory]


def _copy(trained: Trained, tmp_path, damage=None, steps=(4,)) -> str:
    run_dir = str(tmp_path / "run")
    shutil.copytree(trained.run_dir, run_dir)
    for step in steps if damage else ():
        damage(os.path.join(ckpt.checkpoint_dir(run_dir), str(step)))
    return run_dir


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(WARNING)]


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_newest_checkpoint_is_read_around_then_moved_aside(trained, tmp_path, capsys, damage):
    run_dir = _copy(trained, tmp_path, damage)
    checkpoints = ckpt.checkpoint_dir(run_dir)
    before = _tree_digest(run_dir)
    damaged_files = _tree_digest(os.path.join(checkpoints, "4"))

    # Agents (play, eval, the ladder) read checkpoint 2 instead, say so in one line, and move nothing.
    agent = load_agent(run_dir)
    assert agent.step == 2 and agent.weights_iteration == 2
    chex.assert_trees_all_equal(
        jax.device_get(agent.variables), {"params": trained.at_2.params, "batch_stats": trained.at_2.batch_stats}
    )
    (line,) = _warnings(capsys.readouterr().err)
    assert line.startswith(f"{WARNING}checkpoint 4 in {checkpoints} is damaged: ") and line.endswith(
        "; using checkpoint 2"
    )
    with pytest.raises(ckpt.DamagedCheckpointError, match=r"^checkpoint 4 in .* is damaged: "):
        load_agent(run_dir, step=4)  # a step asked for by number is that step or an error
    assert _tree_digest(run_dir) == before

    # A resumed run restores checkpoint 2, bit for bit, and moves checkpoint 4 aside with its files as they were.
    manager = ckpt.make_manager(run_dir, keep=CONFIG.keep_checkpoints)
    state = restore_or_init(_trainer(), manager)
    chex.assert_trees_all_equal(jax.device_get(state), trained.at_2)
    moved = os.path.join(ckpt.damaged_dir(run_dir), "4")
    (line,) = _warnings(capsys.readouterr().err)
    assert line.startswith(f"{WARNING}checkpoint 4 in {checkpoints} is damaged: ") and line.endswith(
        f"; moved it to {moved}; resuming from checkpoint 2"
    )
    assert "\n" not in line and "Traceback" not in line
    assert not os.path.exists(os.path.join(checkpoints, "4")) and _tree_digest(moved) == damaged_files
    assert manager.all_steps() == [2]
    assert ckpt.make_manager(run_dir, read_only=True).all_steps() == [2]


def test_resumed_run_retrains_past_a_damaged_checkpoint_bitwise(trained, tmp_path, capsys, fast_compiles):
    run_dir = _copy(trained, tmp_path, truncated_array_data)
    first = _tree_digest(os.path.join(ckpt.checkpoint_dir(run_dir), "4"))
    os.makedirs(os.path.join(ckpt.damaged_dir(run_dir), "4"))  # taken by an earlier move: this one goes to 4-1
    final = train_and_evaluate(CONFIG, run_dir, progress=False)
    chex.assert_trees_all_equal(jax.device_get(final), trained.final)
    assert len(_warnings(capsys.readouterr().err)) == 1
    assert sorted(ckpt.make_manager(run_dir, read_only=True).all_steps()) == [2, 4]
    assert _tree_digest(os.path.join(ckpt.damaged_dir(run_dir), "4-1")) == first


def test_no_checkpoint_that_restores_moves_nothing(trained, tmp_path, capsys):
    run_dir = _copy(trained, tmp_path, junk_config_item, steps=(2, 4))
    before = _tree_digest(run_dir)
    with pytest.raises(
        ckpt.CheckpointError, match=r"^no checkpoint of .* restores \(2 tried\); the newest: checkpoint 4"
    ):
        restore_or_init(_trainer(), ckpt.make_manager(run_dir, keep=CONFIG.keep_checkpoints))
    with pytest.raises(ckpt.CheckpointError, match=r"^none of the 2 checkpoints of .* reads whole"):
        load_agent(run_dir)
    assert _tree_digest(run_dir) == before and not os.path.exists(ckpt.damaged_dir(run_dir))
    assert _warnings(capsys.readouterr().err) == []


def test_non_finite_weights_are_damage(trained, tmp_path, capsys):
    run_dir = _copy(trained, tmp_path)
    shutil.rmtree(os.path.join(ckpt.checkpoint_dir(run_dir), "4"))
    poisoned = trained.final.replace(params=jax.tree.map(lambda p: np.full_like(p, np.nan), trained.final.params))
    manager = ckpt.make_manager(run_dir, keep=CONFIG.keep_checkpoints)
    ckpt.save(manager, poisoned, CONFIG)
    manager.wait_until_finished()
    assert load_agent(run_dir).step == 2
    assert "its weights hold NaN or infinite values" in _warnings(capsys.readouterr().err)[0]
    state = restore_or_init(_trainer(), ckpt.make_manager(run_dir, keep=CONFIG.keep_checkpoints))
    assert int(state.iteration) == 2 and os.path.isdir(os.path.join(ckpt.damaged_dir(run_dir), "4"))


def test_gated_run_agent_plays_its_best_player(trained, tmp_path):
    # A gated run's checkpoint 4 whose best player is other weights (all parameters + 1) from iteration 2.
    gated = dataclasses.replace(CONFIG, gating=True)
    best = BestPlayer(
        params=jax.tree.map(lambda p: p + 1, trained.final.params),
        batch_stats=trained.final.batch_stats,
        iteration=np.int32(2),
    )
    run_dir = str(tmp_path / "gated")
    manager = ckpt.make_manager(run_dir)
    ckpt.save(manager, trained.final.replace(best=best), gated)
    manager.wait_until_finished()

    agent = load_agent(run_dir)
    assert agent.config.gating and agent.step == 4 and agent.weights_iteration == 2
    chex.assert_trees_all_equal(jax.device_get(agent.variables), best.variables)
    latest = load_agent(run_dir, weights="latest")
    assert latest.step == 4 and latest.weights_iteration == 4
    chex.assert_trees_all_equal(
        jax.device_get(latest.variables),
        {"params": trained.final.params, "batch_stats": trained.final.batch_stats},
    )
    # Without gating, the best player is the latest weights.
    plain = load_agent(trained.run_dir, weights="best")
    assert plain.weights_iteration == 4
    chex.assert_trees_all_equal(jax.device_get(plain.variables)["params"], trained.final.params)
    with pytest.raises(ValueError, match="weights must be one of best, latest"):
        load_agent(run_dir, weights="newest")


@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8", None], ids=["not_utf8", "a_directory"])
def test_unreadable_config_json_is_one_error(tmp_path, content):
    path = tmp_path / "config.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(ckpt.CheckpointError, match=r"config\.json cannot be read as an az_jax config \(\w+Error\)$"):
        prepare_run_dir(CONFIG, str(tmp_path))


def test_the_replay_buffer_is_saved_with_the_fields_it_always_had(trained):
    """Fields added to the replay buffer and the self-play state later (the auxiliary targets, game forking's
    candidates) are saved only when their switch is on: a run without them writes exactly the train item of earlier
    versions, so their checkpoints keep restoring (a train item whose tree has other keys does not restore)."""
    with open(os.path.join(ckpt.checkpoint_dir(trained.run_dir), "4", "train", "_METADATA")) as f:
        paths = [ast.literal_eval(k) for k in json.load(f)["tree_metadata"]]
    replay = {path[1] for path in paths if path[0] == "replay"}
    assert replay == {
        "observation", "policy", "legal", "player", "slot", "episode", "outcome", "pending", "done", "search_value"
    }  # fmt: skip
    assert {path[1] for path in paths if path[0] == "games"} == {"env", "ply", "episode", "resign"}


def test_the_value_flags_of_a_masked_run_are_saved_and_restore(tmp_path):
    # Config.mask_random_opening_values: the buffer's value_known is a later field, saved only when the switch is on
    config = override(CONFIG, ["random_opening_plies=2", "mask_random_opening_values=true"])
    trainer = Trainer(config, make_mesh(jax.devices()[:1]))
    state = trainer.init_state()
    state = state.replace(replay=state.replay.replace(value_known=state.replay.value_known.at[1].set(True)))
    manager = ckpt.make_manager(str(tmp_path), keep=1)
    ckpt.save(manager, state, config)
    manager.wait_until_finished()
    restored = ckpt.restore(manager, 0, trainer.abstract_state(), config)
    assert int(restored.replay.value_known.sum()) == 1 and bool(restored.replay.value_known[1])
    chex.assert_trees_all_equal(jax.device_get(restored), jax.device_get(state))


def test_the_fork_candidates_of_a_forking_run_are_saved_and_restore(tmp_path):
    # Config.fork_fraction: the self-play state's candidates are later fields, saved only when forking is on
    config = override(CONFIG, ["fork_fraction=0.5"])
    trainer = Trainer(config, make_mesh(jax.devices()[:1]))
    state = trainer.init_state()
    games = state.games.replace(fork_ply=state.games.fork_ply.at[1].set(3), fork_offers=state.games.fork_offers + 2)
    state = state.replace(games=games)
    manager = ckpt.make_manager(str(tmp_path), keep=1)
    ckpt.save(manager, state, config)
    manager.wait_until_finished()
    restored = ckpt.restore(manager, 0, trainer.abstract_state(), config)
    assert int(restored.games.fork_ply.sum()) == 3 and int(restored.games.fork_offers[0]) == 2
    chex.assert_trees_all_equal(jax.device_get(restored), jax.device_get(state))


def test_compact_replay_rows_restore_with_their_action_count(tmp_path):
    # chess with compact rows (Config.compact_replay): the row's 218 policy entries, their actions and the packed mask
    # are saved; the action count (4,672, a static field) comes back from the config's state, not from the files
    config = override(
        preset("chess", "small"),
        [*TINY_NETWORK, "selfplay_batch_size=2", "replay_capacity=8", "batch_size=2", "compact_replay=true"],
    )
    trainer = Trainer(config, make_mesh(jax.devices()[:1]))
    state = trainer.init_state()
    assert state.replay.policy.shape == (8, 218) and state.replay.policy_index.shape == (8, 218)
    manager = ckpt.make_manager(str(tmp_path), keep=1)
    ckpt.save(manager, state, config)
    manager.wait_until_finished()
    restored = ckpt.restore(manager, 0, trainer.abstract_state(), config)
    assert restored.replay.num_actions == 4672 and restored.replay.legal.shape == (8, 584)
    chex.assert_trees_all_equal(jax.device_get(restored), jax.device_get(state))
