"""An AlphaGo agent directory (agent.py) as the opponent of a person: what az_jax/apps/session.py's GameSession and
`analyse` ask of an agent, so `az-jax play --run-dir DIR` (az_jax/apps/terminal.py) and the notebook play an AlphaGo
agent as they play an AlphaZero run (az_jax/runtime/agent.py).

    agent = load(DIR)                                   # the search of DIR/preset.json, else APVConfig's defaults
    session = GameSession(agent, human_first=True)      # az_jax/apps/session.py
    actions, out = agent.search(states, key, 64)        # APV-MCTS (apv_mcts.py): the move played and mctx's output
    probs, values = agent.policy_value(states)          # p_σ^β over the pgx actions, v_θ (NaN without a value net)

The search is the `alphago:DIR` player's (az_jax/evaluation/players.py): APV-MCTS with the directory's networks,
priors p_σ^β, leaf value (1 − λ)·v_θ + λ·(p_π rollout), the most visited root action played. Its settings are those
of the preset that made DIR (DIR/preset.json, `az-jax alphago pipeline`), else APVConfig's defaults with 64
simulations; a session's `num_simulations` overrides the simulations only.

`policy_value`, the "network" columns of an analysis:
* probabilities [B, N² + 1]: the search's root prior p_σ^β (Silver et al., Nature 2016, Methods: P(s, a) =
  p_σ^β(a|s), β = the search's, 0.67 by default), a softmax over the sensible points (pgx-legal, filling no own eye);
  pass has probability 1 exactly when no point is sensible and 0 otherwise, as policy_player.py and the search play
  (p_σ has no pass output). No random symmetry: the position as it stands.
* values [B]: v_θ for the player to move, in [−1, 1]. A search with λ = 1 (rollouts only) loads no value network,
  and then every value is NaN: there is no network value, and 0 would read as an even position.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp
import mctx
import pgx

from az_jax.alphago import agent as agent_lib
from az_jax.alphago import apv_mcts, presets, supervised, value_training
from az_jax.alphago.policy_player import sensible_moves
from az_jax.alphago.position import from_pgx
from az_jax.frontends import tree_search
from envs import make_env

DEFAULT_SIMULATIONS = 64  # the `alphago:DIR` player's default when DIR has no preset.json


def search_config(directory: str, default_simulations: int | None = None) -> apv_mcts.APVConfig:
    """The search an agent directory plays with: DIR/preset.json's, else APVConfig's defaults with
    `default_simulations` (or 64) simulations. PresetError (one line) when preset.json cannot be read."""
    saved = presets.saved_search(directory)
    return saved or apv_mcts.APVConfig(simulations=default_simulations or DEFAULT_SIMULATIONS)


@dataclasses.dataclass(frozen=True)
class PlayConfig:
    """What a session and an engine's kept tree read of an agent's config."""

    game: str  # "go_NxN"
    search: apv_mcts.APVConfig  # the search played (its simulations: the default)

    @property
    def c_init(self) -> float:
        """The exploration constant of the engine's search method "alphago": c_puct."""
        return self.search.c_puct

    @property
    def c_base(self) -> float:
        """Unused by the paper's selection (az_jax/core/search.py's SearchConfig asks for one)."""
        return 19652.0


