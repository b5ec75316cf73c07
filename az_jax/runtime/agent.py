"""Acting with a trained network outside training: `load_agent(...)`, then `act` (search) or `policy_value` (raw net).

Evaluation play is greedy by root visit count with no root noise (AlphaZero, Silver et al., Science 2018, Methods);
batch norm uses its running averages.
"""

import dataclasses
import functools
import os
import sys

import chex
import jax
import mctx
import pgx

from az_jax.core import config as config_lib
from az_jax.core import search as search_lib
from az_jax.core.iteration import Setup, greedy_player, init_variables, make_setup
from az_jax.runtime import agent_file
from az_jax.runtime import checkpoint as ckpt


@dataclasses.dataclass(frozen=True, eq=False)
class Agent:
    config: config_lib.Config
    variables: dict  # {'params', 'batch_stats'}
    step: int = 0  # the checkpoint the weights were loaded from
    # the iteration whose training made the weights: `step`, or for the best player of a gated run its iteration
    weights_iteration: int = 0

    @functools.cached_property
    def setup(self) -> Setup:
        return make_setup(self.config)

    @property
    def env(self) -> pgx.Env:
        return self.setup.env

    @functools.cached_property
    def _policy_value(self):
        def fn(variables, states):
            logits, value = self.setup.play_apply(variables, states.observation)
            return jax.nn.softmax(search_lib.mask_logits(logits, states.legal_action_mask)), value

        return jax.jit(fn)

    def policy_value(self, states: pgx.State) -> tuple[jax.Array, jax.Array]:
        """Raw network on a batch of states: (probabilities [B, A], zero on illegal actions; values [B])."""
        chex.assert_rank(states.legal_action_mask, 2)
        return self._policy_value(self.variables, states)

    def _greedy_search(self, variables, states, key, num_simulations: int):
        return search_lib.greedy_search(
            self.setup.play_apply, self.env, variables, key, states, self.setup.play_search(num_simulations)
        )

    @functools.cached_property
    def _search(self):
        return jax.jit(self._greedy_search, static_argnums=3)

    def search(
        self, states: pgx.State, key: jax.Array, num_simulations: int | None = None
    ) -> tuple[jax.Array, mctx.PolicyOutput]:
        """(greedy actions [B], mctx.PolicyOutput) for a batch of states [B, ...]; the key is consumed."""
        chex.assert_rank(states.legal_action_mask, 2)  # a batch: add a leading axis to one state
        return self._search(self.variables, states, key, num_simulations or self.default_simulations)

    def act(self, states: pgx.State, key: jax.Array, num_simulations: int | None = None) -> jax.Array:
        """Greedy-by-visits actions [B] for a batch of pgx states, searched without noise. The key is consumed."""
        return self.search(states, key, num_simulations)[0]

    @property
    def default_simulations(self) -> int:
        return self.config.eval_simulations or self.config.num_simulations

    def player(self, num_simulations: int | None = None):
        """A pure `(states, key) -> actions` function for az_jax.core.arena (variables closed over)."""
        return greedy_player(self.setup, self.variables, num_simulations or self.default_simulations)


def _locate(path: str) -> tuple[str, int | None]:
    """A run dir, its checkpoints dir, or one checkpoint step dir -> (run_dir, step or None for the latest)."""
    path = os.path.abspath(path)
    if not os.path.exists(path):
        names = ", ".join(sorted(agent_file.shipped())) or "none"
        raise ckpt.CheckpointError(f"no run or checkpoint at {path} (nor an agent file; shipped agents: {names})")
    base = os.path.basename(path)
    parent = os.path.dirname(path)
    if base.isdigit() and os.path.basename(parent) == "checkpoints":
        return os.path.dirname(parent), int(base)
    if base == "checkpoints":
        return parent, None
    return path, None


WEIGHTS = ("best", "latest")


def _load_variables(manager, step: int, weights: str) -> tuple[config_lib.Config, dict, int]:
    """(config, variables, the iteration they come from) of checkpoint `step`, verified (ckpt.restore_model)."""
    config = ckpt.read_config(manager, step)
    setup = make_setup(config)
    abstract = jax.eval_shape(lambda: init_variables(setup, jax.random.key(0)))
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    abstract = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), abstract)
    best = weights == "best" and config.gating
    variables, source = ckpt.restore_model(manager, step, dict(abstract), best=best)
    return config, variables, source


