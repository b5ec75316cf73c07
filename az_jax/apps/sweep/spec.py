"""The sweep spec and its expansion into trials.

A spec (every key but "game" optional):

    {"name": "c4_simulations",                       # default sweep dir: runs/sweeps/<name>
     "game": "connect_four", "preset": "small",
     "set": ["num_iterations=20", "eval_games=100"],  # base overrides, as `--set` takes them
     "grid": {"num_simulations": [8, 16, 32, 64],     # every combination of the grid's axes ...
              "schedule": [{"label": "0.02", "learning_rates": [0.02], "lr_boundaries": []},
                           {"label": "0.02>0.002@160", "learning_rates": [0.02, 0.002], "lr_boundaries": [160]}]},
     "random": {"c_init": {"uniform": [0.5, 2.5]},    # ... times num_samples random draws (uniform, log_uniform,
                "weight_decay": {"log_uniform": [1e-5, 1e-3]}},   # int [lo, hi] inclusive, choice [values]) ...
     "num_samples": 4, "sample_seed": 0,
     "seeds": [0, 1]}                                  # ... times these seeds (default: the preset's one seed)

A grid axis named after a config key takes that key's values; an axis with another name ("schedule") takes objects
that set several keys at once (with an optional "label" for tables). Every trial's config is built and validated
before any process starts: a bad key or value is a ConfigError naming the trial.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from az_jax.core import config as config_lib
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.core.config import ConfigError

SPEC_KEYS = ("name", "description", "game", "preset", "set", "grid", "random", "num_samples", "sample_seed", "seeds")
DISTRIBUTIONS = ("uniform", "log_uniform", "int", "choice")


class SweepError(ConfigError):
    """A bad sweep spec, flag or sweep dir (one-line message)."""


@dataclasses.dataclass(frozen=True)
class Trial:
    index: int  # position in the sweep (grid-major, then samples, then seeds)
    name: str  # its run dir's name under the sweep dir
    params: dict  # {axis: value or label}: what varies across the sweep, seed included
    overrides: tuple[str, ...]  # `--set` strings after the spec's base `set` (what makes this trial this trial)
    config: config_lib.Config  # the resolved config the trial trains


@dataclasses.dataclass(frozen=True)
class Sweep:
    name: str
    game: str
    preset: str
    base: tuple[str, ...]  # the spec's `set` plus any extra `--set` of the command
    trials: tuple[Trial, ...]
    axes: tuple[str, ...]  # the params' keys, in column order (grid axes, random keys, "seed")


MAX_TRIALS = 100_000  # a spec expanding to more trials than this is a mistake


def load_spec(path: str) -> dict:
    """The JSON object in the file at `path`; SweepError (one line, naming the file) if it is not one."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        spec = json.loads(text)
    except OSError as e:
        raise SweepError(f"cannot read sweep spec {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SweepError(f"sweep spec {path} is not UTF-8 text (byte {e.start})") from None
    except (ValueError, RecursionError) as e:  # RecursionError: nested thousands deep
        raise SweepError(f"sweep spec {path} is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise SweepError(f"sweep spec {path} must be a JSON object")
    return spec


def _check_types(spec: dict) -> None:
    """SweepError naming the first top-level key of a spec whose value has the wrong type."""
    expected = {
        "name": (str, "a string"),
        "description": (str, "a string"),
        "game": (str, "a game name"),
        "preset": (str, "a preset name"),
        "set": (list, 'a list of "key=value" strings'),
        "grid": (dict, "an object of axes"),
        "random": (dict, "an object of distributions"),
        "num_samples": (int, "an integer"),
        "sample_seed": (int, "an integer"),
        "seeds": (list, "a list of integers"),
    }
    for key, (kind, what) in expected.items():
        if key in spec and (not isinstance(spec[key], kind) or isinstance(spec[key], bool)):
            raise SweepError(f"sweep spec: {key!r} must be {what}, got {json.dumps(spec[key])[:80]}")
    for key in ("num_samples", "sample_seed"):
        if not 0 <= spec.get(key, 0) <= MAX_TRIALS:
            raise SweepError(f"sweep spec: {key!r} must be from 0 to {MAX_TRIALS}, got {spec[key]}")


def cli_value(value: Any) -> str:
    """A config value as `--set key=VALUE` takes it: tuples joined with ',' (';' for strings), bools true/false."""
    if isinstance(value, (list, tuple)):
        return (";" if any(isinstance(v, str) for v in value) else ",").join(cli_value(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _label(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("label") or ";".join(f"{k}={cli_value(v)}" for k, v in value.items() if k != "label"))
    return cli_value(value)


def _axis_assignments(axis: str, value: Any) -> dict:
    """{config key: value} of one grid value: the axis itself, or the keys of an object value."""
    if isinstance(value, dict):
        assignments = {k: v for k, v in value.items() if k != "label"}
        if not assignments:
            raise SweepError(f"grid axis {axis!r}: an object value must set at least one config key")
        return assignments
    if axis not in config_lib.FIELDS:
        raise SweepError(
            f"grid axis {axis!r} is not a config key (its values must then be objects of config keys); "
            f"known keys: {', '.join(config_lib.FIELDS)}"
        )
    return {axis: value}


def _sample(key: str, dist: Any, rng: np.random.Generator) -> Any:
    if not (isinstance(dist, dict) and len(dist) == 1 and next(iter(dist)) in DISTRIBUTIONS):
        raise SweepError(
            f'random: {key!r} needs one of {", ".join(DISTRIBUTIONS)}, e.g. {{"uniform": [0.1, 1]}}; got {dist!r}'
        )
    kind, args = next(iter(dist.items()))
    if kind == "choice":
        if not isinstance(args, list) or not args:
            raise SweepError(f"random: {key!r} choice needs a non-empty list")
        return args[int(rng.integers(len(args)))]
    if not (
        isinstance(args, list)
        and len(args) == 2
        and all(isinstance(a, (int, float)) and not isinstance(a, bool) and math.isfinite(a) for a in args)
        and args[0] <= args[1]
    ):
        raise SweepError(f"random: {key!r} {kind} needs finite [low, high] with low <= high, got {args!r}")
    low, high = args
    if kind == "int":
        if max(abs(low), abs(high)) >= 2**53:
            raise SweepError(f"random: {key!r} int needs bounds below 2**53 in size, got {args!r}")
        return int(rng.integers(int(low), int(high) + 1))
    if kind == "log_uniform":
        if low <= 0:
            raise SweepError(f"random: {key!r} log_uniform needs low > 0, got {low}")
        return float(f"{math.exp(rng.uniform(math.log(low), math.log(high))):.4g}")
    return float(f"{rng.uniform(low, high):.4g}")


def _trial_name(index: int, params: dict) -> str:
    text = "_".join(f"{k}={v}" for k, v in params.items())
    return f"{index:03d}_" + re.sub(r"[^A-Za-z0-9._,=+-]+", "-", text)[:100]


def build_sweep(spec: dict, extra_set: Sequence[str] = (), num_devices: int = 1) -> Sweep:
    """Expands a spec into trials and checks every trial's config (validated for `num_devices` devices per trial).
    Raises SweepError / ConfigError (one line, naming the trial) before anything runs."""
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise SweepError(f"unknown sweep spec key {unknown[0]!r}; known: {', '.join(SPEC_KEYS)}")
    if "game" not in spec:
        raise SweepError('the sweep spec needs a "game"')
    _check_types(spec)
    game, preset = spec["game"], spec.get("preset", "small")
    base = list(spec.get("set", [])) + list(extra_set)
    if not all(isinstance(s, str) for s in base):
        raise SweepError('"set" must be a list of "key=value" strings')
    overridden = [s.partition("=")[0].strip() for s in base] + list(spec.get("grid", {})) + list(spec.get("random", {}))
    if "game" in overridden:
        raise SweepError('the sweep\'s game is its spec\'s "game", not a "set" item, grid axis or random key')
    base_config = overrides_lib.override(presets_lib.preset(game, preset), base)
    grid = spec.get("grid", {})
    random_keys = spec.get("random", {})
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise SweepError('"grid" must map each axis to a non-empty list of values')
    if not isinstance(random_keys, dict):
        raise SweepError('"random" must map config keys to distributions')
    for key in random_keys:
        if key not in config_lib.FIELDS:
            raise SweepError(f"random: {key!r} is not a config key; known keys: {', '.join(config_lib.FIELDS)}")
    num_samples = spec.get("num_samples", 1 if random_keys else 0)
    if random_keys and num_samples <= 0:
        raise SweepError('"num_samples" must be positive when "random" is given')
    seeds = spec.get("seeds", [base_config.seed])
    if not (isinstance(seeds, list) and seeds and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
        raise SweepError(f'"seeds" must be a non-empty list of integers, got {seeds!r}')
    if "seed" in grid or "seed" in random_keys:
        raise SweepError('sweep seeds with "seeds", not as a grid or random axis')

    count = math.prod(len(v) for v in grid.values()) * max(num_samples, 1) * len(seeds)
    if count > MAX_TRIALS:
        raise SweepError(f"the sweep spec makes {count} trials, more than {MAX_TRIALS}")
    rng = np.random.default_rng(spec.get("sample_seed", 0))
    samples = [{k: _sample(k, d, rng) for k, d in random_keys.items()} for _ in range(num_samples)] or [{}]
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())] if grid else [{}]
    trials: list[Trial] = []
    for point in points:
        for sample in samples:
            for seed in seeds:
                index = len(trials)
                params = {
                    **{a: _label(v) for a, v in point.items()},
                    **{k: cli_value(v) for k, v in sample.items()},
                    "seed": str(seed),
                }
                assignments = {}
                for axis, value in point.items():
                    assignments.update(_axis_assignments(axis, value))
                assignments.update(sample)
                assignments["seed"] = seed
                try:
                    config = overrides_lib.override(base_config, assignments).validate(num_devices)
                except ConfigError as e:
                    raise SweepError(
                        f"trial {index} ({', '.join(f'{k}={v}' for k, v in params.items())}): {e}"
                    ) from None
                overrides = tuple(f"{k}={cli_value(getattr(config, k))}" for k in assignments)
                # What the process will rebuild from the command line is exactly this config.
                assert overrides_lib.override(presets_lib.preset(game, preset), base + list(overrides)) == config
                trials.append(Trial(index, _trial_name(index, params), params, overrides, config))
    axes = tuple(trials[0].params)
    return Sweep(
        name=str(spec.get("name", game)), game=game, preset=preset, base=tuple(base), trials=tuple(trials), axes=axes
    )
