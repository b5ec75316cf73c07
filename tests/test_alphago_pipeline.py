"""`az-jax alphago pipeline` (az_jax/alphago/pipeline.py, presets.py): every stage of a preset into one agent
directory, resumable, refusing another preset's directory, and the preset's search as the `alphago:DIR` player's
default. One tiny preset runs end to end in the module fixture (first until SL, then the rest, then once more)."""

import contextlib
import dataclasses
import io
import json
import os

import jax
import numpy as np
import pytest

from az_jax.alphago import (
    apv_mcts,
    dataset,
    pattern_training,
    pipeline,
    presets,
    reinforce,
    rollout_policy,
    supervised,
    tree_policy,
    value_store,
    value_training,
)
from az_jax.alphago.presets import PRESETS, AlphaGoPreset
from az_jax.apps import cli
from az_jax.evaluation.players import PlayerSpecError, make_player
from az_jax.runtime import columns

from conftest import fast_compiles_here

# Tiny networks and a few steps of each stage. Batches and game counts are multiples of the 2 test devices (RL: of
# 2 × 2, p_ρ playing Black in half of each device's games). 20 value-data games: value_data holds out game g when
# g % 20 == 19, so game 19 is the one held-out position the value network is evaluated on.
TINY = AlphaGoPreset(
    name="tiny",
    size=9,
    expert_games=1,  # unused: the data set is given
    expert_level=0,
    sl=supervised.SLConfig(size=9, filters=4, layers=2, planes=4, batch_size=4, steps=3, eval_every=3),
    rollout=pattern_training.TrainConfig(steps=5, batch_size=8),
    rl=reinforce.RLConfig(games=4, iterations=2, pool_every=1, max_moves=20, checkpoint_every=1, eval_games=0),
    value_games=20,
    value_batch=10,
    value=value_training.ValueConfig(size=9, filters=4, layers=2, hidden=4, planes=4, batch_size=4, steps=3),
    search=apv_mcts.APVConfig(simulations=3, lam=0.25),
    # the stages' steps from the data given (AlphaGoPreset.sl_config / value_config): one pass over the 12 training
    # positions of a.sgf and b.sgf at batch 4 is 3 steps; 12/19 of a pass over the 19 training positions of value
    # data at batch 4, 19 · 12/19 / 4, is 3 steps too (the sl and value steps above, so both paths give the same runs)
    sl_passes=1.0,
    value_passes=12 / 19,
)


def in_process(argv: list[str]) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(argv)
    return code, err.getvalue().splitlines()


def snapshot(directory) -> dict[str, tuple[int, int]]:
    """(size, modification time in ns) of every file under `directory`, by relative path."""
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            stat = os.stat(os.path.join(root, name))
            out[os.path.relpath(os.path.join(root, name), directory)] = (stat.st_size, stat.st_mtime_ns)
    return out


def lines_of(path) -> int:
    with open(path) as f:
        return len(f.readlines())


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    """A 9×9 data set of three hand-written games (as tests/test_alphago_cli.py's); c.sgf is held out."""
    root = tmp_path_factory.mktemp("games")
    (root / "a.sgf").write_bytes(b"(;SZ[9]RE[B+5.5];B[ee];W[cc];B[gg];W[dd];B[ce];W[dc])")
    (root / "b.sgf").write_bytes(b"(;SZ[9]RE[W+2.5];B[dd];W[ff];B[fd];W[df];B[ec];W[ge])")
    (root / "c.sgf").write_bytes(b"(;SZ[9]RE[B+0.5];B[ee];W[cc];B[gg];W[dd];B[ae])")
    out = root / "go9"  # a directory: the streamed form
    dataset.build([root], 9, out)
    return str(out)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_file):
    """The tiny preset into one directory three times: until "sl", then every stage, then again (nothing to do)."""
    directory = str(tmp_path_factory.mktemp("agents") / "tiny")
    with fast_compiles_here():  # tiny programs: compiling dominates, as fast_compiles
        lines: list[dict] = []
        until_sl = pipeline.run(TINY, directory, until="sl", data=data_file, log=lines.append)
        after_sl = sorted(os.listdir(directory))
        full = pipeline.run(TINY, directory, data=data_file, log=lines.append)
        before = snapshot(directory)
        again = pipeline.run(TINY, directory, data=data_file, log=lines.append)
        after = snapshot(directory)
    return {
        "dir": directory,
        "until_sl": until_sl,
        "after_sl": after_sl,
        "full": full,
        "again": again,
        "before": before,
        "after": after,
        "lines": lines,
    }


