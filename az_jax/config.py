"""The typed, closed training config and its presets (paper-spec.md §2–§3 and §11 for the numbers).

A Config is frozen: variants are derived with `override(config, ["key=value", ...])` or `dataclasses.replace`, never
edited. Unknown keys and invalid values raise ConfigError naming the key and what is allowed.
"""
import dataclasses
import json
import typing
from typing import Any, Literal

from envs import get_game


class ConfigError(ValueError):
    """An unknown config key or an invalid value."""


@dataclasses.dataclass(frozen=True)
class Config:
    # --- what and where ---------------------------------------------------------------------------------------------
    game: str = "connect_four"             # a name from envs.GAMES
    seed: int = 0                          # the one seed of the run; every key in the run derives from it
    num_iterations: int = 100              # iterations (S self-play plies + G gradient steps each) to train for
    # --- network (AlphaGo Zero §2.2 / AlphaZero §3.3) ----------------------------------------------------------------
    num_blocks: int = 19                   # residual blocks after the stem (paper: 19)
    num_channels: int = 256                # filters per 3×3 conv (paper: 256)
    value_hidden: int = 256                # units of the value head's hidden layer (paper: 256)
    compute_dtype: Literal["float32", "bfloat16"] = "float32"  # activations/matmuls; params stay float32
    # --- search (mctx) -----------------------------------------------------------------------------------------------
    search: Literal["puct", "gumbel"] = "puct"  # AlphaZero PUCT (mctx.muzero_policy) or Gumbel MuZero
    num_simulations: int = 800             # simulations per move in self-play (paper: 800)
    c_init: float = 1.25                   # C(s) = log((1 + N + c_base) / c_base) + c_init  (§3.2, §11)
    c_base: float = 19652.0
    dirichlet_alpha: float = 0.0           # root noise concentration; 0 means the game's value from envs/
    dirichlet_fraction: float = 0.25       # ε: P = (1 − ε) p + ε η at the root, self-play only (§2.4)
    temperature_moves: int = -1            # plies sampled ∝ visit counts, then greedy; -1 means the game's value
    max_num_considered_actions: int = 16   # Gumbel search only: actions kept by sequential halving
    # --- self-play ---------------------------------------------------------------------------------------------------
    selfplay_batch_size: int = 1024        # B: games played in parallel (global, split over devices)
    selfplay_steps: int = 32               # S: plies each game advances per iteration
    # --- replay ------------------------------------------------------------------------------------------------------
    replay_capacity: int = 1_000_000       # positions kept (global, split over devices); oldest overwritten first
    min_replay_size: int = 4096            # completed positions in the buffer before learning starts
    # --- learning (§2.1, §2.5, §3.5) ---------------------------------------------------------------------------------
    batch_size: int = 4096                 # global minibatch (paper: 4096)
    train_ratio: float = 1.0               # positions trained on per position generated (sets G, logged)
    learning_rates: tuple[float, ...] = (0.2, 0.02, 0.002, 0.0002)  # stepped schedule values …
    lr_boundaries: tuple[int, ...] = (100_000, 300_000, 500_000)    # … changing after these gradient steps
    momentum: float = 0.9
    weight_decay: float = 1e-4             # c in l = (z − v)² − πᵀ log p + c‖θ‖²
    # --- host loop ---------------------------------------------------------------------------------------------------
    checkpoint_every: int = 10             # iterations between checkpoints
    keep_checkpoints: int = 3              # the last K checkpoints are kept
    eval_every: int = 10                   # iterations between evaluations against uniform random (0: never)
    eval_games: int = 200                  # games per evaluation, colours alternating
    eval_simulations: int = 0              # simulations per move when evaluating; 0 means num_simulations

    # ---------------------------------------------------------------------------------------------------------------
    def validate(self, num_devices: int = 1) -> "Config":
        """Raises ConfigError on the first invalid value; returns self so calls chain."""
        get_game_or_error(self.game)
        positive = ["num_iterations", "num_blocks", "num_channels", "value_hidden", "num_simulations",
                    "selfplay_batch_size", "selfplay_steps", "replay_capacity", "batch_size", "checkpoint_every",
                    "keep_checkpoints", "eval_games", "max_num_considered_actions"]
        for key in positive:
            if getattr(self, key) <= 0:
                raise ConfigError(f"{key} must be a positive integer, got {getattr(self, key)}")
        for key in ["min_replay_size", "eval_every", "eval_simulations", "dirichlet_alpha"]:
            if getattr(self, key) < 0:
                raise ConfigError(f"{key} must be >= 0, got {getattr(self, key)}")
        if not 0.0 <= self.dirichlet_fraction <= 1.0:
            raise ConfigError(f"dirichlet_fraction must be in [0, 1], got {self.dirichlet_fraction}")
        if self.temperature_moves < -1:
            raise ConfigError(f"temperature_moves must be >= 0 (or -1 for the game's value), got {self.temperature_moves}")
        if self.train_ratio <= 0:
            raise ConfigError(f"train_ratio must be > 0, got {self.train_ratio}")
        if self.c_base <= 0 or self.c_init < 0:
            raise ConfigError(f"c_base must be > 0 and c_init >= 0, got c_base={self.c_base}, c_init={self.c_init}")
        if len(self.learning_rates) != len(self.lr_boundaries) + 1:
            raise ConfigError(f"learning_rates needs one value more than lr_boundaries, got {len(self.learning_rates)} "
                              f"and {len(self.lr_boundaries)}")
        if any(lr <= 0 for lr in self.learning_rates):
            raise ConfigError(f"learning_rates must be positive, got {self.learning_rates}")
        if list(self.lr_boundaries) != sorted(set(self.lr_boundaries)) or any(b <= 0 for b in self.lr_boundaries):
            raise ConfigError(f"lr_boundaries must be strictly increasing positive steps, got {self.lr_boundaries}")
        if not 0.0 <= self.momentum < 1.0 or self.weight_decay < 0:
            raise ConfigError(f"momentum must be in [0, 1) and weight_decay >= 0")
        for key in ["selfplay_batch_size", "batch_size", "replay_capacity", "eval_games"]:
            if getattr(self, key) % num_devices:
                raise ConfigError(f"{key}={getattr(self, key)} is not divisible by the {num_devices} devices")
        if self.min_replay_size > self.replay_capacity:
            raise ConfigError(f"min_replay_size ({self.min_replay_size}) must not exceed replay_capacity "
                              f"({self.replay_capacity}): learning would never start")
        if self.replay_capacity < self.batch_size:
            raise ConfigError(f"replay_capacity ({self.replay_capacity}) must be at least batch_size ({self.batch_size})")
        if self.replay_capacity < self.selfplay_batch_size * self.selfplay_steps:
            raise ConfigError(f"replay_capacity ({self.replay_capacity}) must hold one iteration of self-play "
                              f"(selfplay_batch_size × selfplay_steps = {self.selfplay_batch_size * self.selfplay_steps})")
        return self

    # --- values derived from the config and the game -------------------------------------------------------------
    @property
    def root_dirichlet_alpha(self) -> float:
        return self.dirichlet_alpha or get_game(self.game).dirichlet_alpha

    @property
    def sampling_moves(self) -> int:
        return get_game(self.game).temperature_moves if self.temperature_moves < 0 else self.temperature_moves

    @property
    def train_steps_per_iteration(self) -> int:
        """G = round(train_ratio × B × S / batch_size), at least 1."""
        generated = self.selfplay_batch_size * self.selfplay_steps
        return max(1, round(self.train_ratio * generated / self.batch_size))

    @property
    def positions_per_iteration(self) -> int:
        return self.selfplay_batch_size * self.selfplay_steps

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)


