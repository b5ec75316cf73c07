"""Agent files (`az-jax export`, az_jax/runtime/agent_file.py): a run's config and one set of weights in one file,
loaded wherever a run directory is, and checked on the way in."""

import os

import jax
import numpy as np
import pytest
from flax import serialization

from az_jax.apps.cli import main
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.evaluation.in_training import train_and_evaluate
from az_jax.runtime import agent_file
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.agent import load_agent

from conftest import TINY_NETWORK, fast_compiles_here

# a tiny tic-tac-toe run: 2 iterations, a checkpoint at each
CONFIG = override(
    preset("tic_tac_toe", "small"),
    [
        *TINY_NETWORK,
        "selfplay_steps=4",
        "replay_capacity=256",
        "min_replay_size=16",
        "eval_every=0",
        "checkpoint_every=1",
        "train_ratio=1",
        "num_iterations=2",
    ],
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> str:
    with fast_compiles_here():
        path = str(tmp_path_factory.mktemp("agent_file") / "run")
        train_and_evaluate(CONFIG, path, progress=False)
    return path


@pytest.fixture(scope="module")
def exported(run_dir, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("exported") / "ttt.azagent")
    assert main(["export", run_dir, out, "--step", "1"]) == 0
    return out


def _leaves_equal(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def test_export_holds_the_runs_weights_and_little_else(run_dir, exported, capsys):
    from_run = load_agent(run_dir, step=1)
    from_file = load_agent(exported)
    assert from_file.config == CONFIG
    assert (from_file.step, from_file.weights_iteration) == (1, 1)
    assert _leaves_equal(from_file.variables, from_run.variables)
    assert not _leaves_equal(from_file.variables, load_agent(run_dir, step=2).variables)  # step 1's, not the latest
    # The file is the weights' bytes plus the config (≈ 2 KB of JSON) and msgpack's keys: no optimizer state (the
    # momentum would double it) and no replay buffer (256 positions × 27 floats of observation alone ≈ 27.6 KB).
    weight_bytes = sum(x.nbytes for x in jax.tree.leaves(from_run.variables))
    assert weight_bytes < os.path.getsize(exported) < weight_bytes + 8_000
    # it plays the same moves as the run it came from, with the same key
    states = jax.vmap(from_run.env.init)(jax.random.split(jax.random.key(1), 4))
    key = jax.random.key(2)
    assert np.array_equal(from_file.act(states, key, 8), from_run.act(states, key, 8))


def test_export_never_replaces_a_file(run_dir, tmp_path, capsys):
    out = tmp_path / "taken.azagent"
    out.write_bytes(b"someone's file")
    assert main(["export", run_dir, str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "exists" in err
    assert out.read_bytes() == b"someone's file"
    assert main(["export", run_dir, str(tmp_path / "wrong_suffix.bin")]) == 2
    assert not (tmp_path / "wrong_suffix.bin").exists()


def _rewrite(source: str, target: str, change) -> str:
    raw = serialization.msgpack_restore(open(source, "rb").read())
    change(raw)
    with open(target, "wb") as f:
        f.write(serialization.msgpack_serialize(raw))
    return target


def test_a_damaged_or_foreign_file_is_one_error(exported, tmp_path):
    data = open(exported, "rb").read()
    cases = {}
    cases["truncated"] = tmp_path / "truncated.azagent"
    cases["truncated"].write_bytes(data[: len(data) // 2])
    cases["not msgpack"] = tmp_path / "text.azagent"
    cases["not msgpack"].write_bytes(b"\x00\x01 not an agent")

    def wider(raw):  # a weight of another shape than the config's network
        stem = raw["variables"]["params"]
        first = sorted(stem)[0]
        leaf = next(iter(stem[first].values())) if isinstance(stem[first], dict) else stem[first]
        kernel_name = next(k for k, v in stem[first].items() if v is leaf)
        stem[first][kernel_name] = np.zeros((*leaf.shape[:-1], leaf.shape[-1] + 1), leaf.dtype)

    def nan(raw):
        def poison(tree):
            for k, v in tree.items():
                if isinstance(v, dict):
                    return poison(v)
                tree[k] = np.full_like(v, np.nan)
                return k

        poison(raw["variables"]["params"])

    def other_format(raw):
        raw["format"] = "someone else's 7"

    messages = {}
    for name, change in {"wider": wider, "nan": nan, "other format": other_format}.items():
        cases[name] = _rewrite(exported, str(tmp_path / f"{name.replace(' ', '_')}.azagent"), change)
    for name, path in cases.items():
        with pytest.raises(ckpt.CheckpointError) as e:
            load_agent(str(path))
        messages[name] = str(e.value)
        assert "\n" not in messages[name]
    assert "not an az_jax agent file" in messages["truncated"] and "not an az_jax agent file" in messages["not msgpack"]
    assert "someone else's 7" in messages["other format"]
    assert "not finite" in messages["nan"]
    assert "its config's network has" in messages["wider"]
    with pytest.raises(ckpt.CheckpointError, match="one set of weights"):
        load_agent(exported, step=1)


def test_shipped_agents_load_by_name(exported, monkeypatch, tmp_path):
    monkeypatch.setattr(agent_file, "shipped", lambda: {"ttt_demo": exported})
    agent = load_agent("ttt_demo")
    assert agent.config.game == "tic_tac_toe" and agent.step == 1
    with pytest.raises(ckpt.CheckpointError, match=r"shipped agents: ttt_demo"):
        load_agent(str(tmp_path / "no_such_name"))