def test_until_sl_stops_after_sl(runs):
    assert runs["after_sl"] == ["preset.json", "sl"]
    stages = runs["until_sl"]["stages"]
    assert list(stages) == ["games", "data", "sl"]
    assert [stages[s]["status"] for s in stages] == ["skipped", "skipped", "done"]  # the data set was given
    assert stages["sl"]["step"] == 3
    with open(os.path.join(runs["dir"], "preset.json")) as f:
        assert json.load(f) == {"name": "tiny", "size": 9, "search": dataclasses.asdict(TINY.search)}


def test_every_stage_has_the_presets_counts(runs):
    d = runs["dir"]
    statuses = {stage: report["status"] for stage, report in runs["full"]["stages"].items()}
    # the second call continued where `until="sl"` stopped: SL was complete, every later stage ran
    assert statuses == {
        "games": "skipped",
        "data": "skipped",
        "sl": "skipped",
        "rollout": "done",
        "tree": "done",
        "rl": "done",
        "value-data": "done",
        "value": "done",
    }
    # p_σ: 3 steps, one metrics line (eval_every = 3)
    sl_config, _, sl_step = supervised.restore_params(os.path.join(d, "sl"))
    assert (sl_config, sl_step, lines_of(os.path.join(d, "sl", "metrics.jsonl"))) == (TINY.sl, 3, 1)
    # p_π: trained for the preset's 5 steps (its report is saved in the file)
    rollout_policy.load(os.path.join(d, "rollout.npz"))
    with np.load(os.path.join(d, "rollout.npz")) as f:
        assert json.loads(str(f["report"]))["steps"] == 5
    # p_τ: the same 5 steps, and its diamonds are counted
    tree_policy.load(os.path.join(d, "tree.npz"))
    with np.load(os.path.join(d, "tree.npz")) as f:
        assert json.loads(str(f["report"]))["steps"] == 5 and "diamond_patterns" in json.loads(str(f["report"]))
    # p_ρ: 2 iterations, a metrics line each; the pool gains ρ after each (pool_every = 1): σ + 2 = 3 members
    rl_dir = os.path.join(d, "rl")
    assert reinforce.restore_params(rl_dir)[2] == 2 and lines_of(os.path.join(rl_dir, "metrics.jsonl")) == 2
    assert {x.shape[0] for x in jax.tree.leaves(reinforce.restore_pool(rl_dir))} == {3}
    assert reinforce.read_config(rl_dir)[2]["sl_run"] == os.path.abspath(os.path.join(d, "sl"))
    # value data: exactly the 20 games (2 batches of 10), one position each; game 19 held out
    assert columns.meta(os.path.join(d, "value_data", "train"))[0]["games_done"] == 20
    train, test = value_store.load_split(os.path.join(d, "value_data"))
    assert (len(train), len(test), test.game.tolist()) == (19, 1, [19])
    # v_θ: 3 steps
    value_config, _, value_step = value_training.restore_params(os.path.join(d, "value"))
    assert (value_config, value_step, lines_of(os.path.join(d, "value", "metrics.jsonl"))) == (TINY.value, 3, 1)
    # the stages' progress lines reach the log with their stage: one per RL iteration
    rl_lines = [line for line in runs["lines"] if line["stage"] == "rl" and "iteration" in line]
    assert [line["iteration"] for line in rl_lines] == [1, 2, 2]  # two progress lines, then the stage's report


def test_a_rerun_does_no_work(runs):
    assert {report["status"] for report in runs["again"]["stages"].values()} == {"skipped"}
    assert runs["after"] == runs["before"]  # no file written, replaced or touched
    assert any(path.startswith(os.path.join("rl", "checkpoints")) for path in runs["before"])


def test_another_preset_is_refused(runs, tmp_path):
    d = runs["dir"]
    before = snapshot(d)
    with pytest.raises(pipeline.PipelineError) as e:
        pipeline.run(dataclasses.replace(TINY, name="other"), d)
    assert "'tiny'" in str(e.value) and "'other'" in str(e.value) and "\n" not in str(e.value)
    code, err = in_process(["alphago", "pipeline", "--preset", "9x9-cpu", "--dir", d])
    assert (code, len(err)) == (2, 1) and "made with preset 'tiny', not '9x9-cpu'" in err[0], err
    assert snapshot(d) == before


