"""Presets of the whole AlphaGo pipeline (Silver et al., Nature 2016): every stage's settings and the agent's default
search, by name, for `az-jax alphago pipeline --preset NAME` (az_jax/alphago/pipeline.py).

    9x9-cpu   the 9×9 agent sized for a 2-core CPU: about 1¼ hours for every stage but the GNU Go games
    9x9       9×9 with the paper's batch of RL games and networks of its depth, for one GPU
    19x19     the paper's shapes (networks, batches, pool, search) on the ~131k positions of our professional corpus
    19x19-smoke  every 19×19 stage on a CPU in minutes (tiny networks, few steps and games): the path, not an agent

Each value says where it comes from: "paper" (Methods, Extended Data Tables 3 and 5) or "chosen". An agent directory
records the preset it was made with in DIR/preset.json (name, board size and the default search), which
`alphago:DIR` reads for its search defaults (az_jax/evaluation/players.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Sequence
from typing import Any

from az_jax.alphago.apv_mcts import APVConfig
from az_jax.alphago.pattern_training import TrainConfig
from az_jax.alphago.reinforce import RLConfig
from az_jax.alphago.supervised import SLConfig
from az_jax.alphago.value_training import ValueConfig

PRESET_FILE = "preset.json"  # in an agent directory, beside the stages' outputs (agent.LAYOUT)

# Passes over the training data in the paper, which the GPU presets keep on our (much smaller) data sets:
# SL (Methods, "Supervised learning of policy networks"): 340 M steps of m = 16 over the 28.4 M training positions
# (29.4 M KGS positions, the first 1 M held out): 340e6 · 16 / 28.4e6 ≈ 191.5 passes.
PAPER_SL_PASSES = 340e6 * 16 / 28.4e6
# Value network (Methods, "Reinforcement learning of value networks"): 50 M mini-batches of 32 over 30 M positions,
# one per self-play game: 50e6 · 32 / 30e6 ≈ 53.3 passes.
PAPER_VALUE_PASSES = 50e6 * 32 / 30e6
# Our data: 19×19, the professional games of corpus.default_sources (README): 611 games, 131,590 positions, of which
# 125,245 train. 9×9: 331 GNU Go games gave 15,235 training positions, ≈ 46 a game.
TRAIN_POSITIONS_19 = 125_245
TRAIN_POSITIONS_PER_9X9_GAME = 15_235 / 331
VALUE_TRAIN_FRACTION = 19 / 20  # value_data holds out one game in 20


def scaled_steps(train_positions: float, passes: float, batch_size: int) -> int:
    """The steps of `batch_size` that make `passes` passes over `train_positions` positions."""
    return round(train_positions * passes / batch_size)


class PresetError(Exception):
    """An agent directory's preset.json that cannot be read (one line, for the CLI and the player specs)."""


