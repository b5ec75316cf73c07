"""An AlphaGo agent (Silver et al., Nature 2016): the directory the pipeline's stages write, loaded as the networks
APV-MCTS searches with.

    DIR/sl/               p_σ, the SL policy network run (`az-jax alphago sl`): the search's priors
    DIR/rollout.npz       p_π, the rollout policy (`az-jax alphago rollout`): the leaves' rollouts
    DIR/tree.npz          p_τ, the tree policy (`az-jax alphago tree`; optional): the placeholder priors of a search
                          with an expansion threshold
    DIR/rollout_run/      p_π's and p_τ's training runs (pattern_training.py: config, vocabularies, checkpoints), of
    DIR/tree_run/         which the .npz files above are the result
    DIR/rl/               p_ρ, the RL policy network run (`az-jax alphago rl`): plays the value data's games
    DIR/value_data/       one position per self-play game (`az-jax alphago value-data`; appended to; an older
                          directory's value_data.npz is read in its place)
    DIR/value/            v_θ, the value network run (`az-jax alphago value`): the leaves' evaluations
    DIR/preset.json       the preset `az-jax alphago pipeline` built the directory with (presets.py), whose search
                          settings are the `alphago:DIR` player's defaults

    agent = load(DIR, lam=0.5)       # what the search with mixing parameter λ needs, and nothing more
    apply = apv_mcts.make_apply(config, agent.policy_config, agent.value_config); apply(agent.variables, states, key)

A search with λ = 1 (rollouts only) needs no value network and one with λ = 0 (value network only) no rollout
policy, so an agent directory can be rated before its last stages exist.
"""

import dataclasses
import os
from typing import Any

from az_jax.alphago import presets, reinforce, rollout_policy, supervised, tree_policy, value_training
from az_jax.alphago.supervised import SLConfig
from az_jax.alphago.value_training import ValueConfig

LAYOUT = {
    "sl": "sl",
    "rollout": "rollout.npz",
    "tree": "tree.npz",
    "rollout_run": "rollout_run",
    "tree_run": "tree_run",
    "rl": "rl",
    "value_data": "value_data",
    "value": "value",
}
LEGACY = {"value_data": "value_data.npz"}  # the single-file form of earlier versions, used when it is there


class AgentError(Exception):
    """An agent directory that lacks what the search needs, or whose parts do not fit together."""


def part(directory: str, name: str) -> str:
    """The path of one stage's output (a key of LAYOUT) in an agent directory."""
    legacy = os.path.join(directory, LEGACY.get(name, LAYOUT[name]))
    return legacy if os.path.exists(legacy) else os.path.join(directory, LAYOUT[name])


def is_agent_directory(directory: str) -> bool:
    """Whether `directory` is meant as an AlphaGo agent directory rather than an AlphaZero run
    (az_jax/runtime/agent.py), for commands that take either (`az-jax play`): it holds one of the parts of LAYOUT or a
    preset.json, and neither the checkpoints/ nor the config.json of a run. Looks at names only: `load` says what is
    missing or unreadable."""
    if not os.path.isdir(directory):
        return False
    if any(os.path.exists(os.path.join(directory, name)) for name in ("checkpoints", "config.json")):
        return False
    names = [*LAYOUT.values(), presets.PRESET_FILE]
    return any(os.path.exists(os.path.join(directory, name)) for name in names)


@dataclasses.dataclass(frozen=True)
class AlphaGoAgent:
    size: int  # board size N
    policy_config: SLConfig  # p_σ's shape
    value_config: ValueConfig | None  # v_θ's shape (None when the search uses no value network)
    variables: dict[str, Any]  # {"policy": p_σ params, "value": v_θ params / None, "rollout", "tree": p_π, p_τ / None}
    steps: dict[str, int]  # checkpoint step of each network loaded


def load(directory: str, *, lam: float, tree: bool = False) -> AlphaGoAgent:
    """The networks a search with mixing parameter λ needs from an agent directory (see the module docstring), and
    with `tree` the tree policy p_τ (a search with an expansion threshold)."""
    if not os.path.isdir(directory):
        raise AgentError(f"{directory} is not an AlphaGo agent directory (it does not exist)")
    try:
        policy_config, policy_params, policy_step = supervised.restore_params(part(directory, "sl"))
        steps = {"sl": policy_step}
        tree_net = tree_policy.load(part(directory, "tree")) if tree else None
        value_config, value_params, rollout = None, None, None
        if lam < 1:
            value_config, value_params, steps["value"] = value_training.restore_params(part(directory, "value"))
            if value_config.size != policy_config.size:
                raise AgentError(
                    f"{directory}: a {value_config.size}x{value_config.size} value network with a "
                    f"{policy_config.size}x{policy_config.size} policy"
                )
        if lam > 0:
            rollout = rollout_policy.load(part(directory, "rollout"))
    except (
        supervised.SLError,
        value_training.ValueRunError,
        rollout_policy.RolloutPolicyError,
        tree_policy.TreePolicyError,
    ) as e:
        raise AgentError(f"{directory}: {e}") from None
    except FileNotFoundError as e:
        raise AgentError(f"{directory}: {e.filename or e} is missing") from None
    variables = {"policy": policy_params, "value": value_params, "rollout": rollout, "tree": tree_net}
    return AlphaGoAgent(policy_config.size, policy_config, value_config, variables, steps)


def rl_policy(directory: str, step: int | None = None) -> tuple[SLConfig, dict, int]:
    """p_ρ of an agent directory (config, params, iteration), for the raw-network player and the value data."""
    try:
        return reinforce.restore_params(part(directory, "rl"), step)
    except supervised.SLError as e:
        raise AgentError(f"{directory}: {e}") from None
