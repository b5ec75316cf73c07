"""Go's rules in greedy play. The pass checked against the area count (Config.pass_check; envs/go_scoring.py,
`checked_pass`): the mover's margin and the opponent's pass on positions reached by real pgx moves, the rule's cases,
and the rule in `search.greedy_search` with a network that always wants to pass. The mover's own eyes (Config.eye_rule;
envs/go_eyes.py) on hand-made corners and centres, kept out of the search of a network that wants to fill one (greedy
search and the engines' kept tree), the rule's validation and `az-jax eval --set`. The GTP engine's pass check on its
kept tree's choice.

Counts by hand (9×9, komi 7.5 for White; an empty point belongs to a colour when every empty path from it reaches
that colour's stones only):
  * Black E5 (point 40), White passes: every empty point reaches Black only, so Black's area is 81 and Black, to move,
    leads by 81 − 7.5 = +73.5.
  * Black E5, White A9 (point 0): every empty point reaches both colours, so the areas are the stones, 1 and 1: Black,
    to move, trails by 1 − 1 − 7.5 = −7.5.
  * then Black J1 (point 80): areas 2 and 1, Black's margin 2 − 1 − 7.5 = −6.5, so White, to move, leads by +6.5.
  * or then Black passes: White, to move, leads by +7.5, and a pass ends the game.
"""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from az_jax.core import config as config_lib
from az_jax.core import search as search_lib
from envs import go_scoring

pytestmark = pytest.mark.usefixtures("fast_compiles")  # tiny programs: XLA's optimisation passes off (conftest.py)

ENV = envs.make_env("go_9x9")[0]
PASS = 81


def play(*actions: int):
    """The pgx state after `actions` from the empty board (unbatched)."""
    state = ENV.init(jax.random.key(0))
    for action in actions:
        state = ENV.step(state, jnp.int32(action))
    assert not bool(state.terminated)
    return state


LEADS_AFTER_PASS = play(40, PASS)  # Black to move, +73.5, the opponent passed
TRAILS = play(40, 0)  # Black to move, −7.5
LEADS = play(40, 0, 80)  # White to move, +6.5
LEADS_AFTER_PASS_WHITE = play(40, 0, PASS)  # White to move, +7.5, the opponent passed


def test_mover_margin_and_opponent_passed_by_hand():
    margins = [float(go_scoring.mover_margin(s)) for s in (LEADS_AFTER_PASS, TRAILS, LEADS, LEADS_AFTER_PASS_WHITE)]
    assert margins == [73.5, -7.5, 6.5, 7.5]
    passed = [bool(go_scoring.opponent_passed(s)) for s in (LEADS_AFTER_PASS, TRAILS, LEADS, LEADS_AFTER_PASS_WHITE)]
    assert passed == [True, False, False, True]


@pytest.mark.parametrize(
    "state, choice, best_other, expected",
    [
        (LEADS_AFTER_PASS, 20, 20, PASS),  # the opponent passed and the count is a win: pass ends it, won
        (LEADS_AFTER_PASS_WHITE, 5, 5, PASS),  # the same for White (the margin's sign follows the colour to move)
        (TRAILS, PASS, 10, 10),  # a pass would let the opponent win by passing back: the best other move instead
        (TRAILS, PASS, PASS, PASS),  # ... unless there is none
        (TRAILS, 20, 10, 20),  # not a pass: the search's move stands
        (LEADS, PASS, 3, PASS),  # a pass while the count is a win stands
        (LEADS, 3, 4, 3),  # and a move too (no opponent's pass before it)
    ],
)
def test_checked_pass_cases(state, choice, best_other, expected):
    assert int(go_scoring.checked_pass(state, jnp.int32(choice), jnp.int32(best_other))) == expected


def _wants_to_pass(variables, observation):
    """A network whose prior is all on pass and whose value is 0 everywhere: greedy search then plays pass."""
    batch = observation.shape[0]
    logits = jnp.full((batch, PASS + 1), -20.0).at[:, PASS].set(20.0)
    return logits, jnp.zeros((batch,))