def get_game_or_error(name: str):
    try:
        return get_game(name)
    except ValueError as e:
        raise ConfigError(str(e)) from None


FIELDS = {f.name: f for f in dataclasses.fields(Config)}
_HINTS = typing.get_type_hints(Config)

# Keys that may change when a run is resumed; everything else is fixed by the checkpointed state's shapes or meaning.
RESUMABLE_KEYS = frozenset({"num_iterations", "checkpoint_every", "keep_checkpoints", "eval_every", "eval_games",
                            "eval_simulations"})


def _coerce(key: str, raw: Any) -> Any:
    """Converts `raw` (a string from the command line, or a JSON value) to the type of field `key`."""
    hint = _HINTS[key]
    origin = typing.get_origin(hint)
    try:
        if origin is Literal:
            allowed = typing.get_args(hint)
            if raw not in allowed:
                raise ConfigError(f"{key} must be one of {', '.join(map(str, allowed))}, got {raw!r}")
            return raw
        if origin is tuple:
            elem = typing.get_args(hint)[0]
            items = raw if isinstance(raw, (list, tuple)) else [x for x in str(raw).strip("()[] ").split(",") if x]
            return tuple(elem(float(x)) if elem is int and float(x).is_integer() else elem(x) for x in items)
        if hint is bool:
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("1", "true", "yes"):
                return True
            if str(raw).lower() in ("0", "false", "no"):
                return False
            raise ValueError(raw)
        if hint is int:
            value = float(raw) if isinstance(raw, str) else raw
            if isinstance(value, bool) or float(value) != int(float(value)):
                raise ValueError(raw)
            return int(float(value))
        if hint is float:
            return float(raw)
        return hint(raw)
    except ConfigError:
        raise
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be of type {getattr(hint, '__name__', hint)}, got {raw!r}") from None


