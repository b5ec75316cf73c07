"""Evaluation of trained agents: Elo ratings (and, through `az_jax.engines`, external engines)."""

from az_jax.evaluation.elo import EloFit, MatchResult, elo_difference, expected_score, fit_elo

__all__ = ["EloFit", "MatchResult", "elo_difference", "expected_score", "fit_elo"]