@dataclasses.dataclass(frozen=True)
class AlphaGoPreset:
    """Every stage's settings (the stage modules' own configs) and the agent's default search."""

    name: str
    size: int  # board size N (9 or 19)
    # expert games: 9×9, at least this many distinct GNU Go self-play games in gnugo_games.default_dir(9) (`az-jax
    # alphago games`; the data set holds every game there); 0 (19×19): the professional corpus (corpus.default_sources)
    expert_games: int
    expert_level: int  # GNU Go's level for those games
    sl: SLConfig  # p_σ (supervised.train)
    rollout: TrainConfig  # p_π and p_τ (pattern_training.train)
    rl: RLConfig  # p_ρ (reinforce.train)
    value_games: int  # games (= positions, one per game) of the value data set (value_data.build)
    value_batch: int  # games played at once; value_games is a multiple of it, so the file holds exactly value_games
    value: ValueConfig  # v_θ (value_training.train)
    search: APVConfig  # APV-MCTS as `alphago:DIR` plays by default (simulations, λ, c_puct, β)
    # > 0: p_σ's steps are this many passes over the training positions of the data actually given, sl.steps being
    # what they come to on our data; 0: sl.steps as they are (`sl_config`). The same for v_θ and its value data.
    sl_passes: float = 0.0
    value_passes: float = 0.0

    def __post_init__(self):
        checks = {
            "size": self.size in (9, 19),
            "expert_games": self.expert_games >= (1 if self.size == 9 else 0),  # no 9×9 corpus: GNU Go's games
            "expert_level": 0 <= self.expert_level <= 10,
            "sl": self.sl.size == self.size,
            "value": self.value.size == self.size,
            "value_batch": self.value_batch >= 1,
            "value_games": self.value_games >= 1 and self.value_games % self.value_batch == 0,
            "sl_passes": math.isfinite(self.sl_passes) and self.sl_passes >= 0,
            "value_passes": math.isfinite(self.value_passes) and self.value_passes >= 0,
        }
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"AlphaGoPreset {self.name!r}: invalid {bad[0]}={getattr(self, bad[0])!r}")

    def sl_config(self, train_positions: int) -> SLConfig:
        """p_σ's config for a data set of `train_positions` training positions: sl_passes passes over them when
        sl_passes > 0 (at least one step), else sl as it is."""
        if self.sl_passes == 0:
            return self.sl
        steps = max(1, scaled_steps(train_positions, self.sl_passes, self.sl.batch_size))
        return dataclasses.replace(self.sl, steps=steps)

    def value_config(self, train_positions: int) -> ValueConfig:
        """v_θ's config for `train_positions` training positions of value data (as `sl_config`)."""
        if self.value_passes == 0:
            return self.value
        steps = max(1, scaled_steps(train_positions, self.value_passes, self.value.batch_size))
        return dataclasses.replace(self.value, steps=steps)

    def saved(self) -> dict:
        """What DIR/preset.json holds: the name, the board size and the default search."""
        return {"name": self.name, "size": self.size, "search": dataclasses.asdict(self.search)}


# The rollout policy of every preset: `az-jax alphago rollout`'s defaults (chosen; they made runs/alphago/ag9's p_π,
# 24.1% held-out accuracy on 9×9, and rollout19.npz's 22.5% on 19×19, against the paper's 24.2% on Tygem data).
ROLLOUT = TrainConfig(steps=6000, batch_size=256, learning_rate=2.0, min_count=2)

# --- 9x9-cpu ---------------------------------------------------------------------------------------------------------
# What runs/alphago/ag9 ran, stretched to a whole pipeline on 2 CPU cores. Budget, at the rates measured here (2-core
# VM, shared with another job while measured):
#   SL      3,000 steps × 64 = 192k positions at 800–900 positions/s (sl9-k32)           ≈  4 min
#   p_π     6,000 steps on 15k positions (3 s encoding, 10 s SGD)                        ≈  0.5 min
#   RL      100 iterations × 16 games = 1,600 games at 1.3–2.5 games/s, and 4 evaluations
#           of 32 games against p_σ (128 more)                                           ≈ 12–22 min
#   value data  8,192 games, one position each, at 4.7–7.5 positions/s                   ≈ 18–29 min
#   v_θ     6,000 steps × 64 = 384k positions at ~700–1,000 positions/s (a 6-layer k = 32 tower is lighter
#           than p_σ's 8 layers; the k = 16, 4-layer v_θ ran at 700–2,100)               ≈  6–9 min
#   compiling each stage's programs                                                       ≈  5 min
# in all ≈ 45–70 min of computing, about 1¼ hours; under 2 hours on a machine another job shares. GNU Go's games are
# not counted: 331 games at ~13 s a game on one core take ~36 min on 2 cores (once; they are cached).
CPU_9X9 = AlphaGoPreset(
    name="9x9-cpu",
    size=9,
    expert_games=331,  # chosen: the games the 9×9 figures in README were measured on
    expert_level=10,  # chosen (gnugo_games' default: its strongest level)
    sl=SLConfig(
        size=9,
        filters=32,  # chosen (sl9-k32; paper: k = 192)
        layers=8,  # chosen (paper: 13)
        planes=48,  # paper (Extended Data Table 2)
        batch_size=64,  # chosen (paper: m = 16)
        learning_rate=0.012,  # paper's α = 0.003 at m = 16, scaled linearly to m = 64 (chosen)
        steps=3000,  # chosen (sl9-k32: 28.5% held-out accuracy), ≈ 12.6 passes over 15,235 positions
        eval_every=500,
        checkpoint_every=1000,
    ),
    rollout=ROLLOUT,
    rl=RLConfig(
        games=16,  # chosen (ag9; paper: n = 128)
        iterations=100,  # chosen (paper: 10,000)
        learning_rate=1e-4,  # chosen (reinforce.py's default: the paper gives no α)
        pool_every=25,  # chosen (paper: 500 of 10,000 iterations); the pool ends with 5 members
        checkpoint_every=25,  # chosen
        eval_every=25,  # chosen
        eval_games=32,  # chosen
    ),
    value_games=8192,  # chosen (paper: 30 M); 32 batches
    value_batch=256,  # chosen
    value=ValueConfig(
        size=9,
        filters=32,  # chosen (paper: 192)
        layers=6,  # chosen (paper: 13)
        hidden=64,  # chosen (paper: 256)
        batch_size=64,  # chosen (paper: m = 32)
        learning_rate=0.006,  # chosen: value_training's α = 0.003 at m = 32, scaled linearly to m = 64
        steps=6000,  # chosen, ≈ 49 passes over the 7,782 training positions (paper: ≈ 53)
        eval_every=500,
        checkpoint_every=1000,
    ),
    search=APVConfig(
        simulations=32,  # chosen (a 9×9 move at λ = 0.5 takes ~3 s for 8 games on this CPU)
        lam=0.5,  # paper (Extended Data Table 5)
        c_puct=5.0,  # paper (Extended Data Table 5)
        beta=0.67,  # paper (Extended Data Table 5)
    ),
)

