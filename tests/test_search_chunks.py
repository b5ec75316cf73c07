"""Config.search_batch_size: self-play searches each device's games in groups, one group after the other, so only one
group's tree is alive at a time. Each group is exactly the search of those games with the group's key, and the trees'
memory is divided by the number of groups."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from az_jax.core import iteration as iteration_lib
from az_jax.core import selfplay as selfplay_lib
from az_jax.core.config import ConfigError
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.runtime import targets
from az_jax.runtime.trainer import Trainer

TINY = ["num_blocks=1", "num_channels=8", "value_hidden=8", "num_simulations=8", "selfplay_batch_size=8"]


@pytest.mark.parametrize("chunks", [2, 4])
def test_grouped_search_is_each_group_searched_with_its_own_key(chunks):
    config = override(preset("tic_tac_toe", "small"), TINY)
    setup = iteration_lib.make_setup(config)
    state = jax.jit(lambda: iteration_lib.init_state(setup, 0))()
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    # positions a few plies into the games: play 3 random legal moves in each of the 8 games
    games, rng = state.games.env, np.random.default_rng(0)
    for _ in range(3):
        mask = np.asarray(games.legal_action_mask)
        actions = jnp.asarray([rng.choice(np.flatnonzero(row)) for row in mask])
        games = jax.vmap(setup.env.step)(games, actions)
    search, key = setup.selfplay.search, jax.random.key(7)
    run = jax.jit(
        lambda k, g, c: selfplay_lib.search_in_chunks(setup.apply_fn, setup.env, variables, k, g, search, c),
        static_argnums=2,
    )
    grouped = run(key, games, chunks)
    size = 8 // chunks
    parts = [
        run(k, jax.tree.map(lambda x, i=i: x[i * size : (i + 1) * size], games), 1)
        for i, k in enumerate(jax.random.split(key, chunks))
    ]
    one_by_one = jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)
    sampled, weights, greedy, value, resign_value = grouped
    assert sampled.shape == greedy.shape == value.shape == resign_value.shape == (8,) and weights.shape == (8, 9)
    chex.assert_trees_all_close(grouped, one_by_one, rtol=1e-6, atol=1e-6)
    # one group is the search itself, key and all
    chex.assert_trees_all_close(
        run(key, games, 1),
        selfplay_lib.search_in_chunks(setup.apply_fn, setup.env, variables, key, games, search, 1),
        rtol=1e-6,
        atol=1e-6,
    )


def test_grouped_search_divides_the_trees_memory():
    # go_9x9, 64 games at 64 simulations, compiled for one H100 (compile-only): the search trees hold a pgx Go state
    # per node (64 games · 65 nodes), the bulk of self-play's temporaries; 4 groups of 16 games keep a quarter alive
    mesh = Mesh(np.asarray(targets.get_target("h100").topology_devices()), ("d",))
    temps = {}
    for chunks in (1, 4):
        config = override(
            preset("go_9x9", "small"),
            ["selfplay_batch_size=64", "num_simulations=64", "selfplay_steps=1", f"search_batch_size={64 // chunks}"],
        )
        trainer = Trainer(config, mesh)
        state = trainer.abstract_state()
        key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=NamedSharding(mesh, P()))
        temps[chunks] = trainer.selfplay.lower(state, key).compile().memory_analysis().temp_size_in_bytes
    assert temps[4] < 0.5 * temps[1], temps


def test_search_batch_size_must_divide_each_devices_games():
    config = override(preset("tic_tac_toe", "small"), ["selfplay_batch_size=8", "search_batch_size=3"])
    with pytest.raises(
        ConfigError, match="search_batch_size=3 must be 0 .all at once. or divide each device's 8 games"
    ):
        config.validate(1)
    config.validate(4)  # 2 games a device: one search of both
    override(preset("tic_tac_toe", "small"), ["selfplay_batch_size=8", "search_batch_size=2"]).validate(2)
    assert selfplay_lib.SelfPlayConfig.from_config(config).search_batch_size == 3
