"""The players that run on the devices: uniform random play, classic UCT with random rollouts, and a trained az_jax
network (greedy by visits after a search, or its raw policy)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import jax.numpy as jnp

from az_jax.core import arena
from az_jax.core.iteration import greedy_player, make_setup
from az_jax.evaluation import rollout_mcts
from az_jax.evaluation.player_types import JaxPlayer, PlayerSpecError
from az_jax.runtime.agent import load_agent
from envs import get_game, make_env


def _random_apply(variables, states, key):
    del variables
    return arena.uniform_random_player(states, key)


def random_player() -> JaxPlayer:
    """Uniform over the legal moves."""
    return JaxPlayer("random", _random_apply)


def mcts_player(game: str, simulations: int, c: float, rollouts: int, name: str) -> JaxPlayer:
    """Classic UCT with `rollouts` uniformly random rollouts per leaf (az_jax/evaluation/rollout_mcts.py)."""
    return JaxPlayer(name, _mcts_apply(game, simulations, c, rollouts), simulations=simulations)


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
            logits, _ = setup.play_apply(variables, states.observation)
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
