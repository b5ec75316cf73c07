"""AlphaGo Zero mode: the variant and its switches, gating, calibrated resignation, the presets, and a tiny run.

Resignation numbers use az_jax/core/resign.py's grid of thresholds −1.00, −0.95, …, −0.05 (index k is −1 + 0.05·k) and
its false-positive rate = (played-out games where the rule fired for a player who did not lose) / (played-out games
where it fired).
"""

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import envs
from az_jax.core import arena, gating, replay, resign, search, selfplay
from az_jax.core.config import ConfigError
from az_jax.core.devices import DEVICE_AXIS, device_key, make_mesh, sharded
from az_jax.core.overrides import from_json, override
from az_jax.core.presets import preset
from az_jax.evaluation.in_training import train_and_evaluate
from az_jax.evaluation.tic_tac_toe_oracle import perfect_player
from az_jax.runtime import checkpoint as ckpt
from az_jax.runtime.metrics import read_metrics
from az_jax.runtime.trainer import Trainer

from conftest import TINY_NETWORK, uninformative_model

K = {v: k for k, v in enumerate(resign.GRID)}  # threshold -> its index in the grid

# Programs that compile for far longer than they run: XLA's optimisation passes off (conftest.py).
pytestmark = pytest.mark.usefixtures("fast_compiles")


# --- the variant and its switches ----------------------------------------------------------------------------------
def test_variant_sets_the_switches_and_explicit_switches_win():
    small = preset("connect_four", "small")
    # The small preset is AlphaZero plus one switch of its own, the mirror-image augmentation
    # (experiments/strength/README.md)
    assert small.variant == "alphazero"
    assert small.switches == {
        "gating": False,
        "resign": False,
        "augment_symmetries": True,
        "search_symmetries": False,
    }
    agz = override(small, ["variant=alphago_zero"])
    assert agz.switches == {"gating": True, "resign": True, "augment_symmetries": True, "search_symmetries": True}
    # A switch given beside the variant wins over it, whichever comes first on the command line.
    for order in (["variant=alphago_zero", "gating=false"], ["gating=false", "variant=alphago_zero"]):
        assert override(small, order).switches == {
            "gating": False,
            "resign": True,
            "augment_symmetries": True,
            "search_symmetries": True,
        }
    # Each switch alone in alphazero mode (an ablation); the variant itself turns all four off.
    assert override(small, ["variant=alphazero", "resign=true"]).switches == {
        "gating": False,
        "resign": True,
        "augment_symmetries": False,
        "search_symmetries": False,
    }
    # A later variant resets the switches of an earlier preset; the preset's other values stay.
    back = override(preset("connect_four", "small_agz"), ["variant=alphazero"])
    assert not any(back.switches.values()) and back.gating_games == 64
    # Chess has no board symmetries: the variant leaves them off there rather than failing validation.
    chess = override(preset("chess", "small"), ["variant=alphago_zero"]).validate()
    assert chess.switches == {"gating": True, "resign": True, "augment_symmetries": False, "search_symmetries": False}
    # The resolved switches are what config.json keeps: a round trip gives the same config.
    assert from_json(override(agz, ["gating=false"]).to_json()) == override(agz, ["gating=false"])


@pytest.mark.parametrize(
    "assignments, needle",
    [
        (["variant=alphago"], "variant must be one of alphazero, alphago_zero, got 'alphago'"),
        (["gating=true", "gating=false"], "gating is given twice with contradictory values"),
        (["variant=alphazero", "variant=alphago_zero"], "variant is given twice"),
        (["gating_threshold=0.4"], "gating_threshold must be in [0.5, 1)"),
        (["gating_games=30"], "gating_games=30 must be a positive multiple of 2 × the 2 devices"),
        (["resign_disabled_fraction=0"], "resign_disabled_fraction must be in (0, 1)"),
        (["resign_target_false_positive=1.5"], "resign_target_false_positive must be in (0, 1)"),
        (["v_resign_init=-2"], "v_resign_init must be in [-1, 1]"),
    ],
)
def test_bad_or_contradictory_values_are_one_line_errors(assignments, needle):
    with pytest.raises(ConfigError) as info:
        override(preset("connect_four", "small_agz"), assignments).validate(num_devices=2)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_gating_games_need_to_split_over_the_devices_only_with_gating_on():
    # 6 games on 2 devices: 6 / (2 · 2) = 1.5 pairs each. Only a problem when gating plays them.
    config = override(preset("connect_four", "small"), ["gating_games=6"])
    config.validate(num_devices=2)
    with pytest.raises(ConfigError, match="gating_games=6"):
        override(config, ["gating=true"]).validate(num_devices=2)
    override(config, ["gating=true"]).validate(num_devices=1)  # 6 / 2 = 3 pairs


