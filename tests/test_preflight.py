"""`az-jax preflight` (az_jax/runtime/preflight.py, az_jax/runtime/targets.py): the run's programs compile on this CPU
machine for a TPU slice (libtpu) and an NVIDIA GPU (the CUDA plugin and our own target config), what runs there is what
was meant (JAX's convolution, bf16 where asked, the donated state aliased, no host round trips), the per-device plan
adds up by hand, and a config that does not fit is one line with exit status 2."""

import dataclasses
import re
import subprocess
import sys

import jax
import pytest
from jax import lax

from az_jax.alphago import preflight as alphago_preflight
from az_jax.alphago.presets import PRESETS
from az_jax.core.config import ConfigError
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.evaluation import in_training
from az_jax.frontends import tree_search
from az_jax.runtime import preflight, targets
from az_jax.runtime.trainer import Trainer

TINY = ["num_blocks=1", "num_channels=8", "value_hidden=8", "num_simulations=4", "selfplay_batch_size=8"]
TINY += ["batch_size=16", "selfplay_steps=3", "replay_capacity=64", "min_replay_size=8", "eval_games=8"]


def _config(*extra: str):
    return override(preset("tic_tac_toe", "small"), TINY + list(extra))


@pytest.fixture(scope="module")
def tpu_iteration():
    """The tiny run's iteration compiled for a 4-chip v5e slice, in bf16: (trainer, compiled)."""
    trainer = Trainer(_config("compute_dtype=bfloat16"), preflight.target_mesh(targets.get_target("v5litepod-4")))
    return trainer, trainer.iterate.lower(trainer.abstract_state()).compile()


def test_tpu_executable_runs_what_was_meant(tpu_iteration):
    trainer, compiled = tpu_iteration
    assert [d.platform for d in trainer.mesh.devices.flat] == ["tpu"] * 4
    # the network takes JAX's convolution on a TPU, not az_jax/core/conv.py's XLA:CPU gradient
    assert trainer.setup.network.conv is lax.conv_general_dilated
    text = compiled.as_text()
    convolutions = [line for line in text.splitlines() if re.search(r"= \S+ convolution\(", line)]
    assert convolutions, "no convolution in the TPU program"
    assert all(line.split("=")[1].strip().startswith("bf16[") for line in convolutions)  # computed in bf16
    for host_round_trip in ("callback", "outfeed", "infeed", " send(", " recv("):
        assert host_round_trip not in text
    # the donated state: every byte of the old state is reused by the new one
    memory = compiled.memory_analysis()
    assert memory.alias_size_in_bytes == memory.argument_size_in_bytes > 0


def test_plan_adds_up_by_hand_for_the_replay_buffer():
    # go_19x19's paper preset on v5litepod-8 (8 chips): 1,000,000 rows / 8 = 125,000 rows per chip. A row: observation
    # 19·19·17 bool = 6,137 B, policy 362 float32 = 1,448 B, legal 362 bool = 362 B, player, slot, episode int32 and
    # outcome float32 = 16 B, pending and done bool = 2 B: 7,965 B. 125,000 · 7,965 = 995,625,000 B.
    trainer = Trainer(preset("go_19x19", "paper"), preflight.target_mesh(targets.get_target("v5litepod-8")))
    parts = preflight.state_bytes(trainer)
    assert parts["replay_buffer"] == 995_625_000
    assert parts["total"] == sum(v for k, v in parts.items() if k != "total")
    # chess: the observation 8·8·119 float32 = 30,464 B, policy 4,672 float32 = 18,688 B, legal 4,672 B, 18 B more:
    # 53,842 B a row. Compact rows: 218 policy entries (872 B) and their int16 actions (436 B), the mask in
    # ⌈4,672/8⌉ = 584 B: 32,374 B. 125,000 rows a chip.
    mesh = preflight.target_mesh(targets.get_target("v5litepod-8"))
    for compact, row in ((False, 53_842), (True, 32_374)):
        config = override(preset("chess", "paper"), [f"compact_replay={str(compact).lower()}"])
        assert preflight.state_bytes(Trainer(config, mesh))["replay_buffer"] == 125_000 * row
    with pytest.raises(ConfigError, match="compact_replay needs a game whose legal moves are bounded"):
        override(preset("go_19x19", "paper"), ["compact_replay=true"]).validate(8)


