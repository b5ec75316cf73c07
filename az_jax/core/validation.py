"""Checks a Config's values together before a run uses them (`Config.validate`): every number finite and in range,
the batch sizes split over the devices, the switches' parameters, the game's support for what is asked. Each failure
is one ConfigError naming the key and what is allowed.

It imports nothing of az_jax (config.py imports it): the config is checked by its fields' names and type hints.
"""

import math
import typing
from typing import TYPE_CHECKING, Any

from envs import GAMES, get_game

if TYPE_CHECKING:
    from az_jax.core.config import Config


class ConfigError(ValueError):
    """An unknown config key or an invalid value."""


# Every int key sizes an array, counts iterations or steps (int32 on device), or seeds a key: all fit in int32.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
EYE_RULES = ("off", "play", "always")  # Config.eye_rule
_INTEGERS = f"an integer in [{INT_MIN}, {INT_MAX}]"


def get_game_or_error(name: str):
    try:
        return get_game(name)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _show(value: Any, limit: int = 40) -> str:
    """repr(value), cut to `limit` characters so that an error about a 5,000-digit number stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 10]}… ({len(text)} characters)"


def check_search(key: str, value: str, search_methods: tuple[str, ...]) -> None:
    """ConfigError unless `value` names one of `search_methods` (eval_search may also be "": the search's)."""
    allowed = ("",) * (key == "eval_search") + search_methods
    if value not in allowed:
        shown = ", ".join(repr(a) if a == "" else a for a in allowed)
        raise ConfigError(f"{key} must be one of {shown}, got {_show(value)}")


def check(config: "Config", num_devices: int, search_methods: tuple[str, ...]) -> None:
    """Raises ConfigError on the first invalid value of `config` for a run on `num_devices` devices; `search_methods`:
    the names the search keys may take (az_jax/core/search.py's METHODS)."""
    get_game_or_error(config.game)
    _check_numbers(config)
    for key in ("search", "eval_search"):
        check_search(key, getattr(config, key), search_methods)
    positive = [
        "num_iterations",
        "num_blocks",
        "num_channels",
        "value_hidden",
        "value_head_filters",
        "policy_head_filters",
        "num_simulations",
        "selfplay_batch_size",
        "selfplay_steps",
        "replay_capacity",
        "batch_size",
        "checkpoint_every",
        "eval_games",
        "max_num_considered_actions",
    ]
    for key in positive:
        if getattr(config, key) <= 0:
            raise ConfigError(f"{key} must be a positive integer, got {getattr(config, key)}")
    for key in [
        "min_replay_size",
        "eval_every",
        "eval_simulations",
        "dirichlet_alpha",
        "keep_checkpoints",
        "global_pooling_every",
        "reanalyse_batches",
    ]:
        if getattr(config, key) < 0:
            raise ConfigError(f"{key} must be >= 0, got {getattr(config, key)}")
    if not config.gumbel_c_scale > 0:
        raise ConfigError(f"gumbel_c_scale must be > 0, got {config.gumbel_c_scale}")
    if not config.gumbel_c_visit >= 0:
        raise ConfigError(f"gumbel_c_visit must be >= 0, got {config.gumbel_c_visit}")
    if not 0.0 <= config.value_target_mix <= 1.0:
        raise ConfigError(f"value_target_mix must be in [0, 1], got {config.value_target_mix}")
    after = config.value_target_mix_after_rate_step
    if not (0.0 <= after <= 1.0 or after == -1.0):
        raise ConfigError(f"value_target_mix_after_rate_step must be in [0, 1] (or -1: unchanged), got {after}")
    if after != -1.0 and not config.lr_boundaries:
        raise ConfigError("value_target_mix_after_rate_step needs a rate step (lr_boundaries is empty)")
    if not 0.0 < config.full_search_fraction <= 1.0:
        raise ConfigError(f"full_search_fraction must be in (0, 1], got {config.full_search_fraction}")
    if config.full_search_fraction < 1.0 and not 0 < config.fast_simulations < config.num_simulations:
        raise ConfigError(
            f"fast_simulations must be in 1..num_simulations-1 ({config.num_simulations - 1}) when "
            f"full_search_fraction < 1, got {config.fast_simulations}"
        )
    if config.forced_playouts_k < 0 or (config.forced_playouts_k > 0 and config.search != "puct"):
        raise ConfigError(
            f"forced_playouts_k must be >= 0, and > 0 only with search=puct, got {config.forced_playouts_k} "
            f"with search={config.search}"
        )
    if config.full_search_fraction < 1.0 and config.resign:
        raise ConfigError("full_search_fraction < 1 (playout cap randomization) does not combine with resign")
    _check_aux_targets(config)
    if config.eye_rule not in EYE_RULES:
        raise ConfigError(f"eye_rule must be one of {', '.join(EYE_RULES)}, got {config.eye_rule!r}")
    if config.eye_rule != "off" and get_game(config.game).own_eyes is None:
        raise ConfigError(f"eye_rule={config.eye_rule} is for Go; {config.game} has no eyes")
    if config.liberty_planes and get_game(config.game).liberty_planes is None:
        raise ConfigError(f"liberty_planes is for Go; {config.game} has no liberties")
    if not 0.0 <= config.dirichlet_fraction <= 1.0:
        raise ConfigError(f"dirichlet_fraction must be in [0, 1], got {config.dirichlet_fraction}")
    if config.temperature_moves < -1:
        raise ConfigError(
            f"temperature_moves must be >= 0 (or -1 for the game's value), got {config.temperature_moves}"
        )
    if config.random_opening_plies < 0:
        raise ConfigError(f"random_opening_plies must be >= 0, got {config.random_opening_plies}")
    if config.random_opening_plies_after_rate_step < 0:
        raise ConfigError(
            f"random_opening_plies_after_rate_step must be >= 0, got {config.random_opening_plies_after_rate_step}"
        )
    if config.random_opening_plies_after_rate_step and not config.lr_boundaries:
        raise ConfigError("random_opening_plies_after_rate_step needs a rate step (lr_boundaries is empty)")
    if not 0.0 <= config.fork_fraction < 1.0:
        raise ConfigError(
            f"fork_fraction must be in [0, 1) (some games start from the initial position), got {config.fork_fraction}"
        )
    if config.mask_random_opening_values and not (
        config.random_opening_plies or config.random_opening_plies_after_rate_step
    ):
        raise ConfigError("mask_random_opening_values needs random openings (random_opening_plies is 0)")
    if config.train_ratio <= 0:
        raise ConfigError(f"train_ratio must be > 0, got {config.train_ratio}")
    if config.c_base <= 0 or config.c_init < 0:
        raise ConfigError(f"c_base must be > 0 and c_init >= 0, got c_base={config.c_base}, c_init={config.c_init}")
    if len(config.learning_rates) != len(config.lr_boundaries) + 1:
        raise ConfigError(
            f"learning_rates needs one value more than lr_boundaries, got {len(config.learning_rates)} "
            f"and {len(config.lr_boundaries)}"
        )
    if any(lr <= 0 for lr in config.learning_rates):
        raise ConfigError(f"learning_rates must be positive, got {config.learning_rates}")
    if list(config.lr_boundaries) != sorted(set(config.lr_boundaries)) or any(b <= 0 for b in config.lr_boundaries):
        raise ConfigError(f"lr_boundaries must be strictly increasing positive steps, got {config.lr_boundaries}")
    if not 0.0 <= config.momentum < 1.0 or config.weight_decay < 0:
        raise ConfigError("momentum must be in [0, 1) and weight_decay >= 0")
    for key in ["selfplay_batch_size", "batch_size", "replay_capacity", "eval_games"]:
        if getattr(config, key) % num_devices:
            raise ConfigError(f"{key}={getattr(config, key)} is not divisible by the {num_devices} devices")
    local_batch = config.batch_size // num_devices
    if config.micro_batches < 1 or local_batch % config.micro_batches:
        raise ConfigError(
            f"micro_batches={config.micro_batches} must be >= 1 and divide each device's {local_batch} positions "
            f"(batch_size={config.batch_size} over {num_devices} devices)"
        )
    local_games = config.selfplay_batch_size // num_devices
    if config.search_batch_size < 0 or (
        0 < config.search_batch_size < local_games and local_games % config.search_batch_size
    ):
        raise ConfigError(
            f"search_batch_size={config.search_batch_size} must be 0 (all at once) or divide each device's "
            f"{local_games} games (selfplay_batch_size={config.selfplay_batch_size} over {num_devices} devices)"
        )
    if config.reanalyse_batches * config.selfplay_batch_size > config.replay_capacity:
        raise ConfigError(
            f"reanalyse_batches={config.reanalyse_batches} re-searches {config.reanalyse_batches} × "
            f"{config.selfplay_batch_size} positions an iteration, more than the replay_capacity of "
            f"{config.replay_capacity}"
        )
    if config.compact_replay and not get_game(config.game).max_legal_actions:
        games = ", ".join(g for g, spec in GAMES.items() if spec.max_legal_actions)
        raise ConfigError(f"compact_replay needs a game whose legal moves are bounded below its actions: {games}")
    for key in ["augment_symmetries", "search_symmetries", "eval_symmetry_ensemble"]:
        if getattr(config, key) and not get_game(config.game).symmetries:
            raise ConfigError(
                f"{key} needs a game with board symmetries; {config.game} declares none "
                f"(games with some: {', '.join(g for g, s in GAMES.items() if s.symmetries)})"
            )
    _check_variant(config, num_devices)
    if config.eval_solver_simulations < 0:
        raise ConfigError(f"eval_solver_simulations must be >= 0, got {config.eval_solver_simulations}")
    if config.eval_solver_simulations and config.game != "connect_four":
        raise ConfigError(
            f"eval_solver_simulations: the solver set is connect four's; {config.game} has none (set it to 0)"
        )
    if config.min_replay_size > config.replay_capacity:
        raise ConfigError(
            f"min_replay_size ({config.min_replay_size}) must not exceed replay_capacity "
            f"({config.replay_capacity}): learning would never start"
        )
    if config.replay_capacity < config.batch_size:
        raise ConfigError(
            f"replay_capacity ({config.replay_capacity}) must be at least batch_size ({config.batch_size})"
        )
    if config.replay_capacity < config.selfplay_batch_size * config.selfplay_steps:
        raise ConfigError(
            f"replay_capacity ({config.replay_capacity}) must hold one iteration of self-play "
            f"(selfplay_batch_size × selfplay_steps = {config.selfplay_batch_size * config.selfplay_steps})"
        )


def warnings(config: "Config") -> list[str]:
    """Valid settings that silently lose something a run probably wants, one line each; `az-jax train` prints them.
    Not errors: the tests' tiny configs choose them on purpose.

    The replay buffer writes ply t of self-play slot b at row (t·B + b) mod N (az_jax/core/replay.py), so each slot
    keeps its last N // B plies: a game longer than that overwrites its own first plies before its outcome is known,
    and they are never trained."""
    kept = config.replay_capacity // config.selfplay_batch_size
    longest = get_game(config.game).max_length
    if kept >= longest:
        return []
    return [
        f"replay_capacity={config.replay_capacity} keeps the last {kept} plies of each of the "
        f"{config.selfplay_batch_size} self-play games (replay_capacity // selfplay_batch_size) and a {config.game} "
        f"game can last {longest}: a longer game's first plies are overwritten before it ends and never trained "
        f"(replay_capacity >= {longest * config.selfplay_batch_size} keeps them)"
    ]


def _check_numbers(config: "Config") -> None:
    """Every float (and float list) finite, every int (and int list) in int32. First, because NaN compares
    false: a range check such as `lr <= 0` lets it through."""
    for key, hint in typing.get_type_hints(type(config)).items():
        value = getattr(config, key)
        values = value if isinstance(value, tuple) else (value,)
        if float in (hint, *typing.get_args(hint)):
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
                raise ConfigError(f"{key} must be finite (no nan or inf), got {_show(value)}")
        elif int in (hint, *typing.get_args(hint)):
            if not all(isinstance(v, int) and INT_MIN <= v <= INT_MAX for v in values):
                raise ConfigError(f"{key} must be {_INTEGERS}, got {_show(value)}")


def _check_aux_targets(config: "Config") -> None:
    """KataGo's auxiliary targets: non-negative weights, > 0 only for a game that defines them (the score only for a
    game with a score: not connect four, whose final board is an ownership target alone). With resignation
    they are learnt from the games played to their end (a resigned game has no final position to own or score)."""
    owned = [g for g, s in GAMES.items() if s.final_targets]
    scored = [g for g in owned if GAMES[g].final_margin]
    for key, games in (("aux_ownership_weight", owned), ("aux_score_weight", scored)):
        weight = getattr(config, key)
        if weight < 0:
            raise ConfigError(f"{key} must be >= 0, got {weight}")
        if weight > 0 and get_game(config.game).final_targets is None:
            raise ConfigError(
                f"{key} needs a game that defines the final ownership and score; {config.game} does not "
                f"(games that do: {', '.join(games)})"
            )
    if config.aux_score_weight > 0 and not get_game(config.game).final_margin:
        raise ConfigError(
            f"aux_score_weight needs a game with a final score; {config.game} has none (its final board is "
            f"aux_ownership_weight's target; games with a score: {', '.join(scored)})"
        )


def _check_variant(config: "Config", num_devices: int) -> None:
    """The AlphaGo Zero switches' parameters: their ranges always, the split of gating games over the devices
    only with gating on."""
    if config.gating_every < 0 or config.gating_simulations < 0:
        raise ConfigError(
            f"gating_every and gating_simulations must be >= 0 (0: checkpoint_every / "
            f"num_simulations), got {config.gating_every} and {config.gating_simulations}"
        )
    if config.gating_games <= 0 or (config.gating and config.gating_games % (2 * num_devices)):
        raise ConfigError(
            f"gating_games={config.gating_games} must be a positive multiple of 2 × the {num_devices} "
            f"devices (each device plays whole pairs of games with colours swapped)"
        )
    if not 0.5 <= config.gating_threshold < 1.0:
        raise ConfigError(f"gating_threshold must be in [0.5, 1), got {config.gating_threshold}")
    if not 0.0 < config.resign_disabled_fraction < 1.0:
        raise ConfigError(
            f"resign_disabled_fraction must be in (0, 1): the played-out games calibrate v_resign, "
            f"got {config.resign_disabled_fraction}"
        )
    if not 0.0 < config.resign_target_false_positive < 1.0:
        raise ConfigError(f"resign_target_false_positive must be in (0, 1), got {config.resign_target_false_positive}")
    if not -1.0 <= config.v_resign_init <= 1.0:
        raise ConfigError(f"v_resign_init must be in [-1, 1] (values are), got {config.v_resign_init}")
    if config.resign_calibration_games <= 0:
        raise ConfigError(f"resign_calibration_games must be a positive integer, got {config.resign_calibration_games}")
