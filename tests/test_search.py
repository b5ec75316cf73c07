"""Search alone finds tactics: with an uninformative network (uniform prior, value 0) the root's best move must come
from looking ahead in the real game.

Positions are built by playing fixed action sequences from env.init. pgx picks at random which player id moves first;
that changes nothing here since only the order of moves matters. One search per (game, algorithm) covers all of a
game's positions in one batch.

Tic-tac-toe actions are cells 0..8 row-major; connect four actions are columns 0..6.
"""

import dataclasses

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

import envs
from az_jax.core import search, validation
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.core.validation import ConfigError

from conftest import uninformative_model

# Programs that compile for far longer than they run: XLA's optimisation passes off (conftest.py).
pytestmark = pytest.mark.usefixtures("fast_compiles")

POSITIONS = {
    "tic_tac_toe": [
        # X: 0 1, O: 3 4. X to move wins at 2 (top row); O's threat at 5 does not matter.
        #   X X .
        #   O O .
        #   . . .
        dict(moves=[0, 3, 1, 4], best=2, legal=[2, 5, 6, 7, 8]),
        # X: 0 8, O: 4 2. X cannot win at once; O threatens 6 (anti-diagonal 2-4-6): X must block at 6.
        #   X . O
        #   . O .
        #   . . X
        dict(moves=[0, 4, 8, 2], best=6, legal=[1, 3, 5, 6, 7]),
    ],
    "connect_four": [
        # Column 6 filled first (6 alternating discs, no four), so it is illegal. Then A: 0 1 2, B: 0 1 2 on top.
        # A to move wins at 3 on the bottom row (B's row-1 threat at 3 comes too late).
        dict(moves=[6] * 6 + [0, 0, 1, 1, 2, 2], best=3, legal=[0, 1, 2, 3, 4, 5]),
        # Same but B to move with A threatening the bottom row at 3; B has no win of its own: B must block at 3.
        dict(moves=[6] * 6 + [0, 0, 1, 1, 2], best=3, legal=[0, 1, 2, 3, 4, 5]),
    ],
}
SIMULATIONS = {"tic_tac_toe": 200, "connect_four": 400}


def _positions(env, name):
    """The game's positions as one batched pgx state [P, ...]."""
    step = jax.jit(env.step)
    states = []
    for position in POSITIONS[name]:
        state = env.init(jax.random.key(7))
        for action in position["moves"]:
            state = step(state, jnp.int32(action))
        states.append(state)
    return jax.tree.map(lambda *x: jnp.stack(x), *states)


def _search(name: str, algorithm: str):
    """Searches every position of `name` without noise; returns (states, network outputs, search output, root visit
    counts, greedy actions) as numpy."""
    env, _ = envs.make_env(name)
    apply_fn, variables = uninformative_model(env)
    states = _positions(env, name)

    @jax.jit
    def run(variables, rng_key, states):
        settings = search.SearchConfig(
            num_simulations=SIMULATIONS[name], algorithm=algorithm, dirichlet_fraction=0.0, gumbel_scale=0.0
        )
        output = search.run_search(apply_fn, env, variables, rng_key, states, settings)
        greedy = search.greedy_action(output, states.legal_action_mask)
        return apply_fn(variables, states.observation), output, search.visit_counts(output), greedy

    return jax.tree.map(np.asarray, (states, *run(variables, jax.random.key(2), states)))


# One test per search, so each is compiled once whatever pytest-xdist does.
@pytest.mark.parametrize(
    "name,algorithm", [("tic_tac_toe", "puct"), ("connect_four", "puct"), ("tic_tac_toe", "gumbel")]
)
def test_search_finds_the_win_and_blocks_the_opponents_win(name, algorithm):
    states, (logits, value), output, visits, greedy = _search(name, algorithm)
    # The positions are the ones drawn above, and the network has no opinion: uniform prior, value 0.
    for i, position in enumerate(POSITIONS[name]):
        assert not states.terminated[i]
        np.testing.assert_array_equal(np.flatnonzero(states.legal_action_mask[i]), position["legal"])
    np.testing.assert_array_equal(logits, 0.0)
    np.testing.assert_array_equal(value, 0.0)

    best = np.array([p["best"] for p in POSITIONS[name]])
    if algorithm == "puct":
        np.testing.assert_array_equal(greedy, best)
        # Not a close call: the winning/blocking move takes most of the simulations (every other move loses).
        chosen = visits[np.arange(len(best)), best]
        assert (chosen > 0.5 * SIMULATIONS[name]).all(), visits
    else:
        # Gumbel MuZero's recommendation is out.action (argmax of g + logits + σ(q̂) among the considered actions).
        np.testing.assert_array_equal(output.action, best)
        # Without Gumbel noise the greedy move is that recommendation (not merely a most visited action).
        np.testing.assert_array_equal(greedy, output.action)
        assert (output.action_weights[np.arange(len(best)), best] > 0.9).all(), output.action_weights

    # The search policy (the training target π) puts no mass on illegal actions, and the root never visits them.
    illegal = ~states.legal_action_mask
    assert illegal.any(axis=1).all()  # every position has occupied cells / a full column to test this on
    np.testing.assert_array_equal(output.action_weights[illegal], 0.0)
    np.testing.assert_array_equal(visits[illegal], 0.0)
    np.testing.assert_allclose(output.action_weights.sum(axis=1), 1.0, rtol=1e-6)


