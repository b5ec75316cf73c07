"""Game forking in self-play (Config.fork_fraction; KataGo: Wu 2019, not in the papers): each game keeps one of its
positions after a uniformly random legal move as a fork candidate (uniform among its positions), and its slot's next
game starts from that candidate with probability f."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from az_jax.core import config as config_lib
from az_jax.core import iteration, replay, search, selfplay
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.runtime import checkpoint as ckpt

from conftest import tiny_network, tiny_variables

pytestmark = pytest.mark.usefixtures("fast_compiles")  # a tiny program: XLA's optimisation passes off (conftest.py)

COPIES = 2000


def _offer_line(columns):
    """COPIES copies of one connect-four game playing `columns`, each position offered as a fork candidate (with its
    own key) before its move; returns the candidates' states, their plies and the stone counts of the candidates."""
    env, _ = envs.make_env("connect_four")
    state = selfplay.init(env, jax.random.key(0), COPIES, forking=True)
    offer = jax.jit(lambda s, key: selfplay.offer_forks(env, s, key))
    step = jax.jit(jax.vmap(env.step))
    for column, key in zip(columns, jax.random.split(jax.random.key(1), len(columns))):
        state = offer(state, key)
        state = state.replace(env=step(state.env, jnp.full(COPIES, column, jnp.int32)), ply=state.ply + 1)
    stones = np.asarray(state.fork.observation).reshape(COPIES, -1).sum(-1)  # connect four: [6, 7, 2] planes
    return state.fork, np.asarray(state.fork_ply), stones


def test_the_candidate_is_uniform_among_the_positions_after_a_random_move():
    # 10 plies, no position of them has a winning move (checked below), so every offer may be kept: the candidate's
    # ply (its position's ply + 1) is uniform on 1..10 (reservoir sampling: kept at ply t, the (t+1)-th offer, with
    # probability 1/(t + 1), then never replaced, with probability 1/(t+1) · (t+1)/(t+2) · ... · 9/10 = 1/10).
    fork, fork_ply, stones = _offer_line([0, 1, 2, 3, 4, 5, 6, 0, 1, 2])
    assert not np.asarray(fork.terminated).any()
    counts = np.bincount(fork_ply, minlength=11)
    # each count is Binomial(2000, 1/10): mean 200, sd sqrt(2000 · 0.1 · 0.9) = 13.4; 140–260 is 4.5 sd either side
    assert counts[0] == 0 and counts[1:].min() >= 140 and counts[1:].max() <= 260, counts
    # the candidate of ply k is the game's position k − 1 and one more stone: k stones on the board
    np.testing.assert_array_equal(stones, fork_ply)


def test_a_random_move_that_ends_the_game_is_never_a_candidate():
    # after 0, 0, 1, 1, 2, 2 the first player has three in a row on the bottom and column 3 wins. That position
    # (ply 6, the 7th offer) is kept with probability 1/7 and only when the random move is not column 3 (6 of 7):
    # 2000 · 1/7 · 6/7 = 245 candidates of ply 7 expected (sd 14.7), none with the winning stone.
    fork, fork_ply, _ = _offer_line([0, 0, 1, 1, 2, 2, 3])
    assert not np.asarray(fork.terminated).any()
    last = fork_ply == 7
    assert 185 <= last.sum() <= 305, last.sum()
    board = np.asarray(fork.observation).reshape(COPIES, 6, 7, 2).sum(-1)  # [game, row, column] stones
    moved = board[last].sum(1) - np.array([2, 2, 2, 0, 0, 0, 0])  # [game, column]: the random move's stone
    assert (moved.sum(-1) == 1).all()
    counts = np.bincount(moved.argmax(-1), minlength=7)
    # never column 3; each of the other six about 245 / 6 = 41 (sd 5.9)
    assert counts[3] == 0 and counts[[0, 1, 2, 4, 5, 6]].min() >= 15, counts


NUM_GAMES, PLIES = 64, 150