@pytest.mark.parametrize("algorithm", ["gumbel", "puct"])
def test_greedy_search_checks_the_pass(algorithm):
    states = jax.tree.map(lambda *xs: jnp.stack(xs), TRAILS, LEADS)  # [2]: Black trails, White leads
    config = config_lib.Config(game="go_9x9", search=algorithm, num_simulations=8)

    def act(pass_check: bool):
        search = search_lib.SearchConfig.for_play(dataclasses.replace(config, pass_check=pass_check), 8)
        actions, out = search_lib.greedy_search(_wants_to_pass, ENV, {}, jax.random.key(1), states, search)
        return np.asarray(actions), out

    unchecked, _ = act(False)
    assert unchecked.tolist() == [PASS, PASS]  # the network's choice
    checked, out = act(True)
    assert checked[1] == PASS  # White leads by the count: its pass stands
    # Black trails: the most visited legal move other than pass (the prior gives all others the same tiny share)
    visits = np.asarray(search_lib.visit_counts(out))[0]
    legal = np.asarray(TRAILS.legal_action_mask)
    assert checked[0] != PASS and legal[checked[0]]
    assert visits[checked[0]] == visits[:PASS][legal[:PASS]].max()


# --- the mover's own eyes (Config.eye_rule; envs/go_eyes.py) ----------------------------------------------------------
# Points: row r, column c is r·9 + c. The corner point 0 has orthogonal neighbours 1 and 9 and one diagonal, 10; the
# centre 40 has 31, 39, 41, 49 and the diagonals 30, 32, 48, 50.
CORNER_EYE = play(1, 40, 9, 41)  # Black to move; 10 empty: an eye
CORNER_FALSE = play(1, 10, 9, 41)  # White's stone on the corner's one diagonal: a false eye
CENTRE_EYE = play(31, 0, 49, 8, 39, 72, 41, 30)  # Black to move; one White diagonal (30) inside the board: an eye
CENTRE_FALSE = play(31, 0, 49, 8, 39, 72, 41, 30, 80, 32)  # a second White diagonal (32): not an eye


def test_own_eyes_by_hand():
    from envs import go_eyes

    def eyes(state):
        return np.flatnonzero(np.asarray(go_eyes.own_eyes(state))).tolist()

    assert eyes(CORNER_EYE) == [0]
    assert eyes(CORNER_FALSE) == []
    assert eyes(CENTRE_EYE) == [40]
    assert eyes(CENTRE_FALSE) == []
    assert eyes(ENV.step(CORNER_EYE, jnp.int32(80))) == []  # White to move: Black's eye is not White's


def _wants_point_0(variables, observation):
    """A network whose prior is all on point 0 and whose value is 0 everywhere."""
    batch = observation.shape[0]
    return jnp.full((batch, PASS + 1), -20.0).at[:, 0].set(20.0), jnp.zeros((batch,))


@pytest.mark.parametrize("rule", ["off", "play"])
def test_greedy_search_does_not_fill_an_eye(rule):
    states = jax.tree.map(lambda x: x[None], CORNER_EYE)  # [1]
    config = config_lib.Config(game="go_9x9", search="gumbel", num_simulations=8, eye_rule=rule)
    search = search_lib.SearchConfig.for_play(config, 8)
    actions, out = search_lib.greedy_search(_wants_point_0, ENV, {}, jax.random.key(1), states, search)
    visits = np.asarray(search_lib.visit_counts(out))[0]
    if rule == "off":
        assert int(actions[0]) == 0  # the network's choice: its own eye
    else:
        assert int(actions[0]) != 0 and visits[0] == 0  # neither played nor searched
    assert search_lib.SearchConfig.for_selfplay(config).eye_rule_game is None  # "play": self-play untouched
    always = dataclasses.replace(config, eye_rule="always")
    assert search_lib.SearchConfig.for_selfplay(always).eye_rule_game == "go_9x9"