def test_recurrent_fn_conventions():
    # One expansion step from the tic-tac-toe position X: 0 1, O: 3 4 (X to move), with a stand-in network whose
    # logits are [0, 1, ..., 8] and whose value is 0.7 everywhere.
    env, _ = envs.make_env("tic_tac_toe")
    apply_fn = lambda variables, obs: (jnp.tile(jnp.arange(9.0), (obs.shape[0], 1)), jnp.full(obs.shape[0], 0.7))
    recurrent_fn = search.make_recurrent_fn(env, apply_fn)
    position = jax.tree.map(lambda x: x[0], _positions(env, "tic_tac_toe"))
    states = jax.tree.map(lambda x: jnp.stack([x, x]), position)
    # Action 2 wins (completes the top row); action 5 blocks O and the game goes on.
    out, _ = jax.jit(recurrent_fn)({}, jax.random.key(0), jnp.int32([2, 5]), states)
    # The reward belongs to the player who just moved (X won: +1); a quiet move earns 0.
    np.testing.assert_array_equal(out.reward, [1.0, 0.0])
    # Discount −1 between plies (the next value is the opponent's), 0 once the game is over.
    np.testing.assert_array_equal(out.discount, [0.0, -1.0])
    # Nothing is backed up from beyond a terminal state: value 0 there, the network's 0.7 elsewhere.
    np.testing.assert_allclose(out.value, [0.0, 0.7], rtol=1e-6)
    # After X plays 5 the empty cells are 2, 6, 7, 8: their logits minus the max (8) stay, the rest get the lowest
    # float so that softmax gives them exactly 0.
    logits = np.asarray(out.prior_logits[1])
    np.testing.assert_array_equal(logits[[2, 6, 7, 8]], [2.0 - 8, 6.0 - 8, 7.0 - 8, 0.0])
    assert (logits[[0, 1, 3, 4, 5]] == np.finfo(np.float32).min).all()
    np.testing.assert_array_equal(jax.nn.softmax(out.prior_logits[1])[np.array([0, 1, 3, 4, 5])], 0.0)


def test_eval_search_picks_the_search_of_greedy_play():
    # The empty tic-tac-toe board, a network with no opinion (uniform prior, value 0), 4 simulations.
    env, _ = envs.make_env("tic_tac_toe")
    apply_fn, variables = uninformative_model(env)
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 1))
    visits = {}
    for eval_search in ("", "gumbel"):
        config = override(preset("tic_tac_toe", "paper"), {"search": "puct", "eval_search": eval_search})
        assert config.acting_search == (eval_search or "puct")
        settings = search.SearchConfig.for_play(config, num_simulations=4)
        _, out = jax.jit(lambda v, s, k, settings=settings: search.greedy_search(apply_fn, env, v, k, s, settings))(
            variables, states, jax.random.key(1)
        )
        visits[eval_search] = np.asarray(search.visit_counts(out))[0]
    # PUCT scores unvisited children as losses (Q = 0 on [0, 1]); the first child visited is worth 0.5 (a draw), so
    # the search keeps returning to it: one child gets all 4 visits. Gumbel's sequential halving visits 4 of the 9
    # considered children once each (4 simulations, the first phase).
    np.testing.assert_array_equal(np.sort(visits[""])[::-1][:2], [4, 0])
    np.testing.assert_array_equal(np.sort(visits["gumbel"])[::-1][:5], [1, 1, 1, 1, 0])


def test_puct_target_at_few_simulations_on_go_is_one_hot_where_gumbels_is_the_prior():
    # Why PUCT at the small preset's 32 simulations does not learn go_9x9 (experiments/go_9x9/README.md), on the empty
    # board with a network that has no opinion (uniform prior over the 82 legal actions, value 0), no noise.
    env, _ = envs.make_env("go_9x9")
    apply_fn, variables = uninformative_model(env)
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 1))
    assert int(states.legal_action_mask.sum()) == 82  # 81 points + pass
    config = preset("go_9x9", "small")
    targets = {}
    for algorithm, simulations in (("puct", 32), ("gumbel", 16)):
        settings = dataclasses.replace(
            search.SearchConfig.for_selfplay(config), algorithm=algorithm, num_simulations=simulations
        )
        settings = dataclasses.replace(settings, dirichlet_fraction=0.0, gumbel_scale=0.0)
        out = jax.jit(lambda v, s, k, settings=settings: search.run_search(apply_fn, env, v, k, s, settings))(
            variables, states, jax.random.key(1)
        )
        targets[algorithm] = (np.asarray(search.visit_counts(out))[0], np.asarray(out.action_weights)[0])
    # PUCT scores an unvisited child C(s)·P·sqrt(N) <= 1.2516 · (1/82) · sqrt(31) = 0.085 (C(s) = 1.25 +
    # log((1 + 32 + 19652) / 19652) = 1.2516), and the first child visited Q = 0.5 (value 0 on [0, 1]) plus its own
    # term: the search never leaves it. A second child needs C·P·sqrt(N) > 0.5, sqrt(N) > 0.5 · 82 / 1.25 = 32.8,
    # N > 1,076 simulations. So the training target (the visit distribution) is one-hot on an arbitrary move: in
    # self-play, on the move the root's Dirichlet noise favoured.
    visits, weights = targets["puct"]
    np.testing.assert_array_equal(np.sort(visits)[::-1][:2], [32, 0])
    assert weights.max() == 1.0
    # Gumbel's target softmax(logits + σ(completed Q)) completes every unvisited action's Q with the value estimate
    # (0 here), equal to the visited ones' Q = 0: the target is the prior, 1/82 on every legal action, so a search
    # that learned nothing teaches nothing (Danihelka et al. 2022, §4, completed Q-values).
    _, weights = targets["gumbel"]
    np.testing.assert_allclose(weights, np.full(82, 1 / 82), rtol=1e-5)
    # The small preset trains go_9x9 with Gumbel's target at 16 simulations.
    assert (config.search, config.num_simulations) == ("gumbel", 16)


