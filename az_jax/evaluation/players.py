"""Players named by a spec string, as `az-jax eval --opponent SPEC` and the Elo ladder take them.

    random                          uniform over legal moves
    mcts:sims=1000[,c=1.41,rollouts=1]
                                    classic UCT with uniformly random rollouts (az_jax/evaluation/rollout_mcts.py)
    run:DIR[@STEP][:sims=N]         a trained az_jax network (latest checkpoint, or STEP), greedy by visits after
                                    N simulations (default: the run's eval_simulations); sims=0 is the raw policy
                                    (the most probable legal move, no search); DIR may also be an agent file
                                    (`az-jax export`, FILE.azagent) or a shipped agent's name (run:connect_four)
    sl:DIR[@STEP][:temp=T]          an AlphaGo policy network trained by `az-jax alphago sl` (Nature 2016's p_σ) or
                                    `az-jax alphago rl` (p_ρ),
                                    no search: the most probable sensible point (temp=0, default) or one sampled at
                                    temperature T; passes when no sensible point is left (alphago/policy_player.py)
    alphago:DIR[:sims=N,lambda=L,beta=B,c=C,symmetries=0|1,leaves=K,thr=T]
                                    AlphaGo (Nature 2016): APV-MCTS with the networks of an agent directory
                                    (alphago/agent.py: DIR/sl, DIR/value, DIR/rollout.npz), N simulations, leaf
                                    value (1 − L)·v_θ + L·(p_π rollout), priors p_σ^B, c_puct = C
                                    (alphago/apv_mcts.py); options not given come from the search of the preset
                                    that made DIR (DIR/preset.json, `az-jax alphago pipeline`), else N = 64,
                                    L = 0.5, B = 0.67, C = 5; K leaves a step under virtual loss (K divides N),
                                    expansion threshold T (> 0 needs DIR/tree.npz, p_τ's placeholder priors)
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
import math
import re
import shlex

from az_jax.engines.gtp import find_executable
from az_jax.engines.uci import strength_options
from az_jax.evaluation.alphago_players import alphago_policy_player, alphago_search_player, search_defaults
from az_jax.evaluation.engine_players import UCISession, gtp_player, uci_player
from az_jax.evaluation.jax_players import agent_player, mcts_player, network_apply, random_player, run_player
from az_jax.evaluation.player_types import RESIGN, EnginePlayer, JaxPlayer, Player, PlayerSpecError

__all__ = [  # the players' kinds (their own modules), re-exported: every spec's player comes from here
    "RESIGN",
    "EnginePlayer",
    "JaxPlayer",
    "Player",
    "PlayerSpecError",
    "agent_player",
    "network_apply",
    "run_player",
    "alphago_policy_player",
    "alphago_search_player",
    "gtp_player",
    "uci_player",
    "UCISession",
    "make_player",
]

MAX_SIMULATIONS = 1_000_000  # search simulations per move a spec may ask for (beyond this it is a typo)
MAX_OPTION = 2**31 - 1  # the largest integer option (engines' options are 32-bit)


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
        return random_player()
    if kind == "mcts":
        options = _only_options(rest, spec)
        sims = _number(options, "sims", int, 1000, spec, low=1, high=MAX_SIMULATIONS)
        c = _number(options, "c", float, math.sqrt(2), spec, low=0.0)
        rollouts = _number(options, "rollouts", int, 1, spec, low=1, high=MAX_SIMULATIONS)
        _no_more(options, spec, "sims, c, rollouts")
        name = f"mcts{sims}" + (f"_c{c:g}" if "c=" in rest else "") + (f"_r{rollouts}" if rollouts > 1 else "")
        return mcts_player(game, sims, c, rollouts, name)
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
        return _alphago(rest, game, spec, default_simulations)
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
        return _uci(rest, game, spec)
    raise PlayerSpecError(
        f"unknown player {spec!r}; use random, mcts:sims=N, run:DIR[@STEP][:sims=N], sl:DIR[@STEP][:temp=T], "
        f"alphago:DIR[:sims=N,lambda=L], gnugo[:level=N], gtp:COMMAND or uci:COMMAND[:OPTIONS]"
    )


def _alphago(rest: str, game: str, spec: str, default_simulations: int | None) -> JaxPlayer:
    """`alphago:DIR[:options]`; options not given come from DIR's preset (alphago_players.search_defaults)."""
    body, options = _split_options(rest, spec)
    if not body:
        raise PlayerSpecError(f"{spec!r}: give an AlphaGo agent directory, e.g. alphago:runs/alphago9:sims=64")
    defaults = search_defaults(body, default_simulations)
    sims = _number(options, "sims", int, defaults.simulations, spec, low=1, high=MAX_SIMULATIONS)
    lam = _number(options, "lambda", float, defaults.lam, spec, low=0.0, high=1.0)
    beta = _number(options, "beta", float, defaults.beta, spec, low=1e-3)
    c = _number(options, "c", float, defaults.c_puct, spec, low=0.0)
    symmetries = _number(options, "symmetries", int, int(defaults.symmetries), spec, low=0, high=1)
    leaves = _number(options, "leaves", int, defaults.leaves, spec, low=1, high=MAX_SIMULATIONS)
    threshold = _number(options, "thr", int, defaults.expansion_threshold, spec, low=0, high=MAX_SIMULATIONS)
    _no_more(options, spec, "sims, lambda, beta, c, symmetries, leaves, thr")
    if sims % leaves:
        raise PlayerSpecError(f"{spec!r}: leaves={leaves} must divide sims={sims}")
    search = dataclasses.replace(
        defaults,
        simulations=sims,
        c_puct=c,
        lam=lam,
        beta=beta,
        symmetries=bool(symmetries),
        leaves=leaves,
        expansion_threshold=threshold,
    )
    return alphago_search_player(body, game, search)


def _uci(rest: str, game: str, spec: str) -> EnginePlayer:
    """`uci:COMMAND[:OPTIONS]` (see the module docstring)."""
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
    return uci_player(command, game, uci_options, limits, label)


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
