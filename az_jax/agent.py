"""Acting with a trained network outside training: `load_agent(...)`, then `act` (search) or `policy_value` (raw net).

Evaluation play is greedy by root visit count with no root noise (AlphaZero, Silver et al., Science 2018, Methods);
batch norm uses its running averages.
"""

import dataclasses
import functools
import os

import chex
import jax
import mctx
import pgx

from az_jax import checkpoint as ckpt
from az_jax import config as config_lib
from az_jax import search as search_lib
from az_jax.iteration import Setup, greedy_player, init_variables, make_setup


@dataclasses.dataclass(frozen=True, eq=False)
class Agent:
    config: config_lib.Config
    variables: dict  # {'params', 'batch_stats'}
    step: int = 0  # the iteration the weights come from

    @functools.cached_property
    def setup(self) -> Setup:
        return make_setup(self.config)

    @property
    def env(self) -> pgx.Env:
        return self.setup.env

    @functools.cached_property
    def _policy_value(self):
        def fn(variables, states):
            logits, value = self.setup.apply_fn(variables, states.observation)
            return jax.nn.softmax(search_lib.mask_logits(logits, states.legal_action_mask)), value

        return jax.jit(fn)

    def policy_value(self, states: pgx.State) -> tuple[jax.Array, jax.Array]:
        """Raw network on a batch of states: (probabilities [B, A], zero on illegal actions; values [B])."""
        chex.assert_rank(states.legal_action_mask, 2)
        return self._policy_value(self.variables, states)

    def _greedy_search(self, variables, states, key, num_simulations: int):
        return search_lib.greedy_search(
            self.setup.apply_fn, self.env, variables, key, states, self.setup.play_search(num_simulations)
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
        """A pure `(states, key) -> actions` function for az_jax.arena (variables closed over)."""
        return greedy_player(self.setup, self.variables, num_simulations or self.default_simulations)


def _locate(path: str) -> tuple[str, int | None]:
    """A run dir, its checkpoints dir, or one checkpoint step dir -> (run_dir, step or None for the latest)."""
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise ckpt.CheckpointError(f"no run or checkpoint at {path}")
    base = os.path.basename(path)
    parent = os.path.dirname(path)
    if base.isdigit() and os.path.basename(parent) == "checkpoints":
        return os.path.dirname(parent), int(base)
    if base == "checkpoints":
        return parent, None
    return path, None


def load_agent(run_dir_or_checkpoint: str, step: int | None = None) -> Agent:
    """Loads the network of a run (latest checkpoint, or `step`) or of one checkpoint directory."""
    run_dir, found_step = _locate(run_dir_or_checkpoint)
    step = step if step is not None else found_step
    if not os.path.isdir(ckpt.checkpoint_dir(run_dir)):
        raise ckpt.CheckpointError(f"{run_dir} has no checkpoints/ directory")
    manager = ckpt.make_manager(run_dir, read_only=True)
    steps = manager.all_steps()
    if not steps:
        raise ckpt.CheckpointError(f"{run_dir} has no checkpoints")
    if step is None:
        step = max(steps)
    elif step not in steps:
        raise ckpt.CheckpointError(f"{run_dir} has no checkpoint {step} (has {sorted(steps)})")
    config = ckpt.read_config(manager, step)
    setup = make_setup(config)
    abstract = jax.eval_shape(lambda: init_variables(setup, jax.random.key(0)))
    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    abstract = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), abstract)
    variables = ckpt.restore_model(manager, step, dict(abstract))
    return Agent(config=config, variables=variables, step=step)