def test_alphago_zero_preset_has_the_papers_numbers():
    c = preset("go_19x19", "alphago_zero").validate()
    assert (c.num_blocks, c.num_channels, c.value_hidden) == (19, 256, 256)  # stem + 19 = 20 blocks × 256
    assert (c.num_simulations, c.gating_simulations, c.gating_games, c.gating_threshold) == (1600, 1600, 400, 0.55)
    assert (c.batch_size, c.momentum, c.weight_decay) == (2048, 0.9, 1e-4)
    assert c.learning_rates == (1e-2, 1e-3, 1e-4) and c.lr_boundaries == (400_000, 600_000)
    assert (c.resign_disabled_fraction, c.resign_target_false_positive) == (0.1, 0.05)
    assert c.sampling_moves == 30 and c.root_dirichlet_alpha == 0.03 and c.dirichlet_fraction == 0.25
    # A checkpoint (and a gating match) every 1,000 training steps: G = round(1.25 · 1024 · 32 / 2048) = 20 steps
    # per iteration, checkpoint_every = 50 iterations; 700k steps = 35,000 iterations.
    assert c.train_steps_per_iteration == 20 and c.checkpoint_every * 20 == 1000 and c.gating_interval == 50
    assert c.num_iterations * 20 == 700_000
    assert all(c.switches.values())
    for game in ("connect_four", "go_9x9", "tic_tac_toe"):
        small = preset(game, "small_agz").validate(num_devices=2)
        assert all(small.switches.values()) and small.num_blocks == preset(game, "small").num_blocks


# --- gating --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "wins, draws, losses, accepted",
    [
        (56, 0, 44, True),  # 56 / 100 = 0.56 > 0.55
        (55, 0, 45, False),  # 0.55 is not above 0.55
        (221, 0, 179, True),  # the paper's 400 games: 221 / 400 = 0.5525
        (220, 0, 180, False),  # 220 / 400 = 0.55
        (51, 10, 39, True),  # (51 + 10/2) / 100 = 0.56: a draw counts half
        (50, 10, 40, False),  # (50 + 5) / 100 = 0.55
        (0, 100, 0, False),  # all draws: 0.5
        (0, 0, 0, False),  # no games: never replace
    ],
)
def test_gating_decision_on_constructed_results(wins, draws, losses, accepted):
    assert bool(gating.gating_decision(wins, draws, losses, 0.55)) is accepted
    assert bool(gating.gating_decision(jnp.int32(wins), jnp.int32(draws), jnp.int32(losses), 0.55)) is accepted


def test_gate_replaces_the_best_player_only_when_the_candidate_scores_above_the_threshold(two_devices):
    """Real tic-tac-toe matches on 2 devices, from the empty board (no random opening, which could hand the perfect
    player a lost position). A player's "weights" pick it: strength 1 is the perfect minimax player, 0 uniform
    random. perfect vs random: the perfect side never loses and wins most games -> replaced. random vs perfect ->
    kept. perfect vs perfect: every game a draw, score 0.5 -> kept (0.5 is not above 0.55)."""
    env = envs.make_env("tic_tac_toe")[0]
    mesh = make_mesh(two_devices)

    def player_fn(variables):
        strong = variables["params"]["strength"] > 0
        return lambda s, k: jnp.where(strong, perfect_player(s, k), arena.uniform_random_player(s, k))

    def local(candidate, best, key):
        return gating.gate(
            env,
            player_fn,
            candidate,
            best,
            jnp.int32(7),
            device_key(key),
            num_games=50,
            max_length=9,
            opening_plies=0,
            threshold=0.55,
            axis_name=DEVICE_AXIS,
        )

    run = sharded(local, mesh, (P(), P(), P()), (P(), P()))
    weights = lambda s: {"params": {"strength": jnp.float32(s)}, "batch_stats": {}}
    best_player = lambda s: gating.BestPlayer(
        params={"strength": jnp.float32(s)}, batch_stats={}, iteration=jnp.int32(3)
    )
    for candidate, best, accepted in ((1, 0, True), (0, 1, False), (1, 1, False)):
        new_best, m = run(weights(candidate), best_player(best), jax.random.key(0))
        assert m["gating/wins"] + m["gating/draws"] + m["gating/losses"] == 100
        score = (m["gating/wins"] + m["gating/draws"] / 2) / 100
        assert float(m["gating/score"]) == pytest.approx(float(score))
        assert bool(m["gating/accepted"]) is accepted
        assert float(new_best.params["strength"]) == (candidate if accepted else best)
        assert int(new_best.iteration) == (7 if accepted else 3) == int(m["gating/best_iteration"])
        if (candidate, best) == (1, 0):
            assert m["gating/losses"] == 0 and score > 0.55
        if (candidate, best) == (1, 1):
            assert m["gating/draws"] == 100


