"""The explicit symmetry ensemble of greedy play (`eval_symmetry_ensemble`; search.symmetry_ensemble): AlphaGo (Silver
et al. 2016, Methods, "Symmetries") averages the values and the back-mapped probabilities of all the game's symmetries.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az_jax.core import config as config_lib
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.core import search
from az_jax.core.iteration import init_variables, make_setup
from az_jax.evaluation.evaluate import with_play_settings
from az_jax.runtime.agent import Agent
from envs import symmetries as sym

pytestmark = pytest.mark.usefixtures("fast_compiles")


def constant_policy(probs, value_fn):
    """A 'network' whose policy is `probs` [A] whatever it sees and whose value is value_fn(observation)."""
    logits = jnp.log(jnp.asarray(probs, jnp.float32))

    def apply_fn(variables, observation):
        return jnp.broadcast_to(logits, (observation.shape[0], logits.size)), value_fn(observation)

    return apply_fn


def test_connect_four_by_hand():
    """Connect four has 2 symmetries (identity, flip_lr). A policy of 0.4 on column 0 and 0.1 on the others, seen
    mirrored, puts 0.4 on column 6: the ensemble's is (0.4 + 0.1) / 2 = 0.25 on columns 0 and 6 and 0.1 elsewhere
    (summing to 1). The value reads cell (0, 0) of plane 0: one stone there gives 1 plain and 0 mirrored (the stone is
    then at (0, 6)), so the ensemble's value is 0.5; a stone at (0, 3), the middle column, stays put: 1."""
    apply_fn = constant_policy([0.4] + [0.1] * 6, lambda obs: obs[:, 0, 0, 0].astype(jnp.float32))
    obs = np.zeros((2, 6, 7, 2), np.float32)
    obs[0, 0, 0, 0] = 1.0
    obs[1, 0, 3, 0] = 1.0
    logits, value = search.symmetry_ensemble(apply_fn, "connect_four")({}, jnp.asarray(obs))
    expected = [0.25, 0.1, 0.1, 0.1, 0.1, 0.1, 0.25]
    np.testing.assert_allclose(np.exp(logits), [expected, expected], rtol=1e-6)
    np.testing.assert_allclose(value, [0.5, 0.0], atol=1e-7)  # the middle-column stone is not at (0, 0): 0 both ways


def test_tic_tac_toe_averages_over_its_eight_symmetries():
    """The 8 symmetries of the 3 × 3 board keep the centre, permute the 4 corners among themselves and the 4 edges
    among themselves, each corner reaching each corner twice. So for any fixed policy p the ensemble's is p[4] at the
    centre, the mean of p over the corners at each corner and over the edges at each edge. With p ∝ (1, ..., 9):
    corners (1 + 3 + 7 + 9) / 4 / 45 = 5/45, edges (2 + 4 + 6 + 8) / 4 / 45 = 5/45, centre 5/45: uniform, 1/9 each."""
    weights = np.arange(1, 10, dtype=np.float32)
    apply_fn = constant_policy(weights / weights.sum(), lambda obs: jnp.zeros(obs.shape[0]))
    logits, _ = search.symmetry_ensemble(apply_fn, "tic_tac_toe")({}, jnp.zeros((3, 3, 3, 2)))
    np.testing.assert_allclose(np.exp(logits), np.full((3, 9), 1 / 9), rtol=1e-6)
    # A policy not symmetric in this way: 0.5 on corner 0, 0.5 on edge 1 -> corners 0.125 each, edges 0.125 each.
    apply_fn = constant_policy([0.5, 0.5] + [0.0] * 7, lambda obs: jnp.zeros(obs.shape[0]))
    probs = np.exp(search.symmetry_ensemble(apply_fn, "tic_tac_toe")({}, jnp.zeros((1, 3, 3, 2)))[0])
    np.testing.assert_allclose(probs[0], [0.125, 0.125, 0.125, 0.125, 0.0, 0.125, 0.125, 0.125, 0.125], atol=1e-7)


