"""The GTP engine's game (mixed into GoEngine, az_jax/frontends/gtp_engine.py): the pgx Go env of the current komi,
the positions of the moves played (an inserted pass where a colour plays out of turn), their legality (superko) and
the Tromp-Taylor area score. gtp_engine.py's docstring states the decisions (komi, play out of turn, superko, the
game's end).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pgx
from pgx.go import Go

from az_jax.frontends import gtp_protocol as protocol
from az_jax.frontends.tree_search import TreeSearch
from envs.notation import go

KOMI_ENVS = 4  # komi values whose pgx env (and compiled search) are kept


@functools.cache
def _areas(size: int) -> Callable:
    """Jitted (Black's, White's) Tromp-Taylor area of a pgx Go game state: stones plus the empty points that reach
    only that colour (pgx's own count, envs.records.go_margin reads it too)."""
    from pgx._src.games.go import _count_scores  # local: private to pgx

    return jax.jit(lambda x: _count_scores(x, size))


class GoGame:
    """The game's positions and moves (a mixin of GoEngine, which sets these attributes)."""

    agent: Any  # an az_jax.runtime.agent.Agent of go_9x9 or go_19x19, or an AlphaGo agent (play_agent.PlayAgent)
    size: int
    komi: float
    trained_komi: float
    capacity: int | None
    chunk: int
    seed: int
    search: str
    leaves: int
    _envs: dict[float, tuple[pgx.Env, Callable, Callable, TreeSearch]]
    _moves: list[tuple[int, ...]]
    _states: list[pgx.State]
    _tree_actions: tuple[int, ...] | None

    def _env(self) -> tuple[pgx.Env, Callable, Callable, TreeSearch]:
        """(pgx env with the current komi, jitted init, jitted step, its TreeSearch), made once per komi."""
        if self.komi not in self._envs:
            if self.komi == self.trained_komi:
                env = self.agent.env
            else:
                base = self.agent.env._game
                env = Go(
                    size=self.size,
                    komi=self.komi,
                    history_length=base.history_length,
                    max_terminal_steps=base.max_termination_steps,
                )
            ts = TreeSearch(
                self.agent,
                env=env,
                capacity=self.capacity,
                chunk=self.chunk,
                seed=self.seed,
                search=self.search,
                leaves=self.leaves,
            )
            init = jax.jit(env.init)
            step = jax.jit(lambda state, action: env.step(state, action))
            if len(self._envs) >= KOMI_ENVS:
                del self._envs[next(iter(self._envs))]
            self._envs[self.komi] = (env, init, step, ts)
        return self._envs[self.komi]

    def _clear(self) -> None:
        """An empty board: the history is the start position alone."""
        self._replay([])

    def _replay(self, moves: list[tuple[int, ...]]) -> None:
        """The positions of `moves` from the start, with the current komi's env."""
        _, init, step, _ = self._env()
        states = [init(jax.random.key(0))]
        for actions in moves:
            for action in actions:
                states.append(step(states[-1], jnp.int32(action)))
            if not actions:  # a pass after the game's end: the position again (undo takes it off)
                states.append(states[-1])
        self._moves, self._states, self._tree_actions = list(moves), states, None

    @property
    def state(self) -> pgx.State:
        return self._states[-1]

    def _actions(self) -> tuple[int, ...]:
        return tuple(a for actions in self._moves for a in actions)

    def _over(self, state=None) -> bool:
        state = self.state if state is None else state
        return bool(state.terminated) or bool(state.truncated)

    def _to_move(self, state=None) -> int:
        """0 when Black is to move, 1 for White."""
        return int((self.state if state is None else state)._x.color)

    def _try(self, colour: int, action: int) -> list[pgx.State] | None:
        """The positions after `colour` plays `action` (a pass of the other colour inserted first if needed), or None
        if that is illegal: an occupied point, suicide, ko, superko, or an inserted pass that would end the game."""
        _, _, step, _ = self._env()
        states, state = [], self.state
        if self._to_move(state) != colour:
            state = step(state, jnp.int32(self.size * self.size))
            if self._over(state):
                return None
            states.append(state)
        if not bool(np.asarray(state.legal_action_mask)[action]):
            return None
        state = step(state, jnp.int32(action))
        if bool(state._x.is_psk):  # the move repeats a position (positional superko)
            return None
        return [*states, state]

    def _passed(self) -> pgx.State | None:
        """The position after the side to move passes (to let the other colour move), or None if that ends the game
        (a second pass in a row, or pgx's cap on the game's length)."""
        state = self._env()[2](self.state, jnp.int32(self.size * self.size))
        return None if self._over(state) else state

    def _commit(self, action: int, states: list[pgx.State]) -> None:
        actions = (self.size * self.size, action) if len(states) == 2 else (action,)
        self._moves.append(actions)
        self._states.extend(states)

    def _vertex(self, action: int) -> str:
        return go.action_to_vertex(action, self.size).upper() if action != self.size * self.size else go.PASS

    def _parse_vertex(self, text: str) -> int:
        if text.lower() == go.PASS:
            return self.size * self.size
        if not go.is_vertex(text):
            raise protocol.CommandError(f"syntax error: not a vertex: {protocol.quote(text)}")
        if not go.is_vertex(text, self.size):
            raise protocol.CommandError("illegal move")  # a vertex off this board
        return go.vertex_to_action(text, self.size)

    def _margin(self, state=None) -> float:
        """Black's Tromp-Taylor area minus White's minus komi."""
        state = self.state if state is None else state
        black, white = (int(x) for x in np.asarray(_areas(self.size)(state._x)))
        return black - white - self.komi