@dataclasses.dataclass(frozen=True, eq=False)
class PlayAgent:
    """An AlphaGo agent with the interface of az_jax.runtime.agent.Agent that az_jax/apps/session.py uses."""

    directory: str
    networks: agent_lib.AlphaGoAgent
    config: PlayConfig

    @functools.cached_property
    def env(self) -> pgx.Env:
        return make_env(self.config.game)[0]

    @property
    def default_simulations(self) -> int:
        return self.config.search.simulations

    @property
    def variables(self) -> dict:
        """{"policy": p_σ params, "value": v_θ params or None, "rollout": RolloutPolicy or None}."""
        return self.networks.variables

    @property
    def label(self) -> str:
        """What an engine calls this agent (`az-jax gtp`'s version line)."""
        return f"AlphaGo agent {os.path.basename(self.directory)}"

    def tree_evaluator(self, env: pgx.Env) -> tree_search.Evaluator:
        """The priors and leaf values of the agent's search (p_σ^β; (1 − λ)·v_θ + λ·z, rollouts scored by `env`'s
        komi; with an expansion threshold, p_τ's placeholder priors until a node's visits pass it) for a tree an
        engine keeps between moves (az_jax/frontends/tree_search.py), searched by the method "alphago" (the paper's
        selection)."""
        return _tree_evaluator(self.config.search, self.networks.policy_config, self.networks.value_config, env)

    def search(
        self, states: pgx.State, key: jax.Array, num_simulations: int | None = None
    ) -> tuple[jax.Array, mctx.PolicyOutput]:
        """(the most visited root actions [B], mctx.PolicyOutput) of APV-MCTS on a batch of states [B, ...] (not
        over) with `num_simulations` (default: the config's). The key is consumed."""
        config = dataclasses.replace(self.config.search, simulations=num_simulations or self.default_simulations)
        search_fn = apv_mcts.make_search(config, self.networks.policy_config, self.networks.value_config)
        out = search_fn(self.networks.variables, states, key)
        return out.action, out

    def policy_value(self, states: pgx.State) -> tuple[jax.Array, jax.Array]:
        """(p_σ^β [B, N² + 1], pass included; v_θ [B] for the player to move, NaN without a value network): see the
        module docstring."""
        fn = _policy_value(self.networks.policy_config, self.networks.value_config, self.config.search.beta)
        variables = self.networks.variables
        return fn(variables["policy"], variables["value"], states)


@functools.cache
def _tree_evaluator(
    config: apv_mcts.APVConfig,
    policy_config: supervised.SLConfig,
    value_config: value_training.ValueConfig | None,
    env: pgx.Env,
) -> tree_search.Evaluator:
    nets = apv_mcts.nets_of(config, policy_config, value_config)
    recurrent = apv_mcts.make_recurrent_fn(config, env)

    def root(variables, key, states):
        prior, value = apv_mcts.evaluate(config, nets(variables), states, key, env)
        return mctx.RootFnOutput(prior_logits=prior, value=value, embedding=states)

    def recurrent_fn(variables, key, action, states):
        return recurrent(nets(variables), key, action, states)

    if not config.expansion_threshold:
        return tree_search.Evaluator(root, recurrent_fn)
    priors = apv_mcts.make_prior_fn(config)  # p_σ^β, replacing p_τ's placeholders past the threshold

    def prior_fn(variables, key, states):
        return priors(nets(variables), key, states)

    return tree_search.Evaluator(root, recurrent_fn, n_thr=config.expansion_threshold, prior_fn=prior_fn)


@functools.cache
def _policy_value(policy_config: supervised.SLConfig, value_config: value_training.ValueConfig | None, beta: float):
    network = supervised.network(policy_config)

    def fn(policy_params, value_params, states: pgx.State) -> tuple[jax.Array, jax.Array]:
        planes, sensible = sensible_moves(states)  # [B, N, N, 48], [B, N²]
        logits = network.apply({"params": policy_params}, planes[..., : policy_config.planes])
        probs = jax.nn.softmax(jnp.where(sensible, jnp.asarray(logits) / beta, -jnp.inf), axis=-1)
        none = ~sensible.any(-1, keepdims=True)
        probs = jnp.concatenate([jnp.where(none, 0.0, probs), none.astype(probs.dtype)], axis=-1)
        if value_config is None:
            values = jnp.full(states.current_player.shape, jnp.nan, jnp.float32)
        else:
            values = value_training.values_of(value_config, value_params, from_pgx(states))
        return probs, values

    return jax.jit(fn)


def load(directory: str, default_simulations: int | None = None, expansion_threshold: int | None = None) -> PlayAgent:
    """The agent of an AlphaGo agent directory with its search (`search_config`; `expansion_threshold` replaces its
    n_thr): the networks its λ needs, and p_τ with a threshold (agent.load). AgentError or PresetError (one line) when
    a part is missing or unreadable."""
    config = search_config(directory, default_simulations)
    if expansion_threshold is not None:
        config = dataclasses.replace(config, expansion_threshold=expansion_threshold)
    networks = agent_lib.load(directory, lam=config.lam, tree=config.expansion_threshold > 0)
    return PlayAgent(os.path.abspath(directory), networks, PlayConfig(f"go_{networks.size}x{networks.size}", config))
