"""Elo ratings from match results: a maximum-likelihood Bradley–Terry fit (BayesElo-style).

Model (AlphaGo Zero, Silver et al., Nature 2017, Methods, "Evaluation": logistic curve with c = 1/400; the "10^" form
of AlphaZero, Silver et al., Science 2018):

    P(a beats b) = 1 / (1 + 10^((R_b - R_a) / 400))

A draw counts as half a win for each side, so a pairing contributes the score s_ab = wins_a +
draws / 2 out of n_ab games, and the log-likelihood is

    L(R) = sum_{a != b} s_ab * log P(a beats b).

It is concave in R; we maximise it by Newton's method (with a backtracking line search) with the
anchor player's rating held fixed, and take confidence intervals from the observed Fisher
information (the negative Hessian of L with the anchor's row and column removed), i.e. Wald
intervals `R ± z * stderr` relative to the anchor.

Interval caveat: treating a draw as half a win and half a loss gives each game the binomial
variance p(1 - p), which is an upper bound on the variance of a game's score when draws occur, so
with many draws the intervals are slightly conservative (too wide), never too narrow.

Players with a perfect (or zero) score: the maximum-likelihood estimate exists only when the
"took at least half a point from" graph is strongly connected (Zermelo/Ford); otherwise some
rating goes to ±infinity. With `prior_draws=None` (the default) the fit adds **one virtual draw
to every pair of players that met** exactly when that condition fails, and adds nothing when it
holds (so hand-checkable cases are exact: 75% over any number of games gives 400·log10(3) ≈ 190.8
Elo). BayesElo uses the same device (virtual draws, its `prior` setting, default 2). Pass
`prior_draws=0.0` to forbid the prior, or a positive number to always add that many virtual draws
per pair. The prior actually used is reported in the result.

Everything is plain NumPy on the host; nothing here is traced by JAX.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Sequence

import numpy as np

ELO_SCALE = 400.0  # rating points per factor of 10 in the odds (c = 1/400)
_K = math.log(10.0) / ELO_SCALE  # natural-log units per Elo point


@dataclasses.dataclass(frozen=True)
class MatchResult:
    """Aggregate result of the games between two players."""

    player_a: str
    player_b: str
    wins_a: float  # games won by player_a
    draws: float  # drawn games
    wins_b: float  # games won by player_b


ResultLike = MatchResult | Sequence  # MatchResult or (a, b, wins_a, draws, wins_b)


@dataclasses.dataclass(frozen=True, eq=False)
class EloFit:
    """Fitted ratings. Arrays are indexed like `players`."""

    players: tuple[str, ...]  # [P] names, in order of first appearance in the results
    ratings: np.ndarray  # [P] Elo; ratings[anchor] == anchor_rating
    stderr: np.ndarray  # [P] standard error relative to the anchor (0 for the anchor)
    lower: np.ndarray  # [P] lower end of the `confidence` interval
    upper: np.ndarray  # [P] upper end of the `confidence` interval
    games: np.ndarray  # [P] real games played (virtual draws excluded)
    anchor: str  # player whose rating is fixed
    anchor_rating: float  # its fixed rating
    confidence: float  # e.g. 0.95
    prior_draws: float  # virtual draws added to each pair that met (0 = pure maximum likelihood)
    iterations: int  # Newton iterations used

    def rating(self, player: str) -> float:
        return float(self.ratings[self.players.index(player)])

    def interval(self, player: str) -> tuple[float, float]:
        i = self.players.index(player)
        return float(self.lower[i]), float(self.upper[i])

    def to_dict(self) -> dict:
        """JSON-friendly: {"anchor", "anchor_rating", "confidence", "prior_draws", "players": {name: {...}}}."""
        return {
            "anchor": self.anchor,
            "anchor_rating": float(self.anchor_rating),
            "confidence": float(self.confidence),
            "prior_draws": float(self.prior_draws),
            "players": {
                name: {
                    "elo": float(self.ratings[i]),
                    "lower": float(self.lower[i]),
                    "upper": float(self.upper[i]),
                    "stderr": float(self.stderr[i]),
                    "games": float(self.games[i]),
                }
                for i, name in enumerate(self.players)
            },
        }


def expected_score(rating_a: float, rating_b: float) -> float:
    """P(a beats b) (draws as half) = 1 / (1 + 10^((R_b - R_a) / 400))."""
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / ELO_SCALE))


def _as_match(r: ResultLike) -> MatchResult:
    if isinstance(r, MatchResult):
        return r
    a, b, wins_a, draws, wins_b = r
    return MatchResult(str(a), str(b), float(wins_a), float(draws), float(wins_b))


def _reachable(adj: np.ndarray, start: int) -> np.ndarray:
    """Boolean [P]: nodes reachable from `start` along edges adj[i, j] (i -> j)."""
    seen = np.zeros(adj.shape[0], dtype=bool)
    seen[start] = True
    frontier = [start]
    while frontier:
        i = frontier.pop()
        for j in np.flatnonzero(adj[i] & ~seen):
            seen[j] = True
            frontier.append(int(j))
    return seen


def _z_value(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)  # 1.959964 for 0.95


def _log_likelihood(theta: np.ndarray, score: np.ndarray) -> float:
    # log sigmoid(x) = -log1p(exp(-x)), computed stably with logaddexp.
    diff = theta[:, None] - theta[None, :]
    return float(-(score * np.logaddexp(0.0, -diff)).sum())


def fit_elo(
    results: Iterable[ResultLike],
    *,
    anchor: str | None = None,
    anchor_rating: float = 0.0,
    prior_draws: float | None = None,
    confidence: float = 0.95,
    max_iterations: int = 500,
    tolerance: float = 1e-10,
) -> EloFit:
    """Maximum-likelihood Elo ratings from pairwise results (see the module docstring).

    Args:
      results: MatchResult or (player_a, player_b, wins_a, draws, wins_b) items; the same pair may
        appear several times and in either order (results are summed).
      anchor: player whose rating is fixed at `anchor_rating` (default: the first player seen).
      prior_draws: virtual draws per pair that met; None = 1.0 only if the MLE does not exist.
      confidence: level of the reported intervals (0.95 -> ±1.96 standard errors).
      max_iterations, tolerance: Newton stopping rule (largest step, in Elo).

    Returns:
      EloFit. Raises ValueError if a player is not connected to the anchor by games, if a count is
      negative, or if `prior_draws=0` is forced on results whose MLE does not exist.
    """
    matches = [_as_match(r) for r in results]
    players: list[str] = []
    for m in matches:
        for name in (m.player_a, m.player_b):
            if name not in players:
                players.append(name)
    if len(players) < 2:
        raise ValueError("need results between at least two players")
    anchor = players[0] if anchor is None else anchor
    if anchor not in players:
        raise ValueError(f"anchor {anchor!r} played no games")
    index = {p: i for i, p in enumerate(players)}
    num = len(players)
    score = np.zeros((num, num))  # [P, P] score[a, b] = points a took from b (draw = 1/2)
    games = np.zeros((num, num))  # [P, P] games between a and b (symmetric)
    for m in matches:
        if min(m.wins_a, m.draws, m.wins_b) < 0:
            raise ValueError(f"negative game count in {m}")
        if m.player_a == m.player_b:
            raise ValueError(f"self-play result in {m}")
        a, b = index[m.player_a], index[m.player_b]
        score[a, b] += m.wins_a + 0.5 * m.draws
        score[b, a] += m.wins_b + 0.5 * m.draws
        games[a, b] += m.wins_a + m.draws + m.wins_b
        games[b, a] = games[a, b]
    met = games > 0  # [P, P]
    a_idx = index[anchor]
    connected = _reachable(met, a_idx)
    if not connected.all():
        lost = [players[i] for i in np.flatnonzero(~connected)]
        raise ValueError(f"players not connected to the anchor {anchor!r} by any chain of games: {lost}")

    # MLE exists iff every player can reach every other along "took points from" edges.
    took_points = score > 0
    mle_exists = bool(_reachable(took_points, a_idx).all() and _reachable(took_points.T, a_idx).all())
    if prior_draws is None:
        prior_draws = 0.0 if mle_exists else 1.0
    prior_draws = float(prior_draws)
    if prior_draws < 0:
        raise ValueError(f"prior_draws must be >= 0, got {prior_draws}")
    if prior_draws == 0.0 and not mle_exists:
        raise ValueError(
            "the maximum-likelihood ratings are infinite (some player or group won or lost all its "
            "games); use prior_draws=None or > 0"
        )
    fit_score = score + np.where(met, 0.5 * prior_draws, 0.0)  # [P, P]
    fit_games = games + np.where(met, prior_draws, 0.0)  # [P, P]

    free = np.array([i for i in range(num) if i != a_idx])  # [P-1]
    theta = np.zeros(num)  # [P] ratings in natural-log units relative to the anchor
    loglik = _log_likelihood(theta, fit_score)
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (read after the loop: the iterations used)
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))  # [P, P] P(i beats j)
        grad = (fit_score - fit_games * p).sum(axis=1)  # [P]
        info = fit_games * p * p.T  # [P, P] off-diagonal Fisher information n p (1 - p)
        fisher = np.diag(info.sum(axis=1)) - info  # [P, P] = -Hessian
        step = np.linalg.solve(fisher[np.ix_(free, free)], grad[free])
        # Backtracking line search: Newton's full step is almost always accepted.
        t = 1.0
        while True:
            candidate = theta.copy()
            candidate[free] += t * step
            new_loglik = _log_likelihood(candidate, fit_score)
            if new_loglik >= loglik - 1e-12 or t < 1e-8:
                break
            t *= 0.5
        theta, loglik = candidate, new_loglik
        if np.max(np.abs(t * step)) / _K < tolerance:
            break

    p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
    info = fit_games * p * p.T
    fisher = np.diag(info.sum(axis=1)) - info
    cov = np.linalg.inv(fisher[np.ix_(free, free)])  # [P-1, P-1] in natural-log units
    stderr = np.zeros(num)
    stderr[free] = np.sqrt(np.diag(cov)) / _K
    ratings = anchor_rating + theta / _K
    z = _z_value(confidence)
    return EloFit(
        players=tuple(players),
        ratings=ratings,
        stderr=stderr,
        lower=ratings - z * stderr,
        upper=ratings + z * stderr,
        games=games.sum(axis=1),
        anchor=anchor,
        anchor_rating=float(anchor_rating),
        confidence=float(confidence),
        prior_draws=prior_draws,
        iterations=iterations,
    )


def elo_difference(
    wins: float,
    draws: float,
    losses: float,
    *,
    prior_draws: float | None = None,
    confidence: float = 0.95,
) -> tuple[float, tuple[float, float]]:
    """Elo difference of a player over its opponent from one match, with a `confidence` interval.

    Equal to the two-player `fit_elo`: the difference is -400 log10(1/s - 1) for the score
    fraction s = (wins + draws/2) / games, and the interval is ±z / (k sqrt(n s (1 - s))), k =
    ln(10)/400. A perfect or zero score gets one virtual draw (see the module docstring), e.g.
    elo_difference(3, 0, 1) -> (190.85, ...) exactly, and elo_difference(10, 0, 0) is finite.
    """
    if wins + draws + losses <= 0:
        raise ValueError("no games")
    fit = fit_elo(
        [("player", "opponent", wins, draws, losses)], anchor="opponent", prior_draws=prior_draws, confidence=confidence
    )
    return fit.rating("player"), fit.interval("player")