# --- 9x9 (one GPU) ---------------------------------------------------------------------------------------------------
GAMES_9X9 = 2000  # chosen: GNU Go games (~13 s a game on one core: ~30 min on 16 cores); ≈ 92k training positions
VALUE_GAMES_9X9 = 100_000  # chosen (paper: 30 M)
GPU_9X9 = AlphaGoPreset(
    name="9x9",
    size=9,
    expert_games=GAMES_9X9,
    expert_level=10,  # chosen
    sl=SLConfig(
        size=9,
        filters=128,  # chosen (paper: 192; Extended Data Table 3 also trains k = 128)
        layers=13,  # paper
        planes=48,  # paper
        batch_size=64,  # chosen (paper: m = 16)
        learning_rate=0.012,  # paper's α = 0.003 at m = 16, scaled linearly to m = 64 (chosen)
        # the paper's ≈ 191.5 passes over ≈ 2,000 × 46 positions at m = 64: ≈ 275k steps
        steps=scaled_steps(GAMES_9X9 * TRAIN_POSITIONS_PER_9X9_GAME, PAPER_SL_PASSES, 64),
        eval_every=5000,
        checkpoint_every=5000,
    ),
    rollout=ROLLOUT,
    rl=RLConfig(
        games=128,  # paper (n = 128)
        iterations=2000,  # chosen (paper: 10,000)
        learning_rate=1e-4,  # chosen (the paper gives no α)
        pool_every=100,  # chosen: the pool ends with 21 members, as the paper's 10,000 / 500 + 1
        checkpoint_every=100,
        eval_every=100,
        eval_games=128,
    ),
    value_games=VALUE_GAMES_9X9,
    value_batch=1000,  # chosen
    value=ValueConfig(
        size=9,
        filters=128,  # chosen (as p_σ)
        layers=13,  # paper
        hidden=256,  # paper
        batch_size=32,  # paper (m = 32)
        learning_rate=0.003,  # chosen (the paper gives no α for v_θ: the SL network's)
        # the paper's ≈ 53.3 passes over the 95,000 training positions at m = 32: ≈ 158k steps
        steps=scaled_steps(VALUE_GAMES_9X9 * VALUE_TRAIN_FRACTION, PAPER_VALUE_PASSES, 32),
        eval_every=5000,
        checkpoint_every=5000,
    ),
    search=APVConfig(simulations=400, lam=0.5, c_puct=5.0, beta=0.67),  # 400: chosen; λ, c_puct, β: paper
    sl_passes=PAPER_SL_PASSES,  # the paper's passes over whatever data is given (sl.steps: over ours)
    value_passes=PAPER_VALUE_PASSES,
)

