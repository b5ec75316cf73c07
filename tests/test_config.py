"""The typed config: unknown keys and invalid values are rejected naming the key, overrides are coerced to the field's
type, every game has presets that validate, and JSON round-trips."""

import dataclasses

import pytest

import envs
from az_jax.core.config import Config, ConfigError
from az_jax.core.overrides import from_json, override
from az_jax.core.presets import preset


def test_unknown_key_is_rejected_naming_it():
    with pytest.raises(ConfigError, match="num_blokcs"):
        override(Config(), ["num_blokcs=3"])
    with pytest.raises(ConfigError, match="learning_rate'"):
        override(Config(), {"learning_rate": 0.1})
    with pytest.raises(ConfigError, match="no_such_key"):
        from_json('{"no_such_key": 1}')


@pytest.mark.parametrize(
    "assignment,key",
    [
        ("num_simulations=0", "num_simulations"),
        ("num_blocks=-1", "num_blocks"),
        ("value_head_filters=0", "value_head_filters"),
        ("dirichlet_fraction=1.5", "dirichlet_fraction"),
        ("game=nope", "nope"),
        ("eval_solver_simulations=-1", "eval_solver_simulations"),
        # the default game is connect four; the solver set is its own
        ("game=tic_tac_toe eval_solver_simulations=64", "eval_solver_simulations"),
    ],
)
def test_invalid_value_is_rejected_naming_the_key(assignment, key):
    config = override(Config(), assignment.split())  # parses; validate() judges the value
    with pytest.raises(ConfigError, match=key):
        config.validate()


def test_batch_size_must_divide_over_the_devices():
    config = dataclasses.replace(preset("tic_tac_toe"), batch_size=255)
    config.validate(num_devices=1)  # fine on one device
    with pytest.raises(ConfigError, match="batch_size=255"):
        config.validate(num_devices=2)  # 255 = 2 · 127 + 1
    dataclasses.replace(config, batch_size=256).validate(num_devices=2)


def test_bad_literal_is_rejected_listing_the_choices():
    with pytest.raises(ConfigError, match="search") as info:
        override(Config(), ["search=foo"])
    assert "puct" in str(info.value) and "gumbel" in str(info.value)
    with pytest.raises(ConfigError, match="compute_dtype"):
        override(Config(), ["compute_dtype=float16"])


def test_bad_type_is_rejected_naming_the_key():
    with pytest.raises(ConfigError, match="num_blocks"):
        override(Config(), ["num_blocks=2.5"])
    with pytest.raises(ConfigError, match="momentum"):
        override(Config(), ["momentum=fast"])


def test_learning_rates_and_boundaries_must_match_in_length():
    # k boundaries split the steps into k + 1 pieces: 2 rates need exactly 1 boundary.
    config = override(Config(), ["learning_rates=0.1,0.01", "lr_boundaries=100,200"])
    with pytest.raises(ConfigError, match="learning_rates"):
        config.validate()
    override(config, ["lr_boundaries=100"]).validate()


def test_overrides_are_coerced_to_the_field_type():
    config = override(
        Config(),
        [
            "learning_rates=0.1,0.01",
            "num_blocks=3",
            "lr_boundaries=1000",
            "c_init=2",
            "search=gumbel",
            "compute_dtype=bfloat16",
        ],
    )
    assert config.learning_rates == (0.1, 0.01)
    assert config.num_blocks == 3 and type(config.num_blocks) is int
    assert config.lr_boundaries == (1000,) and type(config.lr_boundaries[0]) is int
    assert config.c_init == 2.0 and type(config.c_init) is float
    assert config.search == "gumbel" and config.compute_dtype == "bfloat16"
    # The original is untouched (configs are frozen; override returns a new one).
    assert Config().num_blocks == 19
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_blocks = 4


def test_malformed_assignment_is_rejected():
    with pytest.raises(ConfigError, match="key=value"):
        override(Config(), ["num_blocks"])


