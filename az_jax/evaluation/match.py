"""A match between two players (az_jax/evaluation/players.py): W/D/L, score, Elo difference with its 95% interval,
and the games.

Two JAX players play batched on device, the games split over every device of the mesh (`play_jax_match`). When an
external engine takes part the games are played one at a time on the host (`play_host_match`): the JAX side runs its
jitted search on a batch of one, the engine sees every move through its protocol, every engine move is checked
against pgx's legal moves, and an engine failure (crash, hang, illegal move, malformed reply) stops the match with an
`EngineError` that names the game and ply — it is never counted as a result.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from az_jax.core import arena
from az_jax.core.devices import DEVICE_AXIS, device_key, first_index, make_mesh, sharded
from az_jax.engines import EngineError
from az_jax.evaluation import elo
from az_jax.evaluation.player_types import RESIGN, EnginePlayer, JaxPlayer, Player
from az_jax.runtime.files import append_jsonl
from envs import make_env


@dataclasses.dataclass(frozen=True)
class GameResult:
    """One finished game, host side."""

    actions: tuple[int, ...]  # pgx actions from the initial position
    a_first: bool  # player A made the first move
    result: float  # A's result: +1 win, 0 draw, −1 loss
    resigned: bool = False  # ended by an engine's resignation
    info: tuple = ()  # (key, value) pairs, e.g. an engine's own final score
    first_player: int = 0  # pgx player id of the first mover (for replaying the record exactly)

    def first_mover_result(self) -> float:
        return self.result if self.a_first else -self.result


@dataclasses.dataclass(frozen=True)
class MatchSummary:
    game: str
    player: str  # A
    opponent: str  # B
    wins: int  # A's
    draws: int
    losses: int
    elo: float  # A minus B
    elo_low: float  # 95% interval
    elo_high: float
    opening_plies: int
    seconds: float
    extra: tuple = ()  # (key, value) pairs

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / max(self.games, 1)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("extra")
        d.update(games=self.games, score=self.score, **dict(self.extra))
        return d

    def line(self) -> str:
        text = (
            f"{self.player} vs {self.opponent} ({self.game}, {self.games} games): +{self.wins} ={self.draws} "
            f"-{self.losses}, score {self.score:.3f}, Elo {self.elo:+.0f} [{self.elo_low:+.0f}, "
            f"{self.elo_high:+.0f}]"
        )
        extra = dict(self.extra)
        if extra.get("score_compared"):
            text += (
                f"; engine's final_score names pgx's winner in {extra['score_agreed']}/"
                f"{extra['score_compared']} scored games, {self.player}'s mean margin {extra['margin_mean']:+.1f}"
            )
        if extra.get("resigned"):
            text += f"; {extra['resigned']} ended by resignation"
        return text


def summarize(
    game: str,
    a: str,
    b: str,
    results: np.ndarray | Sequence[float],
    opening_plies: int,
    seconds: float,
    extra: dict | None = None,
) -> MatchSummary:
    results = np.asarray(results)
    wins, draws, losses = int((results > 0).sum()), int((results == 0).sum()), int((results < 0).sum())
    diff, (low, high) = elo.elo_difference(wins, draws, losses)
    return MatchSummary(
        game, a, b, wins, draws, losses, diff, low, high, opening_plies, seconds, tuple(sorted((extra or {}).items()))
    )


# --- JAX vs JAX, batched on device ------------------------------------------------------------------------------------
@functools.cache
def _compiled_match(game: str, apply_a, apply_b, chunk: int, devices: tuple, opening_plies: int):
    """The sharded program of `chunk` games split over `devices` (az_jax/core/devices.py); cached so that a ladder
    compiles once per pairing of player kinds, not once per checkpoint."""
    env, spec = make_env(game)
    local_games = chunk // len(devices)

    def local(variables_a, variables_b, key, start):
        a = functools.partial(apply_a, variables_a)
        b = functools.partial(apply_b, variables_b)
        return arena.play_games(
            env,
            a,
            b,
            device_key(key),
            local_games,
            spec.max_length,
            first_game=start + first_index(local_games),
            opening_plies=opening_plies,
        )

    return sharded(local, make_mesh(devices), (P(), P(), P(), P()), P(DEVICE_AXIS))


def play_jax_match(
    game: str,
    a: JaxPlayer,
    b: JaxPlayer,
    rng_key: jax.Array,
    num_games: int,
    *,
    opening_plies: int = 0,
    batch_size: int | None = None,
    devices=None,
) -> list[GameResult]:
    """`num_games` games, split over `devices` (default: all) in chunks of at most `batch_size` games."""
    devices = tuple(devices or jax.devices())
    chunk = min(batch_size or num_games, num_games)
    chunk = -(-chunk // len(devices)) * len(devices)  # a multiple of the devices
    run = _compiled_match(game, a.apply, b.apply, chunk, devices, opening_plies)
    replicated = jax.sharding.NamedSharding(make_mesh(devices), P())
    variables_a, variables_b = jax.device_put((a.variables, b.variables), replicated)  # weights on every device
    out: list[GameResult] = []
    for index, start in enumerate(range(0, num_games, chunk)):
        games = jax.device_get(run(variables_a, variables_b, jax.random.fold_in(rng_key, index), jnp.int32(start)))
        for i in range(min(chunk, num_games - start)):
            length = int(games.lengths[i])
            out.append(
                GameResult(
                    tuple(int(x) for x in games.actions[i, :length]),
                    bool(games.a_first[i]),
                    float(games.results[i]),
                    first_player=int(games.first_player[i]),
                )
            )
    return out


# --- with an engine, one game at a time on the host -------------------------------------------------------------------
@functools.cache
def _compiled_single(apply):
    return jax.jit(lambda v, s, k: apply(v, jax.tree.map(lambda x: x[None], s), k)[0])


def _host_fn(player: JaxPlayer):
    fn = _compiled_single(player.apply)
    return lambda state, key: int(fn(player.variables, state, key))


def play_host_match(
    game: str, a: Player, b: Player, rng_key: jax.Array, num_games: int, *, opening_plies: int = 0, on_game=None
) -> list[GameResult]:
    """Games one by one; `on_game(index, GameResult)` is called after each. Raises EngineError on an engine failure."""
    env, spec = make_env(game)
    init, step = jax.jit(env.init), jax.jit(env.step)
    players = (a, b)
    sessions: list = [None, None]
    fns = [_host_fn(p) if isinstance(p, JaxPlayer) else None for p in players]
    out: list[GameResult] = []
    try:
        for i, p in enumerate(players):
            if isinstance(p, EnginePlayer):
                sessions[i] = p.open()
        for g in range(num_games):
            game_key = jax.random.fold_in(rng_key, g)
            state = init(jax.random.fold_in(game_key, 0))
            a_first = g % 2 == 0
            first_player = int(state.current_player)
            a_id = first_player if a_first else 1 - first_player
            opening_rng = np.random.default_rng(
                [int(jax.random.randint(jax.random.fold_in(rng_key, 10**9), (), 0, 2**31 - 1)), g // 2]
            )
            for s in sessions:
                if s is not None:
                    s.new_game(state)
            actions, result, resigned = [], 0.0, False
            for ply in range(spec.max_length):
                if bool(state.terminated | state.truncated):
                    break
                mover = 0 if int(state.current_player) == a_id else 1
                legal = np.asarray(state.legal_action_mask)
                fn = fns[mover]
                if ply < opening_plies:
                    action = int(opening_rng.choice(np.flatnonzero(legal)))
                elif fn is not None:
                    action = fn(state, jax.random.fold_in(game_key, ply + 1))
                else:
                    try:
                        action = sessions[mover].genmove(state)
                    except EngineError as e:
                        raise EngineError(f"{players[mover].name}, game {g + 1} ply {ply + 1}: {e}") from e
                    if action == RESIGN:
                        result, resigned = (1.0 if mover == 1 else -1.0), True
                        break
                    if not 0 <= action < legal.shape[0] or not legal[action]:
                        raise EngineError(
                            f"{players[mover].name}, game {g + 1} ply {ply + 1}: illegal move (pgx action {action})"
                        )
                for i, s in enumerate(sessions):
                    if s is not None:
                        try:
                            s.observe(state, action, own=(i == mover) and ply >= opening_plies)
                        except EngineError as e:
                            raise EngineError(f"{players[i].name}, game {g + 1} ply {ply + 1}: {e}") from e
                actions.append(action)
                state = step(state, action)
                result += float(state.rewards[a_id])
            info = {}
            if not resigned and bool(state.terminated):
                for s in sessions:
                    if s is not None:
                        info.update({f"{k}": v for k, v in s.final_info(state).items()})
            game_result = GameResult(
                tuple(actions), a_first, result, resigned, tuple(sorted(info.items())), first_player
            )
            out.append(game_result)
            if on_game is not None:
                on_game(g, game_result)
    finally:
        for s in sessions:
            if s is not None:
                s.close()
    return out


def play(
    game: str,
    a: Player,
    b: Player,
    rng_key: jax.Array,
    num_games: int,
    *,
    opening_plies: int = 0,
    batch_size: int | None = None,
    on_game=None,
) -> list[GameResult]:
    """Batched on device for two JAX players, one game at a time on the host otherwise."""
    if isinstance(a, JaxPlayer) and isinstance(b, JaxPlayer):
        return play_jax_match(game, a, b, rng_key, num_games, opening_plies=opening_plies, batch_size=batch_size)
    return play_host_match(game, a, b, rng_key, num_games, opening_plies=opening_plies, on_game=on_game)


def engine_score_agreement(games: list[GameResult]) -> dict:
    """For Go games an engine scored: how often its final score names the same winner as pgx's Tromp-Taylor count,
    and player A's mean margin by that count (points, komi included; A is Black when it moved first), a measure that
    still moves when every game is lost."""
    compared = agree = 0
    margins = []
    for g in games:
        info = dict(g.info)
        if "engine_margin_black" in info and "pgx_margin_black" in info:
            compared += 1
            agree += int(np.sign(info["engine_margin_black"]) == np.sign(info["pgx_margin_black"]))
            margins.append(info["pgx_margin_black"] if g.a_first else -info["pgx_margin_black"])
    return {
        "score_agreement": agree / compared if compared else None,
        "score_compared": compared,
        "score_agreed": agree,
        "margin_mean": float(np.mean(margins)) if margins else None,
        "resigned": sum(g.resigned for g in games),
    }


def append_result(path: str, summary: MatchSummary, **fields) -> None:
    """Appends one JSON line (never rewrites earlier lines)."""
    append_jsonl(
        path, {"time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), **summary.to_json(), **fields}
    )
