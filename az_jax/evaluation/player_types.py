"""The two kinds of player a match takes (az_jax/evaluation/match.py): JAX players, pure batched functions that run
on the devices, and engine players, an external process per match; and the error of a spec that names neither
(az_jax/evaluation/players.py parses the specs)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Protocol

from az_jax.core import arena

RESIGN = -2  # what an engine session's genmove returns when the engine resigns


class PlayerSpecError(ValueError):
    """A player spec that cannot be parsed or does not fit the game."""


@dataclasses.dataclass(frozen=True, eq=False)
class JaxPlayer:
    """`apply(variables, states [B, ...], key) -> actions [B]`, pure and jittable. The weights are an argument, not a
    constant, so every checkpoint of a run shares one compiled match (`apply` is cached per config and budget)."""

    name: str
    apply: Callable
    variables: object = None  # the pytree `apply` takes (None for players without weights)
    step: int | None = None  # training iteration of the weights (run players)
    simulations: int = 0  # search simulations per move (0: no search)

    @property
    def fn(self) -> arena.PlayerFn:
        """`(states, key) -> actions` with the weights closed over (for code that takes plain player functions)."""
        return functools.partial(self.apply, self.variables)


class EngineSession(Protocol):
    """One external engine process, alive for a match. States are unbatched pgx states."""

    def new_game(self, state) -> None: ...
    def observe(self, state, action: int, own: bool) -> None: ...  # every move played (own: this engine's)
    def genmove(self, state) -> int: ...  # a pgx action, or RESIGN
    def final_info(self, state) -> dict: ...  # e.g. the engine's own score of the end
    def close(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class EnginePlayer:
    name: str
    open: Callable[[], EngineSession]


Player = JaxPlayer | EnginePlayer