@pytest.mark.parametrize("game", list(envs.GAMES))
@pytest.mark.parametrize("name", ["small", "paper"])
def test_presets_exist_for_every_game_and_validate(game, name):
    config = preset(game, name)
    assert config.game == game
    config.validate()
    # Game-dependent values come from the registry when the config leaves them at their "use the game's" default.
    assert config.root_dirichlet_alpha == envs.GAMES[game].dirichlet_alpha
    if config.temperature_moves == -1:
        assert config.sampling_moves == envs.GAMES[game].temperature_moves
    else:  # the small tic_tac_toe preset samples every ply of its 9
        assert (game, name, config.sampling_moves) == ("tic_tac_toe", "small", 9)


def test_paper_preset_has_the_papers_numbers():
    config = preset("chess", "paper")
    # AlphaZero: 800 simulations, batch 4096, 19 residual blocks of 256 filters, SGD momentum 0.9, c = 1e-4,
    # learning rate 0.2 -> 0.02 -> 0.002 -> 0.0002, Dirichlet ε = 0.25 and α = 0.3 for chess.
    assert (config.num_simulations, config.batch_size, config.num_blocks, config.num_channels) == (800, 4096, 19, 256)
    assert (config.momentum, config.weight_decay, config.dirichlet_fraction) == (0.9, 1e-4, 0.25)
    assert config.learning_rates == (0.2, 0.02, 0.002, 0.0002)
    assert config.root_dirichlet_alpha == 0.3


def test_hours_preset_is_the_small_recipe_with_a_larger_network_forking_and_a_longer_schedule():
    small, hours = preset("connect_four"), preset("connect_four", "hours")
    hours.validate(num_devices=2)
    # The same search, self-play, replay and random openings; the network (4 × 48 against 3 × 32), game forking, the
    # run's length, its rate step, how often and with how many games it is evaluated, and the value target differ:
    # `make train` mixes z half and half with the search value, `hours` trains on z alone (the mix fell behind after
    # its rate step).
    differ = {
        "num_blocks",
        "num_channels",
        "fork_fraction",
        "num_iterations",
        "lr_boundaries",
        "eval_every",
        "eval_games",
        "value_target_mix",
    }
    assert {f.name for f in dataclasses.fields(small) if getattr(small, f.name) != getattr(hours, f.name)} == differ
    assert (small.num_blocks, small.num_channels, hours.num_blocks, hours.num_channels) == (3, 32, 4, 48)
    assert (small.fork_fraction, hours.fork_fraction) == (0.0, 0.3)
    assert (small.value_target_mix, hours.value_target_mix) == (0.5, 0.0)
    assert preset("connect_four", "small_agz").value_target_mix == 0.0  # AlphaGo Zero's value target is z
    # `make train`: 750 × 128 × 16 × 4 / 256 = 750 × 32 = 24,000 steps, the step at 75% of them (iteration 562.5)
    small_steps = small.num_iterations * small.selfplay_batch_size * small.selfplay_steps * small.train_ratio
    assert small_steps / small.batch_size == 24_000 and small.lr_boundaries == (18_000,)
    # 2,540 iterations × 128 games × 16 plies × train_ratio 4 / batch 256 = 2,540 × 32 = 81,280 steps; the step at
    # 75% of them, 60,960 = iteration 1,905
    positions = hours.num_iterations * hours.selfplay_batch_size * hours.selfplay_steps
    steps = positions * hours.train_ratio / hours.batch_size
    assert steps == 81_280 and hours.lr_boundaries == (60_960,) and hours.lr_boundaries[0] / 32 == 1905
    # measured on connect_four and go_9x9 only: elsewhere a clear error naming the game, not an unmeasured schedule
    with pytest.raises(ConfigError, match="'othello'"):
        preset("othello", "hours")


