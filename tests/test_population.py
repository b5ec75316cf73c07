"""A population trained in one vmapped program: member i ends where training it alone ends (same seed, same learning
rates; bitwise when the network runs once per member, to float rounding when it is vmapped too), members with
different seeds differ, and the per-member run dirs it writes load as agents."""

import json

import jax
import numpy as np
import pytest

from az_jax.apps.population import Member, PopulationTrainer, member_config, train_population
from az_jax.core.config import ConfigError
from az_jax.core.devices import make_mesh
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.runtime import agent as agent_lib
from az_jax.runtime.trainer import Trainer

from conftest import TINY_NETWORK, fast_compiles_here

# tic_tac_toe, 8 games × 9 plies per iteration (every game ends inside the first iteration, so learning starts at
# once): G = round(0.5 × 8 × 9 / 16) = round(2.25) = 2 gradient steps per iteration, 2 iterations = 4 steps. The
# schedule's boundary at step 3 falls inside the second iteration, so the per-member schedule values are exercised
# on both sides of it.
TINY = [
    *TINY_NETWORK,
    "selfplay_steps=9",
    "replay_capacity=256",
    "min_replay_size=16",
    "eval_every=0",
    "train_ratio=0.5",
    "num_iterations=2",
    "learning_rates=0.1,0.01",
    "lr_boundaries=3",
]
ATOL = 1e-5  # network vmapped: measured ≤ 4e-7 from the solo run (batched convolutions round differently)


@pytest.fixture(scope="module", autouse=True)
def fast_compiles():
    """These tiny programs run for milliseconds and compile for tens of seconds: XLA's optimisation passes are
    switched off for this module (population and solo runs alike), and back on after it."""
    with fast_compiles_here():
        yield


def _config():
    return override(preset("tic_tac_toe", "small"), TINY)


def _solo(config, devices):
    trainer = Trainer(config, make_mesh(devices))
    state = trainer.init_state()
    for _ in range(config.num_iterations):
        state, metrics = trainer.iterate(state)
    return jax.device_get(state), jax.device_get(metrics)


def _max_diff(a, b) -> float:
    pairs = list(zip(jax.tree.leaves(a), jax.tree.leaves(b)))
    assert len(pairs) == len(jax.tree.leaves(a)) == len(jax.tree.leaves(b))
    return max(
        float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)), initial=0.0)) for x, y in pairs
    )


def test_members_split_over_devices_equal_their_solo_runs(tmp_path):
    config = _config()
    members = [Member(seed=0), Member(seed=1), Member(seed=0, learning_rates=(0.05, 0.02)), Member(seed=2)]
    run_dir = tmp_path / "pop"
    # 4 members on 2 devices: mesh ("m", "d") = (2, 1), two members vmapped on each device; on CPU the network runs
    # once per member ("loop"), everything else is vmapped.
    trainer, state = train_population(config, members, run_dir=str(run_dir))
    assert dict(trainer.mesh.shape) == {"m": 2, "d": 1} and trainer.network_batching == "loop"
    assert int(state.iteration[0]) == 2

    # Member 2 (on the second device) is exactly the run `az-jax train --set seed=0 --set learning_rates=0.05,0.02`
    # on one device, bit for bit: the seed and the schedule values reached the program as data.
    solo_state, solo_metrics = _solo(member_config(config, members[2]), jax.devices()[:1])
    assert _max_diff(trainer.member_state(state, 2), solo_state) == 0.0
    assert int(solo_metrics["train/steps"]) == 2
    # lr after 4 steps: past the boundary at 3, 0.05 × (0.02 / 0.05) = 0.02 — not the config's 0.01.
    records = [json.loads(line) for line in open(run_dir / "members.jsonl")]
    assert len(records) == 2 * 4
    last = {r["member"]: r for r in records if r["iteration"] == 2}
    assert last[2]["train/learning_rate"] == pytest.approx(0.02)
    assert last[0]["train/learning_rate"] == pytest.approx(0.01)
    assert last[2]["train/loss"] == pytest.approx(float(solo_metrics["train/loss"]), abs=1e-5)

    params = [trainer.member_state(state, i).params for i in range(4)]
    # Different seeds: different networks (the weights move by O(0.1) after 4 steps at lr 0.1, init ~N(0, 1/fan_in)).
    for i, j in [(0, 1), (0, 3), (1, 3)]:
        assert _max_diff(params[i], params[j]) > 1e-2
    # Same seed 0, different learning rates: same games at the start, different networks after learning.
    assert _max_diff(params[0], params[2]) > 1e-3

    # Each member is also an ordinary run dir: its agent holds the member's final network.
    agent = agent_lib.load_agent(str(run_dir / "member_3"))
    assert agent.step == 2 and agent.config.seed == 2
    assert _max_diff(agent.variables["params"], params[3]) == 0.0


def test_members_sharing_devices_equal_their_solo_runs():
    # member_shards=1: mesh (1, 2), each member's 8 games split over both devices (collectives inside the vmap), and
    # the network vmapped over the members as well (grouped convolutions: equal up to float rounding).
    config = _config()
    members = [Member(seed=3), Member(seed=0, learning_rates=(0.2, 0.05))]
    trainer = PopulationTrainer.create(config, members, member_shards=1, network_batching="vmap")
    assert dict(trainer.mesh.shape) == {"m": 1, "d": 2}
    state = trainer.init_state()
    for _ in range(config.num_iterations):
        state, _ = trainer.iterate(state)
    solo_state, _ = _solo(member_config(config, members[1]), jax.devices())
    assert _max_diff(trainer.member_state(state, 1), solo_state) < ATOL
    assert _max_diff(trainer.member_state(state, 0).params, solo_state.params) > 1e-2


def test_bad_members_are_config_errors():
    config = _config()
    with pytest.raises(ConfigError, match="population member 1 .*learning_rates needs one value more"):
        PopulationTrainer.create(config, [Member(0), Member(1, learning_rates=(0.1,))])
    with pytest.raises(ConfigError, match="member_shards=2 must divide both the 3 members and the 2 devices"):
        PopulationTrainer.create(config, [Member(0), Member(1), Member(2)], member_shards=2)