def test_gpu_plan_of_a_small_run_fits_one_h100():
    programs = ("iteration", "evaluation")
    result = preflight.plan(_config(), targets.get_target("h100"), programs, evaluation=in_training.evaluation)
    assert [p["name"] for p in result["programs"]] == ["iteration", "evaluation vs random"]  # tic_tac_toe: random
    iteration = result["programs"][0]
    assert iteration["alias_bytes"] == iteration["argument_bytes"] == result["state_bytes"]["total"]
    # peak of the iteration: arguments + outputs − aliased + temporaries; the GPU margin: × 1.2 + 0.25 GiB
    expected = iteration["argument_bytes"] + iteration["output_bytes"] - iteration["alias_bytes"]
    assert iteration["peak_bytes"] == expected + iteration["temp_bytes"]
    worst = max(p["peak_bytes"] for p in result["programs"])
    assert result["required_bytes"] == int(worst * 1.2) + 2**30 // 4
    assert result["fits"] and result["budget_bytes"] == int(80 * 2**30 * 0.75)
    preflight.check_fits(result)  # no error


def test_engine_plan_holds_the_network_and_one_tree():
    # The engines' search (az-jax gtp/uci), one game on one device: its chunk takes the network's variables and the
    # kept tree, and gives the tree back in place (donated). A tree of C nodes holds per node the game's pgx state
    # (mctx's embedding) and its children's rows (index, prior logit, value, visits, reward, discount: 6 × 4 bytes an
    # action), so at least C · node_bytes; the rest of the tree is per node ([C] visits, values, parents, …: 5 × 4
    # bytes) and the root's A invalid actions.
    config = _config()
    result = preflight.plan(
        config,
        targets.get_target("h100"),
        programs=("engine",),
        engine=lambda setup, variables, sharding: tree_search.engine_programs(
            setup.apply_fn, setup.env, config.c_init, config.c_base, variables, sharding
        ),
    )
    root, chunk = result["programs"]
    assert (root["name"], chunk["name"]) == ("engine root", "engine chunk")
    env = Trainer(config, preflight.target_mesh(targets.get_target("h100"))).setup.env
    capacity, per_node = tree_search.default_capacity(env), tree_search.node_bytes(env)
    variables = result["state_bytes"]["parameters_and_optimizer"]  # params + batch stats + momentum: an upper bound
    tree = chunk["alias_bytes"]  # the donated tree, reused for the new one
    assert capacity * per_node <= tree <= capacity * (per_node + 5 * 4) + 4 * env.num_actions + 64
    assert tree < chunk["argument_bytes"] <= tree + variables + 64  # + the key and two counts
    assert tree <= chunk["output_bytes"] <= tree + 1024  # the new tree (+ the output table of its buffers)


def test_alphago_19x19_steps_compile_for_an_h100_and_donate_their_state():
    mesh = preflight.target_mesh(targets.get_target("h100"))
    sl, value = alphago_preflight.compile_stages(PRESETS["19x19"], mesh, stages=("sl step", "value step"))
    # p_σ at the paper's shape (Methods: k = 192, 13 layers, 48 planes, 19 × 19): layer 1 5·5·48·192 + 192 = 230,592
    # weights; layers 2–12, 11 × (3·3·192·192 + 192) = 3,651,648; the 1 × 1 output layer 192 (no bias) and a bias per
    # point 361: 3,882,793 float32 = 15,531,172 bytes, + SGD's step count and the stage's step (int32 each): the
    # 15,531,180 bytes of state the step takes and gives back in place.
    assert sl.alias_bytes == 15_531_180
    # v_θ: p_σ's first 12 layers with 49 planes (5·5·49·192 + 192 = 235,392; + 3,651,648), a 1 × 1 filter with bias
    # (193), 361 → 256 dense (92,672) and 256 → 1 (257): 3,980,162 weights = 15,920,648 bytes, + the two counts.
    assert value.alias_bytes == 15_920_656
    with pytest.raises(preflight.PlanError, match="unknown AlphaGo stage 'mcts'"):
        alphago_preflight.compile_stages(PRESETS["19x19"], mesh, stages=("mcts",))