# --- 19x19 (the paper's shapes) --------------------------------------------------------------------------------------
VALUE_GAMES_19 = 1_024_000  # chosen: ~1/30 of the paper's 30 M; 1,024 batches of 1,000
PAPER_19X19 = AlphaGoPreset(
    name="19x19",
    size=19,
    expert_games=0,  # the professional corpus (paper: 160,000 KGS games of 6–9 dan players; there is no KGS here)
    expert_level=10,  # unused on 19×19
    sl=SLConfig(
        size=19,
        filters=192,  # paper (k = 192, the match version)
        layers=13,  # paper
        planes=48,  # paper
        batch_size=16,  # paper (m = 16)
        learning_rate=0.003,  # paper (α = 0.003, halved every 80/340 of the steps: SLConfig's default)
        # the paper's ≈ 191.5 passes over our 125,245 training positions at m = 16: 1,499,412 steps (the paper's
        # 340 M steps × 125,245 / 28.4 M)
        steps=scaled_steps(TRAIN_POSITIONS_19, PAPER_SL_PASSES, 16),
        eval_every=10_000,
        checkpoint_every=10_000,
    ),
    rollout=ROLLOUT,
    rl=RLConfig(
        games=128,  # paper (n = 128)
        iterations=10_000,  # paper
        learning_rate=1e-4,  # chosen (the paper gives no α)
        pool_every=500,  # paper
        checkpoint_every=100,
        eval_every=500,
        eval_games=128,
    ),
    value_games=VALUE_GAMES_19,
    value_batch=1000,  # chosen
    value=ValueConfig(
        size=19,
        filters=192,  # paper
        layers=13,  # paper
        hidden=256,  # paper
        batch_size=32,  # paper (m = 32)
        learning_rate=0.003,  # chosen (the paper gives no α for v_θ: the SL network's)
        # the paper's ≈ 53.3 passes over 972,800 training positions at m = 32: 1,621,333 steps
        steps=scaled_steps(VALUE_GAMES_19 * VALUE_TRAIN_FRACTION, PAPER_VALUE_PASSES, 32),
        eval_every=10_000,
        checkpoint_every=10_000,
    ),
    # 400 simulations: chosen (the paper searched for a time, not a count; each simulation's p_π rollout to the end
    # of a 19×19 game is a sequential loop of ~300 plies here); λ = 0.5, c_puct = 5, β = 0.67: paper
    search=APVConfig(simulations=400, lam=0.5, c_puct=5.0, beta=0.67),
    sl_passes=PAPER_SL_PASSES,  # the paper's passes over whatever data is given (sl.steps: over ours)
    value_passes=PAPER_VALUE_PASSES,
)

# --- 19x19-smoke -----------------------------------------------------------------------------------------------------
# Every stage of the 19×19 pipeline on a CPU in minutes: the professional corpus, then networks of 2 layers of 8
# filters, a few steps and games each (all chosen). A check that the whole 19×19 path runs and resumes, not an agent.
SMOKE_19X19 = AlphaGoPreset(
    name="19x19-smoke",
    size=19,
    expert_games=0,  # the professional corpus, as `19x19`
    expert_level=10,  # unused on 19×19
    sl=SLConfig(
        size=19, filters=8, layers=2, batch_size=16, learning_rate=0.003, steps=40, eval_every=20, checkpoint_every=20
    ),
    rollout=TrainConfig(steps=50, batch_size=64, learning_rate=2.0, min_count=2, max_train=2000, max_test=500),
    rl=RLConfig(games=4, iterations=2, pool_every=1, checkpoint_every=1, eval_every=2, eval_games=4),
    value_games=40,  # one game in 20 is held out (value_data.py): 2 here
    value_batch=20,
    value=ValueConfig(
        size=19, filters=8, layers=2, hidden=16, batch_size=4, steps=60, eval_every=20, checkpoint_every=20
    ),
    search=APVConfig(simulations=8, lam=0.5, c_puct=5.0, beta=0.67, rollout_max_moves=100),
)