# --- resignation: false positives and the v_resign update on synthetic played-out games ----------------------------
# Four games of 5 plies: (pgx ids of the movers, max(root value, best-child value) at each ply, final rewards per id).
# Games A, B, C are played out (resignation disabled); D has resignation on.
#   A: id 1 dips to −0.3 (ply 1) and −0.85 (ply 3) and loses.           -> any firing is right (id 1 lost).
#   B: id 0 dips to −0.6 at ply 1 but WINS; id 1 falls to −0.9 at ply 4 and loses.
#   C: id 0 dips to −0.4 at ply 0; a draw (a draw is not a loss: firing there is a false positive).
#   D: id 0 at −0.95 on ply 0 with resignation on: resigns at v_resign = −0.8.
MOVERS = np.array([[0, 1, 0, 1, 0], [1, 0, 1, 0, 1], [0, 1, 0, 1, 0], [0, 1, 0, 1, 0]], np.int32)
VALUES = np.array(
    [
        [0.2, -0.3, 0.4, -0.85, 0.9],
        [0.1, -0.6, -0.2, 0.3, -0.9],
        [-0.4, -0.1, 0.0, 0.0, 0.0],
        [-0.95, 0.5, 0.5, 0.5, 0.5],
    ],
    np.float32,
)
REWARDS = np.array([[1, -1], [1, -1], [0, 0], [-1, 1]], np.float32)
# Hand count, per threshold v (the first ply whose value is < v names the player who would resign):
#   v = −0.90: nobody fires (−0.9 < −0.9 is false)                            -> would 0, false positives 0
#   v = −0.85: B id 1 (−0.9), lost                                            -> 1, 0
#   v = −0.80: A id 1 (−0.85), B id 1 (−0.9): both lost                       -> 2, 0   (the v_resign in force)
#   v = −0.60: A id 1, B id 1 (−0.6 < −0.6 is false): both lost               -> 2, 0
#   v = −0.55: A id 1; B id 0 at ply 1 (−0.6), who won                        -> 2, 1   rate 0.5
#   v = −0.40: A id 1; B id 0 (won); C: −0.4 < −0.4 is false                  -> 2, 1   rate 0.5
#   v = −0.35: A id 1; B id 0 (won); C id 0 at ply 0, drew                    -> 3, 2   rate 0.667
#   v = −0.20: A id 1 at ply 1 (−0.3); B id 0; C id 0                         -> 3, 2   rate 0.667
EXPECTED = {
    -0.9: (0, 0),
    -0.85: (1, 0),
    -0.8: (2, 0),
    -0.6: (2, 0),
    -0.55: (2, 1),
    -0.4: (2, 1),
    -0.35: (3, 2),
    -0.2: (3, 2),
}


def _synthetic_counts():
    games = resign.ResignGames(
        allowed=jnp.array([False, False, False, True]),
        first=jnp.full(4, -1, jnp.int32),
        first_grid=jnp.full((4, len(resign.GRID)), -1, jnp.int32),
    )
    resigned = []
    for ply in range(5):
        games, now = resign.observe(games, jnp.asarray(VALUES[:, ply]), jnp.asarray(MOVERS[:, ply]), jnp.float32(-0.8))
        resigned.append(np.asarray(now))
    return games, np.array(resigned), resign.outcome_counts(games, jnp.ones(4, bool), jnp.asarray(REWARDS))


def test_false_positive_counts_on_synthetic_played_out_games():
    games, resigned, counts = _synthetic_counts()
    # Only D, where resignation is on, resigns, and only on ply 0 (−0.95 < −0.8); played-out games never do.
    assert resigned.tolist() == [[False, False, False, True]] + [[False] * 4] * 4
    # First player for whom the rule fired at −0.8: A id 1 (ply 3), B id 1 (ply 4), C nobody, D id 0.
    assert games.first.tolist() == [1, 1, -1, 0]
    assert int(counts["games"]) == 3  # A, B, C (D was not played out)
    assert (int(counts["would"]), int(counts["false_pos"])) == EXPECTED[-0.8]
    for v, (would, false_pos) in EXPECTED.items():
        assert (int(counts["grid_would"][K[v]]), int(counts["grid_false_pos"][K[v]])) == (would, false_pos), v
    # −1 never fires.
    assert int(counts["grid_would"][0]) == 0