def test_engine_kept_tree_does_not_fill_an_eye():
    """The engines' kept tree (az_jax/frontends/tree_search.py) under the rule: the eye is neither visited nor chosen,
    at a fresh root and at a root reused from the tree after two moves (Black J9, point 8, then White J1, point 80)."""
    import types

    from az_jax.frontends.tree_search import TreeSearch, think

    def wants_0_then_8_80(variables, observation):  # point 0 first, then J9 and J1, nothing else
        logits, value = _wants_point_0(variables, observation)
        return logits.at[:, jnp.array([8, 80])].set(10.0), value

    # without the rule the eye is legal and the network's favourite by far (prior e^10 times J9's)
    assert (
        bool(CORNER_EYE.legal_action_mask[0])
        and int(jnp.argmax(wants_0_then_8_80({}, CORNER_EYE.observation[None])[0][0])) == 0
    )
    config = config_lib.Config(game="go_9x9", eye_rule="play")
    setup = types.SimpleNamespace(play_apply=wants_0_then_8_80)  # greedy play's network (Setup.play_apply)
    ts = TreeSearch(types.SimpleNamespace(config=config, variables={}, env=ENV, setup=setup), capacity=64, chunk=8)
    ts.reset(CORNER_EYE)
    think(ts, max_visits=16)
    assert 0 not in [m.action for m in ts.moves()] and ts.best_action() != 0
    ts.play(8)
    ts.play(80)
    assert ts.reused > 0  # the root came from the tree, with the priors its recurrent_fn masked
    think(ts, max_visits=ts.visits + 16)
    assert 0 not in [m.action for m in ts.moves()] and ts.best_action() != 0


def test_eye_rule_and_eval_set_errors(tmp_path):
    from az_jax.core.validation import ConfigError
    from az_jax.evaluation.evaluate import evaluate, with_play_settings
    from az_jax.runtime.agent import load_agent

    with pytest.raises(ConfigError, match="connect_four has no eyes"):
        config_lib.Config(game="connect_four", eye_rule="play").validate(1)
    with pytest.raises(ConfigError, match="eye_rule must be one of off, play, always"):
        config_lib.Config(game="go_9x9", eye_rule="sometimes").validate(1)
    agent = load_agent("tic_tac_toe")  # a shipped agent: no run needed
    with pytest.raises(ConfigError, match="greedy play only .* not 'num_channels'"):
        with_play_settings(agent, ("num_channels=8",))
    assert with_play_settings(agent, ("pass_check=false",)).config.pass_check is False
    # a match's own settings are in its results line
    evaluate("tic_tac_toe", "random", games=2, play=("pass_check=false",), out_dir=str(tmp_path), log=lambda m: None)
    line = json.loads((tmp_path / "eval" / "results.jsonl").read_text().splitlines()[-1])
    assert line["play"] == ["pass_check=false"] and line["games"] == 2


def test_gtp_genmove_passes_after_the_opponents_pass_when_the_count_wins(tmp_path):
    """The GTP engine's kept tree (az_jax/frontends/gtp_search.py), Config.pass_check on in the run's config: after
    Black E5 and White's pass, Black's area is the whole board, 81 − 7.5 = +73.5 by the count, so genmove passes and
    ends the game won, whatever the untrained network would have played."""
    from az_jax.frontends.gtp_engine import GoEngine
    from az_jax.runtime.agent import load_agent

    from test_gtp_engine import CAPACITY, SIMULATIONS, new_game, ok, save_tiny_go_run

    agent = load_agent(save_tiny_go_run(tmp_path / "run"))
    engine = GoEngine(agent, simulations=SIMULATIONS, resign_threshold=-1.0, capacity=CAPACITY)
    assert engine.agent.config.pass_check
    new_game(engine)
    ok(engine, "play b E5")
    ok(engine, "play w pass")
    assert ok(engine, "genmove b") == "pass"
    assert engine._over() and ok(engine, "final_score") == "B+73.5"
