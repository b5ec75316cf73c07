"""Records replayed with pgx on the host, one jitted `env.step` per ply (compiled once per game and process)."""

from __future__ import annotations

import functools

import jax
import numpy as np

from envs import notation
from envs.records.record import GameRecord, RecordError
from envs.registry import GAMES
from envs.state import is_over


@functools.cache
def env_functions(game: str):
    """(env, jitted init, jitted step) for `game`, built once per process (use them to play games that will be
    recorded, and the replay does not compile again)."""
    env = GAMES[game].make()
    return env, jax.jit(env.init), jax.jit(env.step)


@functools.cache
def _init_key_seed(game: str, first_player: int) -> int:
    """The smallest s whose `env.init(jax.random.key(s))` gives `first_player` the first move. pgx draws that id with
    `bernoulli(key)` and nothing else in the initial state depends on the key, so this only selects the id; it is a
    deterministic search, not a source of randomness."""
    _, init, _ = env_functions(game)
    for seed in range(256):  # each seed fails with probability 1/2, so 256 misses never happen in practice
        if int(init(jax.random.key(seed)).current_player) == first_player:
            return seed
    raise RecordError(f"no init key gives player {first_player} the first move in {game}")  # pragma: no cover


def initial_state(game: str, first_player: int = 0):
    """pgx's initial state of `game` (unbatched) in which player id `first_player` moves first."""
    if game not in GAMES:
        raise RecordError(f"unknown game {game!r}; choose one of: {', '.join(GAMES)}")
    _, init, _ = env_functions(game)
    return init(jax.random.key(_init_key_seed(game, first_player)))


def step(game: str, state, action: int, ply: int):
    """The state after `action` (checked legal: RecordError naming the 1-based `ply` if not)."""
    _, _, step_fn = env_functions(game)
    if is_over(state):
        raise RecordError(f"ply {ply}: action {action} after the end of the game")
    legal = np.asarray(state.legal_action_mask)  # (not env.num_actions: pgx computes it with an eager init)
    if not 0 <= action < legal.shape[0]:
        raise RecordError(f"ply {ply}: action {action} out of range 0..{legal.shape[0] - 1} for {game}")
    if not bool(legal[action]):
        try:
            text = f" ({notation.format_move(game, state, action)})"
        except ValueError:
            text = ""
        raise RecordError(f"ply {ply}: illegal action {action}{text} in {game}")
    return step_fn(state, action)


def replay(record: GameRecord) -> list:
    """pgx states of the game: `states[k]` is the position after k plies (`states[0]` the initial one), so the list
    has len(actions) + 1 unbatched states. RecordError (naming the ply) on an illegal action."""
    states = [initial_state(record.game, record.first_player)]
    for ply, action in enumerate(record.actions, start=1):
        states.append(step(record.game, states[-1], action, ply))
    return states


def first_mover_result(state, first_player: int) -> float:
    """+1 / 0 / -1 for the first mover from a pgx state (0 while the game is not over)."""
    return float(np.asarray(state.rewards)[first_player]) if is_over(state) else 0.0


def go_margin(game: str, state) -> float:
    """Black's Tromp-Taylor area minus White's minus komi in a Go state (what pgx's rewards compare with 0); store it
    as meta "margin" to get RE[B+3.5] instead of RE[B+]."""
    from pgx._src.games.go import _count_scores  # local: private to pgx, and builds jax arrays at import

    env, _, _ = env_functions(game)
    scores = np.asarray(_count_scores(state._x, env._game.size))
    return float(scores[0] - env._game.komi - scores[1])