def override(config: Config, assignments: list[str] | dict[str, Any]) -> Config:
    """Returns a new Config with `key=value` strings (or a dict) applied. Unknown keys raise ConfigError."""
    items = assignments.items() if isinstance(assignments, dict) else [_split(a) for a in assignments]
    changes = {}
    for key, raw in items:
        if key not in FIELDS:
            raise ConfigError(f"unknown config key {key!r}; known keys: {', '.join(FIELDS)}")
        changes[key] = _coerce(key, raw)
    return dataclasses.replace(config, **changes)


def _split(assignment: str) -> tuple[str, str]:
    if "=" not in assignment:
        raise ConfigError(f"expected key=value, got {assignment!r}")
    key, value = assignment.split("=", 1)
    return key.strip(), value.strip()


def from_json(text: str) -> Config:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"config is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError("config JSON must be an object")
    return override(Config(), data)


# --- presets ---------------------------------------------------------------------------------------------------------
PRESETS = ("small", "paper")


def _paper(game: str) -> Config:
    """The papers' full-scale settings (AlphaZero, paper-spec.md §3.5 and §11)."""
    lrs = (0.02, 0.002, 0.0002) if game.startswith("go_") else (0.2, 0.02, 0.002, 0.0002)
    bounds = (300_000, 500_000) if game.startswith("go_") else (100_000, 300_000, 500_000)
    # Paper: 700k steps of batch 4096 with 5,000 TPUs of self-play. The replay window is in games in the papers
    # (AGZ: 500k games, AZ pseudocode: 1M games); on one device we keep 1M positions.
    return Config(game=game, num_iterations=700_000 // 32, num_blocks=19, num_channels=256, num_simulations=800,
                  selfplay_batch_size=1024, selfplay_steps=32, replay_capacity=1_000_000, min_replay_size=65_536,
                  batch_size=4096, learning_rates=lrs, lr_boundaries=bounds)


def _small(game: str) -> Config:
    """A laptop-CPU / single-GPU scale: minutes for the small games on 2 cores. Not in the papers."""
    base = dict(game=game, num_blocks=2, num_channels=32, value_hidden=64, num_simulations=32,
                selfplay_batch_size=128, selfplay_steps=16, replay_capacity=65_536, min_replay_size=1024,
                # The paper's 0.2 is for minibatches of 4096; scaled linearly to 256 it is 0.0125. Measured on
                # connect_four (fixed buffer, 64 steps): value loss 0.17 at 0.02, stuck at 1.0 at 0.1 and 0.5.
                batch_size=256, train_ratio=2.0, learning_rates=(0.02, 0.002), lr_boundaries=(5000,),
                checkpoint_every=5, eval_every=5, eval_games=200, eval_simulations=32, num_iterations=60)
    per_game = {
        # 4 positions trained per position generated: with 1 the net saw too few gradient steps in 40 iterations
        # to stop losing to a perfect player as second mover (measured: 67 of 200 games lost; with 4: none).
        "tic_tac_toe": dict(num_simulations=32, selfplay_batch_size=128, selfplay_steps=9, num_iterations=40,
                            train_ratio=4.0, learning_rates=(0.1, 0.01), lr_boundaries=(3000,)),
        "connect_four": dict(num_blocks=3, num_channels=32, num_iterations=50, eval_every=10),
        "go_9x9": dict(num_blocks=4, num_channels=32, selfplay_steps=16, num_iterations=100),
    }
    return dataclasses.replace(Config(), **{**base, **per_game.get(game, {})})


def preset(game: str, name: str = "small") -> Config:
    get_game_or_error(game)
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    return _paper(game) if name == "paper" else _small(game)
