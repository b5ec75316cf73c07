"""AlphaGo (Nature 2016) as players: a policy network alone (p_σ or p_ρ) and APV-MCTS with an agent directory's
networks. The AlphaGo modules are imported inside the functions: they (and pgx's Go) cost every `az-jax` process
seconds to load."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

from az_jax.evaluation.player_types import JaxPlayer, PlayerSpecError


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


def search_defaults(directory: str, default_simulations: int | None = None):
    """The APV-MCTS settings an agent directory plays by when a spec gives none: the search of DIR/preset.json when
    there is one, else `default_simulations` (or 64) and APVConfig's defaults. PlayerSpecError for a bad preset.json."""
    # imported here: see the module docstring
    from az_jax.alphago import play_agent as alphago_play_agent
    from az_jax.alphago import presets as alphago_presets

    try:
        return alphago_play_agent.search_config(directory, default_simulations)
    except alphago_presets.PresetError as e:
        raise PlayerSpecError(str(e)) from None


def alphago_search_player(directory: str, game: str, search) -> JaxPlayer:
    """APV-MCTS with the networks of an AlphaGo agent directory, searching as `search` (apv_mcts.APVConfig) says."""
    # imported here: see the module docstring
    from az_jax.alphago import agent as alphago_agent
    from az_jax.alphago import apv_mcts

    try:
        agent = alphago_agent.load(directory, lam=search.lam, tree=search.expansion_threshold > 0)
    except alphago_agent.AgentError as e:
        raise PlayerSpecError(str(e)) from None
    if f"go_{agent.size}x{agent.size}" != game:
        raise PlayerSpecError(f"{directory} is a go_{agent.size}x{agent.size} agent, not {game}")
    apply = apv_mcts.make_apply(search, agent.policy_config, agent.value_config)
    name = f"{os.path.basename(os.path.abspath(directory))}:apv{search.simulations}_l{search.lam:g}"
    name += f"_k{search.leaves}" if search.leaves > 1 else ""
    name += f"_thr{search.expansion_threshold}" if search.expansion_threshold else ""
    return JaxPlayer(name, apply, agent.variables, step=agent.steps["sl"], simulations=search.simulations)
