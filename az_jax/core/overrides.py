"""A Config from the command line's `--set key=value` strings, a dict of them, or a run's config.json: every value
coerced to its key's type, unknown keys and invalid values a ConfigError naming the key and what is allowed.

    override(config, ["num_simulations=64", "learning_rates=0.1,0.01"]) -> Config    # or a dict {key: value}
    from_json(text) -> Config                                                          # config.json (Config.to_json)
"""

import dataclasses
import json
import math
import typing
from typing import Any, Literal

from az_jax.core import search as search_lib
from az_jax.core.config import _HINTS, FIELDS, VARIANT_SWITCHES, Config, variant_switches
from az_jax.core.validation import _INTEGERS, INT_MAX, INT_MIN, ConfigError, _show, check_search


def _to_int(raw: Any) -> int:
    """`raw` (an int, an integral float, or a string of either: "3", "1e5") as an int in int32; ValueError for
    anything else, including nan, inf ("1e5000" parses to inf) and integers beyond int32."""
    if isinstance(raw, bool):
        raise ValueError(raw)
    if isinstance(raw, str):
        try:
            raw = int(raw)  # exact; ValueError for "1e5", "inf" and beyond 4,300 digits
        except ValueError:
            raw = float(raw)
    if isinstance(raw, float):
        if not raw.is_integer():  # False for nan and ±inf
            raise ValueError(raw)
        raw = int(raw)
    if not isinstance(raw, int) or not INT_MIN <= raw <= INT_MAX:
        raise ValueError(raw)
    return raw


def _to_float(raw: Any) -> float:
    """`raw` (a number or a string of one) as a finite float; ValueError for nan, ±inf and numbers beyond float64."""
    if isinstance(raw, bool):
        raise ValueError(raw)
    value = float(raw)  # OverflowError for an int beyond float64
    if not math.isfinite(value):
        raise ValueError(raw)
    return value


def _coerce(key: str, raw: Any) -> Any:
    """Converts `raw` (a string from the command line, or a JSON value) to the type of field `key`."""
    hint = _HINTS[key]
    origin = typing.get_origin(hint)
    expected = {int: _INTEGERS, float: "a finite number", str: "a string"}
    try:
        if origin is Literal:
            allowed = typing.get_args(hint)
            if not isinstance(raw, str) or raw not in allowed:
                raise ConfigError(f"{key} must be one of {', '.join(map(str, allowed))}, got {_show(raw)}")
            return raw
        if origin is tuple:
            elem = typing.get_args(hint)[0]
            separator = ";" if elem is str else ","  # player specs contain commas (mcts:sims=200,c=1)
            items = (
                raw
                if isinstance(raw, (list, tuple))
                else [x.strip() for x in str(raw).strip("()[] ").split(separator) if x.strip()]
            )
            convert = {int: _to_int, float: _to_float}.get(elem, elem)
            try:
                return tuple(convert(x) for x in items)
            except (TypeError, ValueError, OverflowError):
                plural = {int: f"integers in [{INT_MIN}, {INT_MAX}]", float: "finite numbers"}.get(elem, "strings")
                raise ConfigError(f"{key} must be a list of {plural}, got {_show(raw)}") from None
        if hint is bool:
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("1", "true", "yes"):
                return True
            if str(raw).lower() in ("0", "false", "no"):
                return False
            raise ValueError(raw)
        if hint is int:
            return _to_int(raw)
        if hint is float:
            return _to_float(raw)
        return hint(raw)
    except ConfigError:
        raise
    except (TypeError, ValueError, OverflowError):
        shown = expected.get(hint, f"of type {getattr(hint, '__name__', hint)}")
        raise ConfigError(f"{key} must be {shown}, got {_show(raw)}") from None


SEARCH_KEYS = ("search", "eval_search")


def override(config: Config, assignments: list[str] | dict[str, Any]) -> Config:
    """Returns a new Config with `key=value` strings (or a dict) applied. Unknown keys raise ConfigError."""
    items = assignments.items() if isinstance(assignments, dict) else [_split(a) for a in assignments]
    changes: dict[str, Any] = {}
    for key, raw in items:
        if key not in FIELDS:
            raise ConfigError(f"unknown config key {_show(key)}; known keys: {', '.join(FIELDS)}")
        value = _coerce(key, raw)
        if key in SEARCH_KEYS:  # a registered search method's name, checked as it is given (and by validate)
            check_search(key, value, tuple(search_lib.METHODS))
        if key in ("variant", *VARIANT_SWITCHES) and changes.get(key, value) != value:
            raise ConfigError(f"{key} is given twice with contradictory values: {changes[key]!r} and {value!r}")
        changes[key] = value
    if "variant" in changes:  # the variant's switch values, then the switches given explicitly alongside it
        changes = {**variant_switches(changes["variant"], changes.get("game", config.game)), **changes}
    return dataclasses.replace(config, **changes)


def _split(assignment: str) -> tuple[str, str]:
    if "=" not in assignment:
        raise ConfigError(f"expected key=value, got {_show(assignment)}")
    key, value = assignment.split("=", 1)
    return key.strip(), value.strip()


def from_json(text: str) -> Config:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, an integer beyond 4,300 digits, deep nesting
        raise ConfigError(f"config is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError("config JSON must be an object")
    return override(Config(), data)