def test_go_9x9_hours_preset_is_the_small_recipe_with_planes_eye_rule_and_three_rates():
    small, hours = preset("go_9x9"), preset("go_9x9", "hours")
    hours.validate(num_devices=2)
    differ = {"liberty_planes", "eye_rule", "num_iterations", "learning_rates", "lr_boundaries", "eval_every"}
    assert {f.name for f in dataclasses.fields(small) if getattr(small, f.name) != getattr(hours, f.name)} == differ
    assert hours.liberty_planes and hours.eye_rule == "always" and hours.eval_every == 0
    # 1,400 iterations × 128 games × 16 plies × train_ratio 2 / batch 256 = 1,400 × 16 = 22,400 steps; the rate ×0.1
    # at 40% (8,960 = iteration 560) and 80% (17,920 = iteration 1,120)
    steps = hours.num_iterations * hours.selfplay_batch_size * hours.selfplay_steps * hours.train_ratio
    assert steps / hours.batch_size == 22_400 and hours.lr_boundaries == (8_960, 17_920)
    assert hours.learning_rates == (0.02, 0.002, 0.0002)


def test_unknown_preset_and_game_are_rejected():
    with pytest.raises(ConfigError, match="huge"):
        preset("chess", "huge")
    with pytest.raises(ConfigError, match="nope"):
        preset("nope")


def test_json_round_trip():
    config = override(
        preset("connect_four"), ["learning_rates=0.3,0.03,0.003", "lr_boundaries=10,20", "search=gumbel", "seed=7"]
    )
    again = from_json(config.to_json())
    assert again == config
    assert isinstance(again.learning_rates, tuple) and isinstance(again.lr_boundaries, tuple)
    assert from_json(Config().to_json()) == Config()
    with pytest.raises(ConfigError, match="JSON"):
        from_json("{not json")


def test_ints_are_bounded_to_int32_and_json_is_judged_the_same():
    assert override(Config(), ["seed=2147483647"]).seed == 2**31 - 1  # the largest int32
    assert override(Config(), ["seed=-2147483648"]).seed == -(2**31)
    assert override(Config(), ["num_blocks=1e5"]).num_blocks == 100_000  # an integral float is still accepted
    with pytest.raises(ConfigError, match="^num_blocks must be"):
        dataclasses.replace(preset("tic_tac_toe"), num_blocks=2**31).validate()
    with pytest.raises(ConfigError, match="^c_init must be a finite number"):
        from_json('{"c_init": NaN}')  # Python's json reads NaN and Infinity
    with pytest.raises(ConfigError, match="^num_blocks must be"):
        from_json('{"num_blocks": ' + "1" * 400 + "}")
    with pytest.raises(ConfigError, match="^config is not valid JSON"):
        from_json('{"num_blocks": ' + "9" * 5000 + "}")  # beyond Python's 4,300 digits for int()


def test_a_replay_window_shorter_than_a_game_is_warned_and_no_preset_has_one():
    from az_jax.core import validation

    # go_19x19 small: 131,072 rows / 128 slots = 1,024 plies a slot ≥ pgx's 722-ply cap, so no warning
    assert validation.warnings(preset("go_19x19", "small")) == []
    # 65,536 / 128 = 512 < 722: plies 513–722 of a game overwrite its first 210; 722 × 128 = 92,416 rows keep them
    (line,) = validation.warnings(override(preset("go_19x19", "small"), ["replay_capacity=65536"]))
    assert "keeps the last 512 plies of each of the 128" in line and "can last 722" in line and ">= 92416" in line
    # connect four's 42 plies: 5,376 / 128 = 42 is just enough, 5,375 / 128 = 41 (rounded down) is not
    four = preset("connect_four", "small")
    assert validation.warnings(override(four, ["replay_capacity=5376"])) == []
    assert len(validation.warnings(override(four, ["replay_capacity=5375"]))) == 1
    for game in envs.GAMES:
        for name in ("small", "paper", "alphago_zero", "small_agz"):
            assert validation.warnings(preset(game, name)) == [], (game, name)
