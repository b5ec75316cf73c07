"""The studies of az_jax: one package each, its scripts run as `python -m experiments.STUDY.SCRIPT` from the
repository root (README.md here is the index)."""