def test_v_resign_update_on_synthetic_played_out_games():
    _, _, counts = _synthetic_counts()
    # Target 5%: every threshold above −0.6 includes B's false positive (rate ≥ 1/3); −0.6 has rate 0/2.
    assert float(resign.calibrate(counts["grid_false_pos"], counts["grid_would"], 0.05)) == pytest.approx(-0.6)
    # Target 50%: −0.55 … −0.40 have rate 1/2; from −0.35 on C's draw makes it 2/3.
    assert float(resign.calibrate(counts["grid_false_pos"], counts["grid_would"], 0.5)) == pytest.approx(-0.4)

    state = resign.init_state(-0.8)
    # 3 played-out games, calibration every 4: v_resign stays, the counts wait in the window.
    waiting, m = resign.update(state, counts, target=0.05, calibration_games=4)
    assert float(waiting.v_resign) == pytest.approx(-0.8) and int(m["resign/recalibrated"]) == 0
    assert int(waiting.games) == 3 and int(waiting.would) == 2
    # The same games again: 6 ≥ 4, so v_resign is re-set from the 6 games (counts doubled, same rates) to −0.6 and
    # the window empties. The rate logged is the one measured at the threshold in force, −0.8: 0 / 4.
    updated, m = resign.update(waiting, counts, target=0.05, calibration_games=4)
    assert float(updated.v_resign) == pytest.approx(-0.6) and int(m["resign/recalibrated"]) == 1
    assert (int(m["resign/played_out_games"]), int(m["resign/would_resign_games"])) == (6, 4)
    assert float(m["resign/false_positive_rate"]) == 0.0
    assert int(updated.games) == 0 and int(updated.grid_would.sum()) == 0


# --- resignation: a resigned game gets the targets its played-out result gives -------------------------------------
def test_resigned_game_gets_the_targets_of_its_played_out_result():
    """Tic-tac-toe, X to move (cells 0..8 row-major):   X O X
                                                        O . .
                                                        O X .
    X's only winning move is 8 (threats 2-5-8 and 0-4-8); then O, with cells 4 and 5 left, loses whatever it plays.
    Two copies of the game: slot 0 with resignation on, slot 1 played out. A search of 64 simulations with a network
    that knows nothing (uniform prior, value 0) finds X's win (both slots play 8), then sees every O move lose
    (values near −1 < v_resign = −0.5): slot 0's O resigns, slot 1's O plays on and X wins on the next ply.
    Both give X's position z = +1 and O's z = −1."""
    env = envs.make_env("tic_tac_toe")[0]

    @jax.jit  # one compiled program instead of pgx's many eager ops
    def position(key):
        state = env.init(key)
        for move in (0, 1, 2, 3, 7, 6):  # X0 O1 X2 O3 X7 O6
            state = env.step(state, jnp.int32(move))
        return state

    state = position(jax.random.key(0))
    x, o = int(state.current_player), 1 - int(state.current_player)
    games = selfplay.SelfPlayState(
        env=jax.tree.map(lambda a: jnp.stack([a, a]), state),
        ply=jnp.full(2, 6, jnp.int32),
        episode=jnp.zeros(2, jnp.int32),
        resign=resign.ResignGames(
            allowed=jnp.array([True, False]),
            first=jnp.full(2, -1, jnp.int32),
            first_grid=jnp.full((2, len(resign.GRID)), -1, jnp.int32),
        ),
    )
    apply_fn, variables = uninformative_model(env)
    settings = selfplay.SelfPlayConfig(
        search=search.SearchConfig(
            num_simulations=64,
            algorithm="puct",
            dirichlet_fraction=0.0,
            dirichlet_alpha=1.0,
            max_num_considered_actions=9,
        ),
        num_plies=3,
        sampling_moves=0,
        resign_disabled_fraction=0.5,
    )
    buffer = replay.init(6, env.observation_shape, state.observation.dtype, env.num_actions)
    play = jax.jit(
        lambda g, b, k: selfplay.play(
            env, apply_fn, variables, settings, g, b, k, first_ply=jnp.int32(0), v_resign=jnp.float32(-0.5)
        )
    )
    games, buffer, m = play(games, buffer, jax.random.key(1))
    # Ply t wrote slot b's position at row 2t + b.  Rows 0, 1: X to move; rows 2, 3: O to move; row 5: X wins.
    np.testing.assert_array_equal(np.asarray(buffer.player[:4]), [x, x, o, o])
    assert np.asarray(buffer.policy[0]).argmax() == np.asarray(buffer.policy[1]).argmax() == 8
    np.testing.assert_array_equal(np.asarray(buffer.done), [True, True, True, True, False, True])
    np.testing.assert_array_equal(np.asarray(buffer.outcome[:4]), [1, 1, -1, -1])  # resigned == played out
    assert float(buffer.outcome[5]) == 1 and int(buffer.player[5]) == x
    assert int(m["resigned"]) == 1 and int(m["games"]) == 2
    # Slot 0 restarted after resigning (row 4 is its new game's first position, outcome pending).
    assert games.episode.tolist() == [1, 1] and bool(buffer.pending[4])
    # The played-out slot: the rule fired for O (it would have resigned), and O lost: no false positive.
    c = m["resign_counts"]
    assert (int(c["games"]), int(c["would"]), int(c["false_pos"])) == (1, 1, 0)