PRESETS: dict[str, AlphaGoPreset] = {p.name: p for p in (CPU_9X9, GPU_9X9, PAPER_19X19, SMOKE_19X19)}


STAGE_KEYS = ("sl", "rollout", "rl", "value", "search")  # the nested configs `override` reaches as STAGE.key
_FIXED = ("name", "size", *STAGE_KEYS)  # top-level fields no assignment may set (size: every stage's must agree)


_EXPECTED = {bool: "true or false", int: "an integer", float: "a number", str: "text"}


def _parse(text: str, current: Any, where: str) -> Any:
    """`text` as a value of `current`'s type (bool, int, float or str); PresetError (one line) if it is not one."""
    try:
        if isinstance(current, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        return type(current)(text)
    except ValueError:
        raise PresetError(f"--set {where}={text}: expected {_EXPECTED[type(current)]}") from None


def override(preset: AlphaGoPreset, assignments: Sequence[str]) -> AlphaGoPreset:
    """`preset` with each assignment applied: "STAGE.key=value" for a stage's config (STAGE one of STAGE_KEYS: sl,
    rollout, rl, value, search) or "key=value" for the preset's own (value_games, value_batch, expert_games,
    expert_level, sl_passes, value_passes); each value is parsed as the field's type and checked by its config.
    PresetError (one line) for a malformed assignment, an unknown stage or key, or a value its config refuses. The
    preset keeps its name: a directory made with overrides must be run with the same ones (each stage refuses another
    config)."""
    for text in assignments:
        key, sep, value = text.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts) or len(parts) > 2:
            raise PresetError(f"--set {text!r}: expected STAGE.key=value or key=value")
        if len(parts) == 2 and parts[0] not in STAGE_KEYS:
            raise PresetError(f"--set {key}: unknown stage {parts[0]!r}; the stages are {', '.join(STAGE_KEYS)}")
        target = getattr(preset, parts[0]) if len(parts) == 2 else preset
        names = [f.name for f in dataclasses.fields(target) if len(parts) == 2 or f.name not in _FIXED]
        if parts[-1] not in names or (len(parts) == 2 and parts[-1] == "size"):
            known = ", ".join(n for n in names if not (len(parts) == 2 and n == "size"))
            raise PresetError(f"--set {key}: unknown key; {parts[0] if len(parts) == 2 else 'the preset'} has {known}")
        try:
            field: dict[str, Any] = {parts[-1]: _parse(value.strip(), getattr(target, parts[-1]), key)}
            changed = dataclasses.replace(target, **field)
            stage: dict[str, Any] = {parts[0]: changed}
            preset = dataclasses.replace(preset, **stage) if len(parts) == 2 else changed
            if tuple(parts) in (("sl", "steps"), ("value", "steps")):  # steps given: they, not the passes, decide
                passes: dict[str, Any] = {f"{parts[0]}_passes": 0.0}
                preset = dataclasses.replace(preset, **passes)
        except (TypeError, ValueError) as e:
            raise PresetError(f"--set {key}={value.strip()}: {_one_line(e)}") from None
    return preset


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def read_saved(directory: str | os.PathLike) -> dict | None:
    """DIR/preset.json ({"name", "size", "search"}), or None when there is none; PresetError (one line) when it
    cannot be read or is not one (its search settings included)."""
    path = os.path.join(directory, PRESET_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as e:
        raise PresetError(f"{path} cannot be read ({_one_line(e)})") from None
    if not (
        isinstance(saved, dict)
        and isinstance(saved.get("name"), str)
        and saved.get("size") in (9, 19)
        and isinstance(saved.get("search"), dict)
    ):
        raise PresetError(f"{path} is not an AlphaGo preset file (name, size and search expected)")
    try:
        APVConfig(**saved["search"])
    except (TypeError, ValueError) as e:
        raise PresetError(f"{path}: bad search settings ({_one_line(e)})") from None
    return saved


def saved_search(directory: str | os.PathLike) -> APVConfig | None:
    """The default search DIR/preset.json names, or None when there is no preset.json; PresetError (one line) when
    it cannot be read."""
    saved = read_saved(directory)
    return None if saved is None else APVConfig(**saved["search"])
