"""Playout cap randomization (KataGo, Wu 2019, §3.1; Config.full_search_fraction): a ply is searched in full with
probability p, else with the fast budget, and only fully searched positions can be sampled for training."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from az_jax.core import config as config_lib
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.core import replay, search, selfplay

from conftest import tiny_network, tiny_variables

pytestmark = pytest.mark.usefixtures("fast_compiles")  # a tiny program: XLA's optimisation passes off (conftest.py)

NUM_GAMES, PLIES = 8, 12
FULL, FAST = 8, 2


def test_fast_plies_are_searched_with_the_fast_budget_and_never_sampled():
    env, _ = envs.make_env("tic_tac_toe")
    net = tiny_network(env.num_actions)
    obs = env.init(jax.random.key(0)).observation
    variables = tiny_variables(net, obs[None].astype(jnp.float32), seed=1)
    full = search.SearchConfig(num_simulations=FULL, algorithm="puct", dirichlet_fraction=0.25, dirichlet_alpha=1.0)
    settings = selfplay.SelfPlayConfig(
        search=full,
        num_plies=PLIES,
        sampling_moves=2,
        fast_search=search.SearchConfig(num_simulations=FAST, algorithm="puct", dirichlet_fraction=0.0),
        full_search_fraction=0.5,
    )
    games = selfplay.init(env, jax.random.key(2), NUM_GAMES)
    capacity = PLIES * NUM_GAMES  # ply t, game b is row 8·t + b: no wrap-around
    buffer = replay.init(capacity, env.observation_shape, obs.dtype, env.num_actions)
    play = jax.jit(
        lambda games, buffer, key: selfplay.play(
            env, lambda v, o: net.apply(v, o, train=False), variables, settings, games, buffer, key, jnp.int32(0)
        )
    )
    _, buffer, metrics = jax.tree.map(np.asarray, play(games, buffer, jax.random.key(3)))

    # A fully searched position is written pending (done once its game ends); a fast one neither, for good.
    trainable = (buffer.pending | buffer.done).reshape(PLIES, NUM_GAMES)  # [ply, game]
    assert (trainable == trainable[:, :1]).all()  # one search for the whole batch per ply
    full_plies = trainable[:, 0]
    assert metrics["full_search_plies"] == full_plies.sum()
    assert 0 < full_plies.sum() < PLIES  # p = 0.5 over 12 plies: both kinds occur for this key
    # PUCT's policy target is the visit counts over the simulations: multiples of 1/2 after a fast search (2
    # simulations), multiples of 1/8 after a full one, and some full search must visit a child an odd number of
    # times (else all 8 visits would split 2-2-2-2, 4-4, ... on every one of the 48 full-ply positions).
    visits = buffer.policy.reshape(PLIES, NUM_GAMES, -1)
    np.testing.assert_allclose(visits[~full_plies] * FAST, np.round(visits[~full_plies] * FAST), atol=1e-5)
    np.testing.assert_allclose(visits[full_plies] * FULL, np.round(visits[full_plies] * FULL), atol=1e-5)
    assert (np.round(visits[full_plies] * FULL) % 2 == 1).any()

    # Only fully searched positions can get an outcome, and replay.sample draws only positions with one: the rows of
    # games that ended include fast plies (a game of 5+ plies spans both kinds here), none of them done.
    fast_rows = ~np.repeat(full_plies, NUM_GAMES)
    assert not buffer.done[fast_rows].any() and not buffer.pending[fast_rows].any()
    assert buffer.done.any() and metrics["games"] > 0


def test_config_trains_on_the_fully_searched_share():
    config = overrides_lib.override(
        presets_lib.preset("connect_four", "small"), ["full_search_fraction=0.25", "fast_simulations=8"]
    )
    # G = round(train_ratio · B · S · p / batch) = round(4 · 128 · 16 · 0.25 / 256) = 8 (32 without the cap)
    assert config.train_ratio == 4 and config.validate().train_steps_per_iteration == 8
    with pytest.raises(config_lib.ConfigError, match="fast_simulations"):
        overrides_lib.override(presets_lib.preset("connect_four", "small"), ["full_search_fraction=0.25"]).validate()
    with pytest.raises(config_lib.ConfigError, match="fast_simulations"):
        overrides_lib.override(
            presets_lib.preset("connect_four", "small"), ["full_search_fraction=0.5", "fast_simulations=32"]
        ).validate()
    with pytest.raises(config_lib.ConfigError, match="full_search_fraction"):
        overrides_lib.override(presets_lib.preset("connect_four", "small"), ["full_search_fraction=0"]).validate()
