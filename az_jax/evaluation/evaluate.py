"""`az-jax eval`: a trained run against any player spec; the result is appended to RUN_DIR/eval/results.jsonl and the
games are written to RUN_DIR/eval/games/<match>/ (SGF for Go, PGN for chess, JSON for the rest)."""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import time

import jax

from az_jax.core import overrides as overrides_lib
from az_jax.core import search as search_lib
from az_jax.core import validation
from az_jax.core.config import FIELDS, ConfigError, get_game_or_error
from az_jax.core.play_keys import PLAY_KEYS
from az_jax.engines import EngineError
from az_jax.evaluation import match as match_lib
from az_jax.evaluation import players as players_lib
from az_jax.runtime import agent_file
from az_jax.runtime.agent import load_agent, resolve
from envs import get_game, records


def results_path(run_dir: str) -> str:
    return os.path.join(run_dir, "eval", "results.jsonl")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9@._-]+", "_", text).strip("_")[:60]


def write_games(directory: str, game: str, a: str, b: str, games: list[match_lib.GameResult]) -> int:
    """One record file per game (envs/records/ picks the format); returns how many were written."""
    os.makedirs(directory, exist_ok=True)
    for i, g in enumerate(games):
        first, second = (a, b) if g.a_first else (b, a)
        meta = tuple(sorted((str(k), str(v)) for k, v in g.info + ((("resigned", "true"),) if g.resigned else ())))
        record = records.GameRecord(
            game=game,
            actions=g.actions,
            result=g.first_mover_result(),
            players=(first, second),
            first_player=g.first_player,
            meta=meta,
        )
        records.write_record(os.path.join(directory, f"game-{i + 1:04d}"), record)
    return len(games)


def with_play_settings(agent, play: tuple[str, ...]):
    """The agent with KEY=VALUE settings of `PLAY_KEYS` applied to its config, validated; ConfigError on another key
    or a bad value."""
    if not play:
        return agent
    config = overrides_lib.override(agent.config, list(play))  # an unknown key or a bad value: ConfigError
    other = [k for k in FIELDS if k not in PLAY_KEYS and getattr(config, k) != getattr(agent.config, k)]
    if other:
        raise ConfigError(f"--set takes the keys of greedy play only ({', '.join(PLAY_KEYS)}), not {other[0]!r}")
    validation.check(config, 1, tuple(search_lib.METHODS))
    return dataclasses.replace(agent, config=config)


def evaluate(
    run_dir: str | None,
    opponent: str,
    *,
    games: int,
    step: int | None = None,
    simulations: int | None = None,
    opening_plies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    save_games: bool = True,
    player: str | None = None,
    game: str | None = None,
    out_dir: str | None = None,
    weights: str = "best",
    play: tuple[str, ...] = (),
    log=print,
) -> match_lib.MatchSummary:
    """Plays the run's agent (or, with `player` and `game`, any player spec) against `opponent`; appends the summary
    to the results file (RUN_DIR/eval/results.jsonl, or OUT_DIR/results.jsonl for a spec player). An engine failure
    is appended too (with its error) and then re-raised. `play`: KEY=VALUE settings of the agent's greedy play
    (`PLAY_KEYS`) that replace its run's for this match."""
    if player is not None:
        if run_dir is not None or game is None:
            raise players_lib.PlayerSpecError("give either --run-dir, or --player with --game")
        get_game_or_error(game)  # an unknown game is a ConfigError (one-line CLI error)
        if play:
            raise ConfigError("--set changes an agent's greedy play: give --run-dir (a run or an agent), not --player")
        agent_player = players_lib.make_player(player, game)
        run_dir = out_dir or os.path.join("runs", "eval")
        results_file = os.path.join(run_dir, "results.jsonl")
        games_root = os.path.join(run_dir, "games")
    else:
        assert run_dir is not None  # the CLI requires --run-dir or --player
        agent = with_play_settings(load_agent(run_dir, step=step, weights=weights), play)
        game = agent.config.game
        label = os.path.basename(os.path.abspath(run_dir))
        if agent_file.is_agent_file(resolve(run_dir)):  # an agent file (or a shipped agent's name): no run dir
            label = label.removesuffix(agent_file.SUFFIX)
            run_dir = out_dir or os.path.join("runs", "eval", label)
        agent_player = players_lib.agent_player(agent, simulations, name=f"{label}@{agent.step}")
        results_file = results_path(run_dir)
        games_root = os.path.join(run_dir, "eval", "games")
    other = players_lib.make_player(opponent, game)
    plies = get_game(game).opening_plies if opening_plies is None else opening_plies
    key = jax.random.key(seed)
    finished: list[match_lib.GameResult] = []

    def on_game(index, g):
        finished.append(g)
        log(
            f"game {index + 1}/{games}: {'win' if g.result > 0 else 'draw' if g.result == 0 else 'loss'}"
            f"{' (resigned)' if g.resigned else ''} in {len(g.actions)} plies"
        )

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    games_dir = os.path.join(games_root, f"{stamp}_{_slug(agent_player.name)}_vs_{_slug(other.name)}")
    t0 = time.perf_counter()
    error = None
    try:
        played = match_lib.play(
            game, agent_player, other, key, games, opening_plies=plies, batch_size=batch_size, on_game=on_game
        )
    except EngineError as e:
        played, error = finished, e
    seconds = time.perf_counter() - t0
    results = [g.result for g in played]
    extra = {
        "seed": seed,
        "simulations": getattr(agent_player, "simulations", None),
        "step": getattr(agent_player, "step", None),
        "opponent_spec": opponent,
        **match_lib.engine_score_agreement(played),
    }
    if play:  # the match's own settings of greedy play, so its line is not read as the run's defaults
        extra["play"] = list(play)
    if error is not None:
        extra["error"] = str(error)
    if save_games and played:
        write_games(games_dir, game, agent_player.name, other.name, played)
        extra["games_dir"] = os.path.relpath(games_dir, run_dir)
    if results:
        summary = match_lib.summarize(game, agent_player.name, other.name, results, plies, seconds, extra)
        match_lib.append_result(results_file, summary)
    if error is not None:
        raise error
    return summary