# --- a tiny connect_four run in alphago_zero mode ------------------------------------------------------------------
TINY = [
    *TINY_NETWORK,
    "selfplay_steps=8",
    "replay_capacity=512",
    "min_replay_size=16",
    "eval_every=0",
    "checkpoint_every=2",
    "keep_checkpoints=5",
    "train_ratio=0.5",
    "num_iterations=4",
    "gating_games=8",
    "resign_disabled_fraction=0.5",
    "resign_calibration_games=2",
]


def test_tiny_connect_four_run_gates_twice_recalibrates_v_resign_and_resumes_exactly(tmp_path, two_devices):
    # The resumed run below loads the programs the first run compiled from the session's compilation cache
    # (conftest.py) instead of compiling them again.
    config = override(preset("connect_four", "small_agz"), TINY)
    assert config.variant == "alphago_zero" and all(config.switches.values())
    run_dir = str(tmp_path / "agz")
    final = train_and_evaluate(config, run_dir, progress=False, devices=two_devices)
    records = read_metrics(run_dir)
    assert [r["iteration"] for r in records] == [1, 2, 3, 4]
    # Gating at iterations 2 and 4 (every checkpoint): 8 games each; the best player is the candidate of that
    # iteration when accepted, else the one before.
    gates = [r for r in records if "gating/score" in r]
    assert [r["iteration"] for r in gates] == [2, 4]
    best = 0
    for r in gates:
        assert r["gating/wins"] + r["gating/draws"] + r["gating/losses"] == 8
        best = r["iteration"] if r["gating/accepted"] else best
        assert r["gating/best_iteration"] == best
    # v_resign was re-set at least once (every 2 played-out games), to a value of the grid.
    assert any(r["resign/recalibrated"] for r in records)
    last = [r for r in records if r["resign/recalibrated"]][-1]
    assert min(abs(last["resign/v_resign"] - v) for v in resign.GRID) < 1e-6
    assert all(0 <= r["resign/resigned_fraction"] <= 1 for r in records)
    # The final state carries the best player and v_resign, and the checkpoint of iteration 4 holds them.
    assert int(final.best.iteration) == best and float(final.resign.v_resign) == pytest.approx(
        records[-1]["resign/v_resign"]
    )
    if best == 4:
        jax.tree.map(np.testing.assert_array_equal, jax.device_get(final.best.params), jax.device_get(final.params))
    trainer = Trainer(config, make_mesh(two_devices))
    restored = ckpt.restore(ckpt.make_manager(run_dir, read_only=True), 4, trainer.abstract_state(), config)
    for a, b in zip(jax.tree.leaves(jax.device_get(final)), jax.tree.leaves(jax.device_get(restored)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert json.loads(open(f"{run_dir}/config.json").read())["variant"] == "alphago_zero"

    # Interrupted after iteration 2 and resumed: bitwise the same run, gating and v_resign included.
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(run_dir, resumed_dir)
    shutil.rmtree(resumed_dir / "checkpoints" / "4")
    lines = (resumed_dir / "metrics.jsonl").read_text().splitlines(keepends=True)
    (resumed_dir / "metrics.jsonl").write_text("".join(lines[:2]))
    resumed = train_and_evaluate(config, str(resumed_dir), progress=False, devices=two_devices)
    for a, b in zip(jax.tree.leaves(jax.device_get(final)), jax.tree.leaves(jax.device_get(resumed)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    again = read_metrics(str(resumed_dir))[3]
    assert {k: v for k, v in again.items() if k.startswith(("gating/", "resign/")) and k != "gating/seconds"} == {
        k: v for k, v in records[3].items() if k.startswith(("gating/", "resign/")) and k != "gating/seconds"
    }