def test_unknown_preset_or_stage_is_one_line(tmp_path):
    code, err = in_process(["alphago", "pipeline", "--preset", "9x9-gpu", "--dir", str(tmp_path / "a")])
    assert (code, len(err)) == (2, 1) and "unknown preset '9x9-gpu'; the presets are 9x9-cpu, 9x9, 19x19" in err[0]
    argv = ["alphago", "pipeline", "--preset", "9x9-cpu", "--dir", str(tmp_path / "b"), "--until", "selfplay"]
    code, err = in_process(argv)
    assert (code, len(err)) == (2, 1), err
    assert "unknown stage 'selfplay'; the stages are games, data, sl, rollout, tree, rl, value-data, value" in err[0]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # refused before anything is written


def test_overrides_change_one_setting_each_and_refuse_bad_ones(tmp_path):
    smoke = PRESETS["19x19-smoke"]
    sets = ["sl.steps=80", "rl.games=8", "search.simulations=16", "value_games=60", "search.symmetries=false"]
    p = presets.override(smoke, [*sets, "rollout.learning_rate=0.5"])
    assert (p.sl.steps, p.rl.games, p.search.simulations, p.value_games) == (80, 8, 16, 60)
    assert (p.search.symmetries, p.rollout.learning_rate) == (False, 0.5)
    assert p == dataclasses.replace(  # nothing else moved
        smoke,
        sl=dataclasses.replace(smoke.sl, steps=80),
        rl=dataclasses.replace(smoke.rl, games=8),
        search=dataclasses.replace(smoke.search, simulations=16, symmetries=False),
        rollout=dataclasses.replace(smoke.rollout, learning_rate=0.5),
        value_games=60,
    )
    bad = [
        ("sl.steps", "expected STAGE.key=value or key=value"),
        ("mcts.x=1", "unknown stage 'mcts'; the stages are sl, rollout, rl, value, search"),
        ("sl.depth=3", "sl.depth: unknown key; sl has filters, layers"),
        ("sl.size=9", "sl.size: unknown key"),  # every stage's size is the preset's
        ("size=9", "size: unknown key; the preset has expert_games"),
        ("sl.steps=many", "sl.steps=many: expected an integer"),
        ("search.symmetries=yes", "expected true or false"),
        ("rl.games=3", "rl.games=3: RLConfig: invalid games=3"),  # the config's own check: n even
        ("value_games=50", "invalid value_games=50"),  # not a multiple of value_batch = 20
    ]
    for text, needle in bad:
        with pytest.raises(presets.PresetError) as e:
            presets.override(smoke, [text])
        assert needle in str(e.value) and "\n" not in str(e.value), (text, str(e.value))
    # through the command: one line, and nothing written
    argv = ["alphago", "pipeline", "--preset", "19x19-smoke", "--dir", str(tmp_path / "c"), "--set", "rl.games=3"]
    code, err = in_process(argv)
    assert (code, len(err)) == (2, 1) and "rl.games=3: RLConfig: invalid games=3" in err[0], err
    assert not (tmp_path / "c").exists()


def test_the_presets_search_is_the_players_default(runs):
    d = runs["dir"]
    player = make_player(f"alphago:{d}", "go_9x9")
    assert (player.simulations, player.name) == (3, "tiny:apv3_l0.25")
    # the search it compiles is the preset's: make_apply is cached per (search, p_σ shape, v_θ shape)
    assert player.apply is apv_mcts.make_apply(TINY.search, TINY.sl, TINY.value)
    explicit = make_player(f"alphago:{d}:sims=5,lambda=1", "go_9x9")  # options still win
    assert (explicit.simulations, explicit.name) == (5, "tiny:apv5_l1")
    batched = make_player(f"alphago:{d}:sims=4,leaves=2", "go_9x9")  # the search as the paper batched it
    assert batched.name == "tiny:apv4_l0.25_k2" and batched.apply is apv_mcts.make_apply(
        dataclasses.replace(TINY.search, simulations=4, leaves=2), TINY.sl, TINY.value
    )