def _self_play(fork_fraction):
    """64 connect-four games with a tiny network and 2-simulation Gumbel search, 150 plies (about 7 games a slot);
    returns the final self-play state, the buffer [ply, game] and the summed metrics."""
    env, _ = envs.make_env("connect_four")
    net = tiny_network(env.num_actions)
    obs = env.init(jax.random.key(0)).observation
    variables = tiny_variables(net, obs[None].astype(jnp.float32), seed=1)
    settings = selfplay.SelfPlayConfig(
        search=search.SearchConfig(num_simulations=2, algorithm="gumbel"),
        num_plies=PLIES,
        sampling_moves=42,
        fork_fraction=fork_fraction,
    )
    games = selfplay.init(env, jax.random.key(2), NUM_GAMES, forking=fork_fraction > 0)
    buffer = replay.init(PLIES * NUM_GAMES, env.observation_shape, obs.dtype, env.num_actions)  # ply t, game b: t·B+b
    play = jax.jit(
        lambda games, buffer, key: selfplay.play(
            env, lambda v, o: net.apply(v, o, train=False), variables, settings, games, buffer, key, jnp.int32(0)
        )
    )
    return jax.tree.map(np.asarray, play(games, buffer, jax.random.key(3)))


def test_half_the_new_games_start_from_a_fork_and_their_plies_count_from_the_initial_position():
    state, buffer, metrics = _self_play(0.5)
    stones = buffer.observation.reshape(PLIES * NUM_GAMES, -1).sum(-1)
    # every game's first stored position: the row of the smallest ply of each (slot, episode); row t·B + b
    ply_of_row = np.arange(PLIES * NUM_GAMES) // NUM_GAMES
    first = {}
    for row in np.argsort(ply_of_row, kind="stable"):
        first.setdefault((buffer.slot[row], buffer.episode[row]), row)
    later = [row for (slot, episode), row in first.items() if episode > 0]  # games that began after a reset
    forked = stones[later] > 0  # no random openings: a game that starts fresh starts on the empty board
    # each reset forks with probability 1/2: every ended game has a candidate, as its first position's offer is kept
    # with probability 1 unless the random move ends the game (one stone on an empty board cannot; a fork starting one
    # move from a win rarely): Binomial(n, 1/2), 4 sd either side
    n = len(later)
    assert n > 250 and abs(forked.sum() - n / 2) <= 4 * np.sqrt(n / 4), (forked.sum(), n)
    # the metric counts the same forks, and those begun at the last ply's reset (no position of theirs stored yet)
    unstored = np.array([(b, state.episode[b]) not in first for b in range(NUM_GAMES)])
    assert metrics["forked"] == forked.sum() + np.sum(unstored & (state.ply > 0))
    # a fork starts at the ply of its position: after the run every slot's ply is its board's stone count
    np.testing.assert_array_equal(state.env.observation.reshape(NUM_GAMES, -1).sum(-1), state.ply)
    # forks start deeper than one stone on average (uniform among their parents' positions, ~20 plies long)
    assert stones[later][forked].mean() > 4


def test_off_by_default_and_fixed_for_a_run():
    _, _, metrics = _self_play(0.0)
    assert "forked" not in metrics
    config = presets_lib.preset("connect_four", "small")
    assert config.fork_fraction == 0.0
    for bad in ("fork_fraction=1.0", "fork_fraction=-0.1"):
        with pytest.raises(config_lib.ConfigError, match=r"fork_fraction must be in \[0, 1\)"):
            overrides_lib.override(config, [bad]).validate()
    forking = overrides_lib.override(config, ["fork_fraction=0.25"]).validate()
    # the run's self-play state keeps a candidate a game (shapes only: eval_shape runs nothing)
    state = jax.eval_shape(lambda: iteration.init_state(iteration.make_setup(forking), 0))
    assert state.games.fork_ply.shape == (config.selfplay_batch_size,)
    assert jax.eval_shape(lambda: iteration.init_state(iteration.make_setup(config), 0)).games.fork is None
    with pytest.raises(ckpt.CheckpointError, match="fork_fraction"):
        ckpt.check_compatible(config, forking, "run")
