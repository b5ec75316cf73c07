"""Tests for az_jax.evaluation.elo: hand-checkable cases and recovery of known ratings."""

import json
import math

import numpy as np
import pytest

from az_jax.evaluation import MatchResult, elo_difference, expected_score, fit_elo

K = math.log(10.0) / 400.0  # natural-log units per Elo point


def test_expected_score_logistic_base_10():
    # 400 Elo = a factor of 10 in the odds: P = 10 / 11.
    assert expected_score(400.0, 0.0) == pytest.approx(10.0 / 11.0)
    assert expected_score(0.0, 0.0) == pytest.approx(0.5)
    assert expected_score(0.0, 400.0) + expected_score(400.0, 0.0) == pytest.approx(1.0)


def test_75_percent_score_is_190_8_elo():
    # s = 0.75 -> odds 3:1 -> 400 * log10(3) = 400 * 0.477121 = 190.849 Elo.
    expected = 400.0 * math.log10(3.0)
    diff, (lo, hi) = elo_difference(75, 0, 25)
    assert diff == pytest.approx(expected, abs=1e-6)
    # Wald interval: stderr = 1 / (k sqrt(n s (1 - s))) = 1 / (0.0057565 * sqrt(100 * 0.1875))
    #              = 1 / (0.0057565 * 4.3301) = 40.12 Elo; 95% -> ±1.95996 * 40.12 = ±78.63.
    half_width = 1.959964 / (K * math.sqrt(100 * 0.75 * 0.25))
    assert half_width == pytest.approx(78.63, abs=0.01)
    assert lo == pytest.approx(expected - half_width, abs=1e-6)
    assert hi == pytest.approx(expected + half_width, abs=1e-6)
    # Draws count half: 50 wins + 50 draws + 0 losses is also a 75% score.
    assert elo_difference(50, 50, 0)[0] == pytest.approx(expected, abs=1e-6)
    # And a two-player fit gives the same number, with the anchor where we put it.
    fit = fit_elo([MatchResult("new", "old", 3, 0, 1)], anchor="old", anchor_rating=1000.0)
    assert fit.rating("old") == 1000.0
    assert fit.rating("new") == pytest.approx(1000.0 + expected, abs=1e-6)
    assert fit.prior_draws == 0.0  # the MLE exists: no virtual draws were added


def test_result_order_and_splitting_do_not_matter():
    a = fit_elo([("x", "y", 30, 10, 20)], anchor="y")
    b = fit_elo([("y", "x", 12, 4, 18), ("x", "y", 12, 6, 8)], anchor="y")  # same totals, split and swapped
    assert a.rating("x") == pytest.approx(b.rating("x"), abs=1e-8)
    assert a.stderr[a.players.index("x")] == pytest.approx(b.stderr[b.players.index("x")], abs=1e-8)


def test_recovers_known_ratings_from_synthetic_matches():
    true = {"p0": 0.0, "p200": 200.0, "p400": 400.0, "p800": 800.0}
    names = list(true)
    games_per_pair = 2000
    rng = np.random.default_rng(20240611)
    results = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            p = expected_score(true[a], true[b])
            # Draw model: P(draw) = 0.8 p (1 - p) (0.2 between equals, less for mismatches), and
            # P(win) = p - P(draw)/2 so that the expected score is exactly p (draw = half a win).
            d = 0.8 * p * (1.0 - p)
            wins_a, draws, wins_b = rng.multinomial(games_per_pair, [p - d / 2, d, 1.0 - p - d / 2])
            results.append((a, b, wins_a, draws, wins_b))
    fit = fit_elo(results, anchor="p0")
    # Tolerance arithmetic: with 2,000 games per pair, the Fisher information (n p (1 - p) summed
    # over pairs, draws ignored, which only overstates the variance) gives standard errors of
    # 7.8, 9.0 and 13.4 Elo for p200, p400 and p800 relative to p0, so ±40 Elo is >= 3 standard
    # errors for every player (the chance of a false failure is < 0.3% per player, and the seed is
    # fixed anyway). The reported stderr must agree with that arithmetic.
    for name, target in true.items():
        assert fit.rating(name) == pytest.approx(target, abs=40.0), (name, fit.to_dict())
    assert fit.stderr[fit.players.index("p800")] == pytest.approx(13.4, abs=1.5)
    assert fit.stderr[fit.players.index("p0")] == 0.0
    # The truth lies inside the reported 95% intervals (checked for this seed).
    for name, target in true.items():
        lo, hi = fit.interval(name)
        assert lo <= target <= hi, (name, lo, hi)
    # JSON-friendly output.
    blob = json.loads(json.dumps(fit.to_dict()))
    assert set(blob["players"]) == set(true)
    assert blob["players"]["p800"]["games"] == 3 * games_per_pair


def test_perfect_score_gets_one_virtual_draw_and_stays_finite():
    # "top" beat everybody: the MLE is infinite, so one virtual draw per pair that met is added.
    results = [("top", "mid", 10, 0, 0), ("mid", "low", 6, 2, 2), ("top", "low", 5, 0, 0)]
    fit = fit_elo(results, anchor="low")
    assert fit.prior_draws == 1.0
    assert np.all(np.isfinite(fit.ratings)) and np.all(np.isfinite(fit.stderr))
    assert fit.rating("top") > fit.rating("mid") > fit.rating("low") == 0.0
    # Single match: 10-0 plus one virtual draw = 10.5 / 11 -> 400 log10(10.5 / 0.5) = 400 log10(21).
    diff, _ = elo_difference(10, 0, 0)
    assert diff == pytest.approx(400.0 * math.log10(21.0), abs=1e-6)  # 528.89
    assert elo_difference(0, 0, 10)[0] == pytest.approx(-400.0 * math.log10(21.0), abs=1e-6)
    with pytest.raises(ValueError, match="infinite"):
        fit_elo(results, anchor="low", prior_draws=0.0)


def test_disconnected_players_are_rejected():
    with pytest.raises(ValueError, match="not connected"):
        fit_elo([("a", "b", 1, 1, 1), ("c", "d", 1, 1, 1)], anchor="a")