def _two_move_tree_search(c_scale: float, c_visit: float):
    """Greedy Gumbel search (no Gumbel noise) at a root with two moves, prior logits [2, 0], where move 0 leads to a
    loss for the mover (Q = −1) and move 1 to a win (Q = +1); 2 simulations visit each move once."""

    def recurrent_fn(params, rng_key, action, embedding):
        del params, rng_key
        # the child's value is from its own mover's view; Q(root, a) = reward + discount · value = −value
        value = jnp.where(action == 0, 1.0, -1.0)  # [1]
        out = mctx.RecurrentFnOutput(
            reward=jnp.zeros(1), discount=-jnp.ones(1), prior_logits=jnp.zeros((1, 2)), value=value
        )
        return out, embedding

    root = mctx.RootFnOutput(prior_logits=jnp.array([[2.0, 0.0]]), value=jnp.zeros(1), embedding=jnp.zeros(1))
    settings = search.SearchConfig(
        num_simulations=2, algorithm="gumbel", gumbel_scale=0.0, gumbel_c_scale=c_scale, gumbel_c_visit=c_visit
    )
    out = search.gumbel(None, jax.random.key(0), root, recurrent_fn, jnp.zeros((1, 2), bool), settings)
    np.testing.assert_array_equal(np.asarray(search.visit_counts(out))[0], [1, 1])
    return int(out.action[0]), np.asarray(out.action_weights)[0]


@pytest.mark.parametrize(
    "c_scale, c_visit, move, target_win",
    [
        # σ(q̂) = (c_visit + max N) · c_scale · q̂ with max N = 1 and q̂ = [0, 1] (Q rescaled over the two children).
        # c_visit 0, c_scale 1: logits + σ = [2, 0 + 1] = [2, 1]: the prior's move; target softmax [2, 1] gives the
        # win 1 / (1 + e) = 0.269.
        (1.0, 0.0, 0, 1 / (1 + np.e)),
        # c_scale 3: [2, 3]: the winning move, target 1 / (1 + e^−1) = 0.731.
        (3.0, 0.0, 1, 1 / (1 + np.exp(-1.0))),
        # mctx's values 0.1 and 50: σ = 51 · 0.1 = 5.1, [2, 5.1]: target 1 / (1 + e^−3.1) = 0.957.
        (0.1, 50.0, 1, 1 / (1 + np.exp(-3.1))),
        # c_scale 0.03 with c_visit 50: σ = 51 · 0.03 = 1.53 < 2: the prior's move, target 1 / (1 + e^0.47) = 0.385.
        (0.03, 50.0, 0, 1 / (1 + np.exp(0.47))),
    ],
)
def test_gumbel_c_scale_and_c_visit_weigh_the_searched_values_against_the_prior(c_scale, c_visit, move, target_win):
    action, weights = _two_move_tree_search(c_scale, c_visit)
    assert action == move
    np.testing.assert_allclose(weights, [1 - target_win, target_win], rtol=1e-5)


def test_gumbel_c_scale_and_c_visit_reach_both_searches_from_the_config():
    config = override(preset("connect_four", "small"), {"gumbel_c_scale": 0.3, "gumbel_c_visit": 20.0})
    for settings in (search.SearchConfig.for_selfplay(config), search.SearchConfig.for_play(config, 64)):
        assert (settings.gumbel_c_scale, settings.gumbel_c_visit) == (0.3, 20.0)
    with pytest.raises(ConfigError, match="gumbel_c_scale must be > 0"):
        validation.check(override(config, {"gumbel_c_scale": 0.0}), 1, tuple(search.METHODS))
    with pytest.raises(ConfigError, match="gumbel_c_visit must be >= 0"):
        validation.check(override(config, {"gumbel_c_visit": -1.0}), 1, tuple(search.METHODS))
