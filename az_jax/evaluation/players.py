"""Players named by a spec string, as `az-jax eval --opponent SPEC` and the Elo ladder take them.

    random                          uniform over legal moves
    mcts:sims=1000[,c=1.41,rollouts=1]
                                    classic UCT with uniformly random rollouts (az_jax/evaluation/rollout_mcts.py)
    run:DIR[@STEP][:sims=N]         a trained az_jax network (latest checkpoint, or STEP), greedy by visits after
                                    N simulations (default: the run's eval_simulations); sims=0 is the raw policy
                                    (the most probable legal move, no search)
    sl:DIR[@STEP][:temp=T]          an AlphaGo policy network trained by `az-jax alphago sl` (Nature 2016's p_σ) or
                                    `az-jax alphago rl` (p_ρ),
                                    no search: the most probable sensible point (temp=0, default) or one sampled at
                                    temperature T; passes when no sensible point is left (alphago/policy_player.py)
    alphago:DIR[:sims=N,lambda=L,beta=B,c=C,symmetries=0|1]
                                    AlphaGo (Nature 2016): APV-MCTS with the networks of an agent directory
                                    (alphago/agent.py: DIR/sl, DIR/value, DIR/rollout.npz), N simulations, leaf
                                    value (1 − L)·v_θ + L·(p_π rollout), priors p_σ^B, c_puct = C
                                    (alphago/apv_mcts.py); options not given come from the search of the preset
                                    that made DIR (DIR/preset.json, `az-jax alphago pipeline`), else N = 64,
                                    L = 0.5, B = 0.67, C = 5
    gnugo[:level=N]                 GNU Go over GTP with the options that make its final position score the same
                                    under Tromp-Taylor rules (Chinese rules, all dead stones captured)
    gtp:COMMAND                     any GTP engine, e.g. gtp:"gnugo --mode gtp --level 10 --chinese-rules"
    uci:COMMAND[:OPTIONS]           any UCI engine via python-chess, e.g. uci:stockfish:elo=1350;
                                    options skill=0..20, elo=N, nodes=N, movetime=SECONDS, depth=N, threads=N, hash=MB
                                    (default limit: movetime=0.05)

JAX players (`JaxPlayer`) are pure batched functions `(states [B, ...], key) -> actions [B]` that run on device;
engine players (`EnginePlayer`) open an external process per match and play through `EngineSession`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import shlex
from collections.abc import Callable
from typing import Protocol

import chess
import jax.numpy as jnp

from az_jax.core import arena
from az_jax.core.iteration import greedy_player, make_setup
from az_jax.engines.gtp import GTPEngine, find_executable
from az_jax.engines.uci import UCIEngine, strength_options
from az_jax.evaluation import rollout_mcts
from az_jax.runtime.agent import load_agent
from envs import get_game, make_env, records
from envs.notation import go
from envs.notation.chess_moves import action_to_move, move_to_action

RESIGN = -2  # what an engine session's genmove returns when the engine resigns
MAX_SIMULATIONS = 1_000_000  # search simulations per move a spec may ask for (beyond this it is a typo)
MAX_OPTION = 2**31 - 1  # the largest integer option (engines' options are 32-bit)


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


# --- parsing ----------------------------------------------------------------------------------------------------------
_OPTIONS = re.compile(r"^[a-z_]+=[^,=:]+(,[a-z_]+=[^,=:]+)*$")


def _option_dict(items: str, spec: str) -> dict[str, str]:
    """'k=v,k2=v2' -> {k: v, k2: v2}; a key given twice is a PlayerSpecError."""
    pairs = [item.split("=", 1) for item in items.split(",")]
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise PlayerSpecError(f"{spec!r}: option {twice[0]} is given twice")
    return dict(pairs)


def _split_options(text: str, spec: str) -> tuple[str, dict[str, str]]:
    """'body:k=v,k2=v2' -> ('body', {k: v, k2: v2}); a body without a trailing option list is returned whole."""
    head, sep, tail = text.rpartition(":")
    if sep and _OPTIONS.match(tail):
        return head, _option_dict(tail, spec)
    if _OPTIONS.match(text):
        return "", _option_dict(text, spec)
    return text, {}


def _only_options(text: str, spec: str) -> dict[str, str]:
    """The options of a player that takes nothing else ('k=v,k2=v2' or ''): anything else is a PlayerSpecError."""
    body, options = _split_options(text, spec)
    if body:
        raise PlayerSpecError(f"{spec!r}: expected options key=value[,key=value...], got {body!r}")
    return options


def _number(options: dict, key: str, kind, default, spec: str, low=None, high=None):
    """Option `key` as an int or float (popped from `options`), else `default`: PlayerSpecError if it is not a
    number, not finite, or outside [low, high] (an int's `high` defaults to MAX_OPTION)."""
    if key not in options:
        return default
    text = options.pop(key)
    try:
        value = kind(text)
    except (ValueError, OverflowError):
        raise PlayerSpecError(f"{spec!r}: {key} must be a {kind.__name__}") from None
    if kind is float and not math.isfinite(value):
        raise PlayerSpecError(f"{spec!r}: {key} must be a finite number, got {text!r}")
    high = MAX_OPTION if high is None and kind is int else high
    if low is not None and value < low:
        raise PlayerSpecError(f"{spec!r}: {key} must be >= {low}, got {value}")
    if high is not None and value > high:
        raise PlayerSpecError(f"{spec!r}: {key} must be <= {high}, got {value}")
    return value


def _no_more(options: dict, spec: str, allowed: str) -> None:
    if options:
        raise PlayerSpecError(f"{spec!r}: unknown option(s) {', '.join(sorted(options))} (allowed: {allowed})")


WEIGHTS = ("best", "latest")  # a gated run's best player (AlphaGo Zero's evaluator), or its latest weights


def make_player(spec: str, game: str, *, default_simulations: int | None = None) -> Player:
    """The player a spec names (see the module docstring) for `game`. Raises PlayerSpecError on a bad spec."""
    spec = spec.strip()
    kind, _, rest = spec.partition(":")
    if kind == "random" and not rest:
        return JaxPlayer("random", _random_apply)
    if kind == "mcts":
        options = _only_options(rest, spec)
        sims = _number(options, "sims", int, 1000, spec, low=1, high=MAX_SIMULATIONS)
        c = _number(options, "c", float, math.sqrt(2), spec, low=0.0)
        rollouts = _number(options, "rollouts", int, 1, spec, low=1, high=MAX_SIMULATIONS)
        _no_more(options, spec, "sims, c, rollouts")
        name = f"mcts{sims}" + (f"_c{c:g}" if "c=" in rest else "") + (f"_r{rollouts}" if rollouts > 1 else "")
        return JaxPlayer(name, _mcts_apply(game, sims, c, rollouts), simulations=sims)
    if kind == "run":
        body, options = _split_options(rest, spec)
        sims = _number(options, "sims", int, None, spec, low=0, high=MAX_SIMULATIONS)
        weights = options.pop("weights", "best")
        if weights not in WEIGHTS:
            raise PlayerSpecError(f"{spec!r}: weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
        _no_more(options, spec, "sims, weights")
        path, step = _path_and_step(body, spec, "run:runs/connect_four-small@50")
        return run_player(path, step=step, simulations=sims, game=game, weights=weights)
    if kind == "sl":
        body, options = _split_options(rest, spec)
        temperature = _number(options, "temp", float, 0.0, spec, low=0.0)
        _no_more(options, spec, "temp")
        path, step = _path_and_step(body, spec, "sl:runs/alphago-sl9@2000")
        return alphago_policy_player(path, game, step=step, temperature=temperature)
    if kind == "alphago":
        return alphago_search_player(rest, game, spec, default_simulations)
    if kind == "gnugo":
        options = _only_options(rest, spec)
        level = _number(options, "level", int, 10, spec, low=0)
        _no_more(options, spec, "level")
        exe = find_executable("gnugo")
        if exe is None:
            raise PlayerSpecError("gnugo is not installed (Debian package gnugo; `make test` installs it)")
        command = [exe, "--mode", "gtp", "--level", str(level), "--chinese-rules", "--capture-all-dead"]
        return gtp_player(command, game, name=f"gnugo{level}")
    if kind == "gtp":
        if not rest.strip():
            raise PlayerSpecError(f'{spec!r}: give the engine\'s command line, e.g. gtp:"gnugo --mode gtp"')
        return gtp_player(shlex.split(rest), game)
    if kind == "uci":
        return uci_player(rest, game, spec)
    raise PlayerSpecError(
        f"unknown player {spec!r}; use random, mcts:sims=N, run:DIR[@STEP][:sims=N], sl:DIR[@STEP][:temp=T], "
        f"alphago:DIR[:sims=N,lambda=L], gnugo[:level=N], gtp:COMMAND or uci:COMMAND[:OPTIONS]"
    )


def _path_and_step(body: str, spec: str, example: str) -> tuple[str, int | None]:
    """DIR[@STEP] of a spec: (DIR, STEP or None)."""
    path, at, step_text = body.rpartition("@")
    if not at:
        path, step_text = body, ""
    if not path:
        raise PlayerSpecError(f"{spec!r}: give a run directory, e.g. {example}")
    try:
        return path, int(step_text) if step_text else None
    except ValueError:
        raise PlayerSpecError(f"{spec!r}: the step after @ must be an integer") from None


def _random_apply(variables, states, key):
    del variables
    return arena.uniform_random_player(states, key)


@functools.cache
def _mcts_apply(game: str, sims: int, c: float, rollouts: int) -> Callable:
    fn = rollout_mcts.rollout_mcts_player(
        make_env(game)[0], num_simulations=sims, c=c, rollouts=rollouts, max_length=get_game(game).max_length
    )
    return lambda variables, states, key: fn(states, key)


# --- network players --------------------------------------------------------------------------------------------------
@functools.cache
def network_apply(config, simulations: int) -> Callable:
    """`apply(variables, states, key)` of a network of `config`: greedy by visits after `simulations` simulations
    without noise (az_jax/runtime/agent.py), or for 0 the most probable legal move of the raw policy (no search).
    Cached, so every checkpoint of a run gets the same function (and one compilation)."""
    setup = make_setup(config)

    def apply(variables, states, key):
        if simulations == 0:
            logits, _ = setup.apply_fn(variables, states.observation)
            return jnp.argmax(jnp.where(states.legal_action_mask, logits, -jnp.inf), axis=-1)
        return greedy_player(setup, variables, simulations)(states, key)

    return apply


def agent_player(agent, simulations: int | None = None, name: str | None = None) -> JaxPlayer:
    """A JaxPlayer from a loaded Agent: search with `simulations` (None: the run's eval setting; 0: raw policy)."""
    sims = agent.default_simulations if simulations is None else simulations
    label = name or f"{agent.config.game}@{agent.step}"
    return JaxPlayer(
        f"{label}:{'policy' if sims == 0 else f'sims{sims}'}",
        network_apply(agent.config, sims),
        agent.variables,
        step=agent.step,
        simulations=sims,
    )


def run_player(
    path: str,
    *,
    step: int | None = None,
    simulations: int | None = None,
    game: str | None = None,
    name: str | None = None,
    weights: str = "best",
) -> JaxPlayer:
    """A run's network as a player: checkpoint `step` (default the latest readable one), `weights` "best" (a gated
    run's best player) or "latest"."""
    agent = load_agent(path, step=step, weights=weights)
    if game is not None and agent.config.game != game:
        raise PlayerSpecError(f"{path} is a {agent.config.game} run, not {game}")
    return agent_player(agent, simulations, name=name or f"{os.path.basename(os.path.abspath(path))}@{agent.step}")


@functools.cache
def _alphago_policy_apply(config, temperature: float) -> Callable:
    # imported here, not at the top: the AlphaGo modules (and pgx's Go) cost every `az-jax` process seconds to load
    from az_jax.alphago import supervised as alphago_supervised
    from az_jax.alphago.policy_player import policy_actions

    network = alphago_supervised.network(config)
    return lambda params, states, key: policy_actions(network, config.planes, params, states, key, temperature)


def alphago_policy_player(path: str, game: str, *, step: int | None = None, temperature: float = 0.0) -> JaxPlayer:
    """An AlphaGo policy network's run (`az-jax alphago sl`) as a player without search (see the module docstring)."""
    # imported here, not at the top: the AlphaGo modules (and pgx's Go) cost every `az-jax` process seconds to load
    from az_jax.alphago import reinforce as alphago_reinforce
    from az_jax.alphago import supervised as alphago_supervised

    try:
        config, params, step = alphago_reinforce.restore_policy(path, step)  # p_ρ's run or p_σ's
    except alphago_supervised.SLError as e:
        raise PlayerSpecError(str(e)) from None
    if config.game != game:
        raise PlayerSpecError(f"{path} is a {config.game} policy, not {game}")
    name = f"{os.path.basename(os.path.abspath(path))}@{step}" + (f":t{temperature:g}" if temperature else "")
    return JaxPlayer(name, _alphago_policy_apply(config, temperature), params, step=step, simulations=0)


def alphago_search_player(rest: str, game: str, spec: str, default_simulations: int | None = None) -> JaxPlayer:
    """`alphago:DIR[:options]`: APV-MCTS with the networks of an AlphaGo agent directory (see the module docstring).
    Options not given: the search of DIR/preset.json when there is one, else `default_simulations` (or 64) and
    APVConfig's defaults."""
    # imported here, not at the top: the AlphaGo modules (and pgx's Go) cost every `az-jax` process seconds to load
    from az_jax.alphago import agent as alphago_agent
    from az_jax.alphago import apv_mcts
    from az_jax.alphago import play_agent as alphago_play_agent
    from az_jax.alphago import presets as alphago_presets

    body, options = _split_options(rest, spec)
    if not body:
        raise PlayerSpecError(f"{spec!r}: give an AlphaGo agent directory, e.g. alphago:runs/alphago9:sims=64")
    try:
        defaults = alphago_play_agent.search_config(body, default_simulations)  # the preset's search, else APVConfig's
    except alphago_presets.PresetError as e:
        raise PlayerSpecError(str(e)) from None
    sims = _number(options, "sims", int, defaults.simulations, spec, low=1, high=MAX_SIMULATIONS)
    lam = _number(options, "lambda", float, defaults.lam, spec, low=0.0, high=1.0)
    beta = _number(options, "beta", float, defaults.beta, spec, low=1e-3)
    c = _number(options, "c", float, defaults.c_puct, spec, low=0.0)
    symmetries = _number(options, "symmetries", int, int(defaults.symmetries), spec, low=0, high=1)
    _no_more(options, spec, "sims, lambda, beta, c, symmetries")
    try:
        agent = alphago_agent.load(body, lam=lam)
    except alphago_agent.AgentError as e:
        raise PlayerSpecError(str(e)) from None
    if f"go_{agent.size}x{agent.size}" != game:
        raise PlayerSpecError(f"{body} is a go_{agent.size}x{agent.size} agent, not {game}")
    config = dataclasses.replace(defaults, simulations=sims, c_puct=c, lam=lam, beta=beta, symmetries=bool(symmetries))
    apply = apv_mcts.make_apply(config, agent.policy_config, agent.value_config)
    name = f"{os.path.basename(os.path.abspath(body))}:apv{sims}_l{lam:g}"
    return JaxPlayer(name, apply, agent.variables, step=agent.steps["sl"], simulations=sims)


# --- GTP (Go) ---------------------------------------------------------------------------------------------------------
def _go_color(state) -> str:
    return "black" if int(state._x.color) == 0 else "white"


class GTPSession:
    """A GTP engine playing one side of pgx Go games (Tromp-Taylor area scoring, board size and komi from the pgx
    env)."""

    def __init__(self, command: list[str], game: str):
        self.engine = GTPEngine(command)
        env = make_env(game)[0]
        self.game, self.size, self.komi = game, int(env._game.size), float(env._game.komi)

    def new_game(self, state) -> None:
        self.engine.boardsize(self.size)
        self.engine.komi(self.komi)
        self.engine.clear_board()

    def observe(self, state, action: int, own: bool) -> None:
        if not own:  # genmove already played the engine's own move on its board
            self.engine.play(_go_color(state), go.action_to_vertex(action, self.size))

    def genmove(self, state) -> int:
        move = self.engine.genmove(_go_color(state))
        if move.lower() == "resign":
            return RESIGN
        return go.vertex_to_action(move, self.size)

    def final_info(self, state) -> dict:
        text = self.engine.final_score()
        return {
            "engine_final_score": text,
            "engine_margin_black": go.parse_score(text),
            "pgx_margin_black": records.go_margin(self.game, state),
        }

    def close(self) -> None:
        self.engine.close()


def gtp_player(command: list[str], game: str, name: str | None = None) -> EnginePlayer:
    if not game.startswith("go_"):
        raise PlayerSpecError(f"GTP engines play Go; {game} is not a Go game")
    label = name or "gtp_" + re.sub(r"[^A-Za-z0-9]+", "_", " ".join(command[:1] + command[1:]).split("/")[-1])[:40]
    return EnginePlayer(label, lambda: GTPSession(list(command), game))


# --- UCI (chess) ------------------------------------------------------------------------------------------------------
class UCISession:
    """A UCI engine playing one side of pgx chess games, on a python-chess board kept in step with pgx."""

    def __init__(self, command: list[str], options: dict, limits: dict):
        self.engine = UCIEngine(command, options=options)
        self.limits = limits
        self.board: chess.Board | None = None  # set by new_game

    def new_game(self, state) -> None:
        self.board = chess.Board()

    def observe(self, state, action: int, own: bool) -> None:
        assert self.board is not None
        self.board.push(action_to_move(action, self.board))

    def genmove(self, state) -> int:
        assert self.board is not None
        move = self.engine.play(self.board, **self.limits)
        return move_to_action(move, self.board)

    def final_info(self, state) -> dict:
        assert self.board is not None
        outcome = self.board.outcome(claim_draw=True)
        return {"python_chess_outcome": outcome.result() if outcome else "*"}

    def close(self) -> None:
        self.engine.close()


def uci_player(rest: str, game: str, spec: str) -> EnginePlayer:
    if game != "chess":
        raise PlayerSpecError(f"UCI engines play chess here; {game} is not chess")
    body, options = _split_options(rest, spec)
    if not body.strip():
        raise PlayerSpecError(f"{spec!r}: give the engine's command line, e.g. uci:stockfish:elo=1350")
    command = shlex.split(body)
    exe = find_executable(command[0])
    if exe is None:
        raise PlayerSpecError(f"{spec!r}: engine {command[0]!r} not found (Debian package stockfish)")
    command[0] = exe
    skill = _number(options, "skill", int, None, spec, low=0, high=20)
    elo = _number(options, "elo", int, None, spec, low=0)
    uci_options = strength_options(skill_level=skill, elo=elo)
    uci_options["Threads"] = _number(options, "threads", int, 1, spec, low=1)
    uci_options["Hash"] = _number(options, "hash", int, 16, spec, low=1)
    limits = {
        "nodes": _number(options, "nodes", int, None, spec, low=1),
        "time": _number(options, "movetime", float, None, spec, low=0.0),
        "depth": _number(options, "depth", int, None, spec, low=1),
    }
    _no_more(options, spec, "skill, elo, nodes, movetime, depth, threads, hash")
    limits = {k: v for k, v in limits.items() if v is not None} or {"time": 0.05}
    label = (
        re.sub(r"[^A-Za-z0-9]+", "_", command[0].split("/")[-1])
        + "".join(f"_{k}{v}" for k, v in (("skill", skill), ("elo", elo)) if v is not None)
        + "".join(f"_{k}{v:g}" for k, v in limits.items())
    )
    return EnginePlayer(label, lambda: UCISession(command, uci_options, limits))
