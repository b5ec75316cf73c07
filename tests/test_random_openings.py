"""Random openings in self-play (Config.random_opening_plies, not in the papers): the first K plies of each game are
uniformly random legal moves, still searched and stored with the search's targets; play after them is the search's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from az_jax.core import config as config_lib
from az_jax.core import iteration, learner, replay, search, selfplay
from az_jax.core import overrides as overrides_lib
from az_jax.core import presets as presets_lib
from az_jax.runtime import checkpoint as ckpt

from conftest import tiny_network, tiny_variables

pytestmark = pytest.mark.usefixtures("fast_compiles")  # a tiny program: XLA's optimisation passes off (conftest.py)

NUM_GAMES, PLIES = 700, 4


def _play(random_opening_plies, after_rate_step=0, optimizer_step=None, buffer_out=None):
    """700 connect-four games, 4 plies each, greedy Gumbel-8 search without its Gumbel noise (so every game would
    play the same moves); returns the buffer's observations and policy targets as [ply, game, ...]. With
    `after_rate_step` the learner's rate step is at step 100 and `optimizer_step` is the learner's count. With
    `buffer_out` (a list) the buffer keeps which outcomes are value targets and is appended to it."""
    env, _ = envs.make_env("connect_four")
    net = tiny_network(env.num_actions)
    obs = env.init(jax.random.key(0)).observation
    variables = tiny_variables(net, obs[None].astype(jnp.float32), seed=1)
    settings = selfplay.SelfPlayConfig(
        search=search.SearchConfig(num_simulations=8, algorithm="gumbel", gumbel_scale=0.0),
        num_plies=PLIES,
        sampling_moves=0,
        random_opening_plies=random_opening_plies,
        random_opening_plies_after_rate_step=after_rate_step,
        rate_step=100,
    )
    games = selfplay.init(env, jax.random.key(2), NUM_GAMES)
    buffer = replay.init(
        PLIES * NUM_GAMES, env.observation_shape, obs.dtype, env.num_actions, keep_value_known=buffer_out is not None
    )  # ply t, game b: row t·B+b
    play = jax.jit(
        lambda games, buffer, key: selfplay.play(
            env,
            lambda v, o: net.apply(v, o, train=False),
            variables,
            settings,
            games,
            buffer,
            key,
            jnp.int32(0),
            optimizer_step=None if optimizer_step is None else jnp.int32(optimizer_step),
        )
    )
    _, buffer, _ = jax.tree.map(np.asarray, play(games, buffer, jax.random.key(3)))
    if buffer_out is not None:
        buffer_out.append(buffer)
    observations = buffer.observation.reshape(PLIES, NUM_GAMES, -1)
    return observations, buffer.policy.reshape(PLIES, NUM_GAMES, -1)


def _first_columns(observations):
    """The column of each game's first stone: the one occupied square of the position before ply 1 (connect four's
    observation is [6 rows, 7 columns, 2 planes])."""
    board = observations[1].reshape(NUM_GAMES, 6, 7, 2).sum(-1)  # [game, row, column]: 1 where a stone is
    assert (board.sum((1, 2)) == 1).all()
    return board.sum(1).argmax(-1)  # [game]


def test_first_plies_are_uniform_then_the_search_plays():
    observations, policy = _play(random_opening_plies=2)
    counts = np.bincount(_first_columns(observations), minlength=7)
    # Uniform over 7 columns: each count is Binomial(700, 1/7), mean 100, sd sqrt(700 · 1/7 · 6/7) = 9.3; 60–140 is
    # more than 4 sd either side.
    assert counts.sum() == NUM_GAMES and counts.min() >= 60 and counts.max() <= 140, counts
    # Every game's first position is the same empty board, searched alike: the stored target is the search's visit
    # distribution (the same in all 700 rows), not the random move that was played from it.
    np.testing.assert_allclose(policy[0], np.broadcast_to(policy[0, :1], policy[0].shape), atol=1e-6)
    assert policy[0, 0].max() < 1.0
    # Ply 2 (the third) is the search's greedy move again: games that reached the same position after the two random
    # plies reach the same position after ply 2 (a random third move would split the ~14 games of an opening).
    after = {}
    for before, following in zip(map(bytes, observations[2]), map(bytes, observations[3])):
        after.setdefault(before, set()).add(following)
    assert len(after) > 7  # the two random plies made many openings (49 at most)
    assert all(len(following) == 1 for following in after.values())


def test_without_the_switch_every_game_opens_alike():
    observations, _ = _play(random_opening_plies=0)
    counts = np.bincount(_first_columns(observations), minlength=7)
    assert counts.max() == NUM_GAMES  # greedy search without noise, one network: one first move


def test_the_random_plies_change_at_the_rate_step():
    # None before the learner's rate step (step 99 < 100): greedy search without noise, every game opens alike
    before, _ = _play(random_opening_plies=0, after_rate_step=2, optimizer_step=99)
    assert np.bincount(_first_columns(before), minlength=7).max() == NUM_GAMES
    # two from the step on (step 100): the first stones spread over the 7 columns, each count Binomial(700, 1/7)
    # (mean 100, sd 9.3; 60-140 is more than 4 sd either side)
    after, _ = _play(random_opening_plies=0, after_rate_step=2, optimizer_step=100)
    counts = np.bincount(_first_columns(after), minlength=7)
    assert counts.min() >= 60 and counts.max() <= 140, counts


def test_config_checks_the_value():
    config = presets_lib.preset("tic_tac_toe", "small")
    assert config.random_opening_plies == 0  # off unless asked for
    assert overrides_lib.override(config, ["random_opening_plies=4"]).validate().random_opening_plies == 4
    with pytest.raises(config_lib.ConfigError, match="random_opening_plies must be >= 0"):
        overrides_lib.override(config, ["random_opening_plies=-1"]).validate()
    with pytest.raises(config_lib.ConfigError, match="random_opening_plies_after_rate_step must be >= 0"):
        overrides_lib.override(config, ["random_opening_plies_after_rate_step=-2"]).validate()
    with pytest.raises(config_lib.ConfigError, match="needs a rate step"):
        overrides_lib.override(config, ["random_opening_plies_after_rate_step=8", "lr_boundaries="]).validate()


def test_a_run_may_resume_with_other_openings():
    # Only the moves played change, not the saved state's shapes or keys: a resumed run may take more or fewer random
    # plies (or none), where a key of the state's shapes, such as the replay's size, refuses the run dir.
    saved = overrides_lib.override(presets_lib.preset("connect_four", "small"), ["random_opening_plies=4"])
    for plies in ("8", "0"):
        ckpt.check_compatible(saved, overrides_lib.override(saved, [f"random_opening_plies={plies}"]), "run")
        ckpt.check_compatible(
            saved, overrides_lib.override(saved, [f"random_opening_plies_after_rate_step={plies}"]), "run"
        )
    # self-play's simulations per move likewise (no search tree is kept between plies)
    ckpt.check_compatible(saved, overrides_lib.override(saved, ["num_simulations=32"]), "run")
    # and the plies whose move is sampled from the search's policy (only the moves played change)
    ckpt.check_compatible(saved, overrides_lib.override(saved, ["temperature_moves=16"]), "run")
    with pytest.raises(ckpt.CheckpointError, match="replay_capacity"):
        ckpt.check_compatible(saved, overrides_lib.override(saved, ["replay_capacity=1024"]), "run")


def test_the_positions_before_a_random_move_are_no_value_targets():
    # Config.mask_random_opening_values: with 2 random plies, the positions of plies 0 and 1 have a random move after
    # them (their z would follow it); those of plies 2 and 3 are followed by the search's moves only. No game of
    # connect four ends within 4 plies, so row t·700 + b is ply t of game b.
    kept = []
    _play(random_opening_plies=2, buffer_out=kept)
    known = kept[0].value_known.reshape(PLIES, NUM_GAMES)
    assert not known[:2].any() and known[2:].all()
    # the batch's value weights are those flags: 0 for rows of plies 0-1, 1 for plies 2-3
    buffer = kept[0].replace(done=np.ones(PLIES * NUM_GAMES, bool))
    batch = replay.sample(buffer, jax.random.key(4), 512)
    first_ply = batch.observation.reshape(512, -1).sum(-1) < 2  # 0 or 1 stone on the board: ply 0 or 1
    np.testing.assert_array_equal(batch.value_weight, np.where(first_ply, 0.0, 1.0))
    # after the rate step (the schedule's 2 random plies from step 100), the same flags
    kept = []
    _play(random_opening_plies=0, after_rate_step=2, optimizer_step=100, buffer_out=kept)
    known = kept[0].value_known.reshape(PLIES, NUM_GAMES)
    assert not known[:2].any() and known[2:].all()
    # before the step no ply is random: every outcome is a target
    kept = []
    _play(random_opening_plies=0, after_rate_step=2, optimizer_step=99, buffer_out=kept)
    assert kept[0].value_known.all()


class FixedOutputNet:
    """Returns a fixed policy and value, as learning_apply(network) does."""

    def __init__(self, logits, value):
        self.outputs = (jnp.float32(logits), jnp.float32(value))

    def __call__(self, variables, observation):
        return self.outputs, {"batch_stats": variables["batch_stats"]}


def test_the_value_loss_leaves_out_the_positions_of_weight_0():
    batch = replay.Batch(
        observation=jnp.zeros((3, 1)),
        policy=jnp.float32([[1.0, 0.0]] * 3),
        legal=jnp.ones((3, 2), bool),
        outcome=jnp.float32([1.0, -1.0, 0.0]),
        value_weight=jnp.float32([1.0, 0.0, 1.0]),
    )
    # value 0.5 everywhere: squared errors 0.25, 2.25, 0.25; the middle one (weight 0) left out: (0.25 + 0.25) / 2 =
    # 0.25 (all three: 2.75 / 3 ≈ 0.917). The policy loss is every row's: −ln ½ = ln 2.
    net = FixedOutputNet(logits=[[0.0, 0.0]] * 3, value=[0.5] * 3)
    loss, (_, metrics) = learner.loss_fn({"w": jnp.float32(0.0)}, {}, net, batch, 0.0)
    np.testing.assert_allclose(metrics["value_loss"], 0.25, rtol=1e-6)
    np.testing.assert_allclose(metrics["policy_loss"], np.log(2.0), rtol=1e-6)
    np.testing.assert_allclose(loss, 0.25 + np.log(2.0), rtol=1e-6)
    # every weight 0: the value loss is 0, not 0 / 0
    _, (_, metrics) = learner.loss_fn({"w": jnp.float32(0.0)}, {}, net, batch.replace(value_weight=jnp.zeros(3)), 0.0)
    assert float(metrics["value_loss"]) == 0.0


def test_the_mask_needs_openings_keeps_a_flag_a_row_and_is_fixed_for_a_run():
    config = presets_lib.preset("connect_four", "small")
    assert config.random_opening_plies == 4 and not config.mask_random_opening_values
    with pytest.raises(config_lib.ConfigError, match="mask_random_opening_values needs random openings"):
        overrides_lib.override(config, ["random_opening_plies=0", "mask_random_opening_values=true"]).validate()
    masked = overrides_lib.override(config, ["mask_random_opening_values=true"]).validate()
    # the run's replay buffer keeps one flag a row (shapes only: eval_shape runs nothing)
    state = jax.eval_shape(lambda: iteration.init_state(iteration.make_setup(masked), 0))
    assert state.replay.value_known.shape == (config.replay_capacity,)
    assert jax.eval_shape(lambda: iteration.init_state(iteration.make_setup(config), 0)).replay.value_known is None
    with pytest.raises(ckpt.CheckpointError, match="mask_random_opening_values"):
        ckpt.check_compatible(config, masked, "run")