@pytest.mark.parametrize(
    "text, needle",
    [
        ("{oops", "preset.json cannot be read"),
        ('{"name": "x", "size": 9}', "not an AlphaGo preset file"),
        ('{"name": "x", "size": 9, "search": {"simulations": 0}}', "bad search settings"),
    ],
)
def test_a_corrupt_preset_file_is_one_line(tmp_path, text, needle):
    (tmp_path / "preset.json").write_text(text)
    with pytest.raises(PlayerSpecError, match=needle) as e:
        make_player(f"alphago:{tmp_path}", "go_9x9")
    assert "\n" not in str(e.value)
    with pytest.raises(presets.PresetError, match=needle):
        pipeline.run(TINY, tmp_path)


def test_steps_come_from_the_data_given():
    p = PRESETS["19x19"]
    # on our corpus (125,245 training positions) the paper's passes are the preset's steps; on the paper's 28.4 M KGS
    # positions at m = 16 they are the paper's 340 M steps (191.55 passes · 28.4e6 / 16); v_θ on 30 M positions at
    # m = 32: the paper's 50 M mini-batches (53.33 passes · 30e6 / 32)
    assert p.sl_config(125_245) == p.sl and p.sl_config(28_400_000).steps == 340_000_000
    assert p.value_config(round(1_024_000 * 19 / 20)) == p.value and p.value_config(30_000_000).steps == 50_000_000
    assert p.sl_config(1).steps == 12  # 191.55 / 16 = 11.97
    assert presets.override(p, ["sl_passes=0.001"]).sl_config(100).steps == 1  # 0.00625 rounds to 0: at least one
    cpu = PRESETS["9x9-cpu"]  # no passes: the steps as given, whatever the data
    assert cpu.sl_config(10**6) == cpu.sl and cpu.value_config(10**6) == cpu.value
    # steps set by hand win over the passes
    hand = presets.override(p, ["sl.steps=500", "value.steps=40"])
    assert (hand.sl_config(28_400_000).steps, hand.value_config(30_000_000).steps) == (500, 40)
    assert presets.override(p, ["sl_passes=2"]).sl_config(125_245).steps == round(125_245 * 2 / 16)


def test_the_papers_values_in_the_presets():
    # Silver et al. 2016, Methods and Extended Data Table 5
    p = PRESETS["19x19"]
    assert (p.sl.filters, p.sl.layers, p.sl.planes, p.sl.batch_size, p.sl.learning_rate) == (192, 13, 48, 16, 0.003)
    assert (p.rl.games, p.rl.iterations, p.rl.pool_every) == (128, 10_000, 500)
    assert (p.value.filters, p.value.layers, p.value.hidden, p.value.batch_size) == (192, 13, 256, 32)
    assert (p.search.lam, p.search.c_puct, p.search.beta) == (0.5, 5.0, 0.67)
    # 340 M steps of 16 over 28.4 M positions, kept over our 125,245: 340e6 · 125,245 / 28.4e6 = 1,499,412.3
    assert p.sl.steps == 1_499_412
    # 50 M steps of 32 over 30 M positions, kept over 1,024,000 · 19/20 = 972,800: 50e6 · 972,800 / 30e6 = 1,621,333.3
    assert p.value.steps == 1_621_333
    assert PRESETS["9x9"].rl.games == 128 and PRESETS["9x9"].search.simulations == 400
    cpu = PRESETS["9x9-cpu"]
    assert (cpu.sl.filters, cpu.sl.layers, cpu.sl.steps, cpu.rl.games, cpu.rl.iterations) == (32, 8, 3000, 16, 100)
    assert (cpu.value_games, cpu.value_batch, cpu.search.simulations, cpu.search.lam) == (8192, 256, 32, 0.5)
    for preset in PRESETS.values():  # the value data set holds exactly value_games games: whole batches
        assert preset.value_games % preset.value_batch == 0


def test_an_inconsistent_preset_is_one_line():
    with pytest.raises(ValueError, match=r"^AlphaGoPreset 'tiny': invalid value_games=25$"):
        dataclasses.replace(TINY, value_games=25)  # not a multiple of the batch of 10
    with pytest.raises(ValueError, match="invalid sl="):
        dataclasses.replace(TINY, size=19)  # p_σ is 9×9