def test_check_fits_names_the_largest_parts_and_their_keys():
    result = {
        "fits": False,
        "game": "go_19x19",
        "target": "v5litepod-8",
        "required_bytes": 21 * 2**30,
        "budget_bytes": 16 * 10**9,
        "state_bytes": {"parameters_and_optimizer": 2**28, "replay_buffer": 2**30, "games_in_progress": 2**29},
        "programs": [{"name": "iteration", "peak_bytes": 21 * 2**30, "temp_bytes": 19 * 2**30}],
    }
    with pytest.raises(preflight.PlanError) as e:
        preflight.check_fits(result)
    assert str(e.value) == (
        "go_19x19 does not fit v5litepod-8: its iteration needs 21.0 GiB per device, the device has 14.9 GiB; "
        "largest: temporaries 19.0 GiB (shrink: search_batch_size (games per search: the trees), remat=true, "
        "micro_batches and compute_dtype=bfloat16 (the learner)); replay buffer 1.0 GiB (shrink: replay_capacity)"
    )


def _az(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "az_jax.apps.cli", *args], capture_output=True, text=True, timeout=300)


def test_cli_unknown_target_and_a_config_that_does_not_fit_are_one_line_exit_2():
    unknown = _az("preflight", "--target", "v9-8", "--game", "tic_tac_toe")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        f"az-jax: error: unknown target 'v9-8'; known targets: {', '.join([*targets.TARGETS, *targets.ALIASES])}"
    ]
    # a training batch of 2^24 positions: the TPU compiler itself refuses the temporaries (over 30 GiB on 16 GB)
    big_batch = ["batch_size=16777216", "replay_capacity=16777216", "min_replay_size=1"]
    sets = [arg for s in TINY[:2] + big_batch for arg in ("--set", s)]
    big = _az("preflight", "--target", "v5litepod-1", "--game", "tic_tac_toe", "--programs", "iteration", *sets)
    assert big.returncode == 2
    lines = big.stderr.strip().splitlines()
    assert lines[-1].startswith("az-jax: error: tic_tac_toe does not fit v5litepod-1: its iteration needs ")
    assert "refused by the compiler (out of memory)" in big.stdout
    # quiet: libtpu found no TPU to look for (no metadata-server or worker-hostname complaints)
    assert not any("TPU_WORKER_HOSTNAMES" in line or "accelerator type" in line for line in lines)


def test_cli_a_compiler_that_crashes_is_one_line_exit_2():
    # libtpu 0.0.42's compiler aborts the process on gardner chess (a fatal check in its fusion emitter, whatever the
    # network's size): each target compiles in a process of its own, so the user gets one line, not a core dump.
    sets = [arg for s in TINY[:6] for arg in ("--set", s)]
    crash = _az("preflight", "--target", "v5litepod-1", "--game", "gardner_chess", "--programs", "iteration", *sets)
    assert crash.returncode == 2
    lines = crash.stderr.strip().splitlines()
    assert lines[:-1] == ["az-jax preflight: compiling the training iteration"], crash.stderr[-2000:]
    assert re.fullmatch(
        r"az-jax: error: the TPU compiler \(libtpu [0-9.]+\) crashed compiling the training iteration for "
        r"v5litepod-1 \(\S+\.cc:\d+: Check failed: .+\); this plan cannot be checked on this machine: try another "
        r"target or other settings",
        lines[-1],
    ), lines[-1]


def test_cli_alphago_unknown_preset_is_one_line_exit_2():
    unknown = _az("preflight", "--target", "h100", "--alphago", "13x13")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        "az-jax: error: --alphago: unknown preset '13x13'; known: 9x9-cpu, 9x9, 19x19, 19x19-smoke"
    ]


def test_targets_are_the_chips_people_rent():
    t = targets.get_target("v5e-8")  # an alias
    assert (t.name, t.platform, t.devices, t.topology) == ("v5litepod-8", "tpu", 8, "v5e:2x4")
    assert dataclasses.replace(targets.get_target("h100"), devices=8).budget_bytes == int(0.75 * 80 * 2**30)
    with pytest.raises(targets.UnknownTargetError):
        targets.get_target("tpu")
    assert jax.default_backend() == "cpu"  # compiling for targets left the tests' own backend alone


def test_cli_alphago_overrides_and_stages_are_checked_one_line():
    bad_set = _az("preflight", "--target", "h100", "--alphago", "19x19", "--set", "rl.games=3")
    assert bad_set.returncode == 2 and bad_set.stderr.strip().splitlines() == [
        "az-jax: error: --set rl.games=3: RLConfig: invalid games=3"
    ]
    bad_stage = _az("preflight", "--target", "h100", "--alphago", "19x19", "--programs", "search,mcts")
    assert bad_stage.returncode == 2 and len(bad_stage.stderr.strip().splitlines()) == 1
    assert "--programs: unknown AlphaGo stage 'mcts'; choose from sl step, rollout step" in bad_stage.stderr