@pytest.mark.parametrize("game", ["connect_four", "go_9x9"])
def test_the_ensemble_of_a_real_network_is_invariant(game):
    """A freshly initialised network is not symmetric: its values on a position and on its mirror image differ. The
    ensemble's are equal, and its policy on the image is the image of its policy (the same set of K evaluations)."""
    setup = make_setup(presets_lib.preset(game, "small"))
    variables = init_variables(setup, jax.random.key(0))
    board = sym.BOARDS[game]
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.random((8, board.height, board.width, setup.env.observation_shape[-1])) < 0.3, jnp.float32)
    flip = sym.symmetry_names(game).index("flip_lr")
    mirrored = sym.transform_observation(game, flip, obs)
    plain = setup.apply_fn(variables, obs), setup.apply_fn(variables, mirrored)
    assert np.abs(np.asarray(plain[0][1]) - np.asarray(plain[1][1])).max() > 1e-4  # the network alone is not invariant
    ensemble = search.symmetry_ensemble(setup.apply_fn, game)
    (logits, value), (logits_m, value_m) = ensemble(variables, obs), ensemble(variables, mirrored)
    np.testing.assert_allclose(value, value_m, atol=1e-5)
    np.testing.assert_allclose(
        np.exp(logits_m), sym.transform_policy(game, flip, np.exp(np.asarray(logits))), atol=1e-5
    )


def test_the_switch():
    """Off by default and then greedy play's network is the network itself (the compiled programs are the ones they
    were); on, greedy play's search draws no random symmetry (the ensemble sees them all); a game without symmetries
    is a one-line config error; it may change on resume."""
    base = presets_lib.preset("connect_four", "small")
    assert not base.eval_symmetry_ensemble
    setup = make_setup(base)
    assert setup.play_apply is setup.apply_fn
    on = overrides_lib.override(base, ["eval_symmetry_ensemble=true", "search_symmetries=true"]).validate()
    assert search.SearchConfig.for_selfplay(on).symmetry_game == "connect_four"
    assert search.SearchConfig.for_play(on, 64).symmetry_game is None
    with pytest.raises(config_lib.ConfigError, match="eval_symmetry_ensemble needs a game with board symmetries"):
        overrides_lib.override(presets_lib.preset("chess", "small"), ["eval_symmetry_ensemble=true"]).validate()
    assert "eval_symmetry_ensemble" in config_lib.RESUMABLE_KEYS


def test_an_agent_acts_with_it_for_one_match():
    """`az-jax eval --set eval_symmetry_ensemble=true` (evaluate.with_play_settings): the same weights, and the raw
    policy Agent.policy_value returns is the mean of the network's probabilities on each position and on its mirror
    image mapped back (connect four, positions of at most 5 plies: no column is full, every move is legal)."""
    config = presets_lib.preset("connect_four", "small")
    setup = make_setup(config)
    agent = Agent(config=config, variables=init_variables(setup, jax.random.key(1)))
    on = with_play_settings(agent, ("eval_symmetry_ensemble=true",))
    assert on.config.eval_symmetry_ensemble and on.variables is agent.variables
    env = setup.env
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(2), 16))
    for ply in range(5):
        moves = jax.random.randint(jax.random.key(10 + ply), (16,), 0, 7)
        states = jax.vmap(env.step)(states, moves)
    assert bool(states.legal_action_mask.all())
    obs = states.observation
    probs = jax.nn.softmax(setup.apply_fn(agent.variables, obs)[0])
    mirrored = jax.nn.softmax(setup.apply_fn(agent.variables, sym.transform_observation("connect_four", 1, obs))[0])
    expected = (probs + mirrored[:, ::-1]) / 2  # flip_lr maps column c to 6 - c
    np.testing.assert_allclose(on.policy_value(states)[0], expected, atol=1e-6)
    assert np.abs(np.asarray(agent.policy_value(states)[0]) - np.asarray(expected)).max() > 1e-4  # off: the plain net
    with pytest.raises(config_lib.ConfigError, match="keys of greedy play only"):
        with_play_settings(agent, ("num_simulations=8",))