def resolve(name_or_path: str) -> str:
    """A path as given if something is there; else the file of the shipped agent of that name (az_jax/agents/);
    else the path as given (its loader then says that nothing is there)."""
    if os.path.exists(name_or_path):
        return name_or_path
    return agent_file.shipped().get(name_or_path, name_or_path)


def load_agent(run_dir_or_checkpoint: str, step: int | None = None, weights: str = "best") -> Agent:
    """Loads the network of a run (its newest readable checkpoint, or `step`), of one checkpoint directory, of an
    agent file (`az-jax export`, *.azagent) or of a shipped agent by name (`shipped_agents()`: e.g. "connect_four").

    `weights`: "best" (the default) is the best player of a gated run (config.gating: the weights its self-play used
    at that checkpoint), "latest" the checkpoint's newest trained weights; in a run without gating both are the
    latest. Read-only: nothing in the run dir is written or moved. Without a step, a damaged newest checkpoint
    (ckpt.DamagedCheckpointError) is skipped for the newest one that reads whole, with one warning line on stderr; a
    damaged `step` given explicitly is an error."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
    path = resolve(run_dir_or_checkpoint)
    if agent_file.is_agent_file(path):
        config, variables, saved_step, source = agent_file.read(path)
        if step is not None and step != saved_step:
            raise ckpt.CheckpointError(f"{path} is an agent file with the weights of checkpoint {saved_step} only")
        device = jax.devices()[0]
        return Agent(
            config=config, variables=jax.device_put(variables, device), step=saved_step, weights_iteration=source
        )
    run_dir, found_step = _locate(path)
    step = step if step is not None else found_step
    if not os.path.isdir(ckpt.checkpoint_dir(run_dir)):
        raise ckpt.CheckpointError(f"{run_dir} has no checkpoints/ directory")
    manager = ckpt.make_manager(run_dir, read_only=True)
    steps = manager.all_steps()
    if not steps:
        raise ckpt.CheckpointError(f"{run_dir} has no checkpoints")
    if step is not None:
        if step not in steps:
            raise ckpt.CheckpointError(f"{run_dir} has no checkpoint {step} (has {sorted(steps)})")
        config, variables, source = _load_variables(manager, step, weights)
        return Agent(config=config, variables=variables, step=step, weights_iteration=source)
    damaged: list[tuple[int, ckpt.DamagedCheckpointError]] = []
    for candidate in sorted(steps, reverse=True):
        try:
            config, variables, source = _load_variables(manager, candidate, weights)
        except ckpt.DamagedCheckpointError as e:
            damaged.append((candidate, e))
            continue
        if damaged:
            also = f" (damaged too: {', '.join(str(s) for s, _ in damaged[1:])})" if len(damaged) > 1 else ""
            print(f"az-jax: warning: {damaged[0][1]}; using checkpoint {candidate}{also}", file=sys.stderr)
        return Agent(config=config, variables=variables, step=candidate, weights_iteration=source)
    raise ckpt.CheckpointError(
        f"none of the {len(steps)} checkpoints of {run_dir} reads whole; the newest: {damaged[0][1]}"
    )


def shipped_agents() -> list[str]:
    """The names of the agents that ship in the package, each loadable by `load_agent(name)`."""
    return sorted(agent_file.shipped())


def export_agent(run_dir_or_checkpoint: str, out_path: str, step: int | None = None, weights: str = "best") -> Agent:
    """Writes the agent of a run (as `load_agent` reads it) to one file at `out_path` (agent_file: config + weights);
    an existing file is never replaced. Returns the agent."""
    if not out_path.endswith(agent_file.SUFFIX):
        raise ckpt.CheckpointError(f"an agent file's name ends in {agent_file.SUFFIX}, got {out_path}")
    agent = load_agent(run_dir_or_checkpoint, step=step, weights=weights)
    agent_file.write(out_path, agent.config, agent.variables, agent.step, agent.weights_iteration)
    return agent
