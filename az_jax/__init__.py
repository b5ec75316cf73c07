"""az_jax: AlphaZero, AlphaGo Zero and AlphaGo as a JAX-native, functional library.

Public API:
    load_agent(run_dir_or_checkpoint)  -> Agent with .act(states, key, num_simulations=...) and .policy_value(states)
    train_and_evaluate(config, run_dir) -> trains (or resumes) a run; what `az-jax train` calls
    Config, preset(game, name), override(config, ["key=value", ...])

The names are imported lazily: importing pgx starts JAX's backend, and the CLI must first choose the number of host
CPU devices (az_jax/apps/cli/).
"""

import importlib

from az_jax.runtime import platforms as _platforms

_platforms.quiet_start()  # no probe for a TPU or GPU this machine does not have (before anything starts JAX)

_EXPORTS = {
    "Agent": "az_jax.runtime.agent",
    "load_agent": "az_jax.runtime.agent",
    "Config": "az_jax.core.config",
    "ConfigError": "az_jax.core.config",
    "override": "az_jax.core.overrides",
    "preset": "az_jax.core.presets",
    "train_and_evaluate": "az_jax.evaluation.in_training",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'az_jax' has no attribute {name!r}")
