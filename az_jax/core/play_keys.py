"""The config keys a match may set for the agent (`az-jax eval --set`, `evaluate.with_play_settings`): greedy
play's own, and the Gumbel search's Q transform (which self-play shares); none changes the network or what its
checkpoint holds. Imports nothing, so the CLI's help can list them before JAX starts (az_jax/apps/cli/)."""

PLAY_KEYS = ("eval_search", "pass_check", "eye_rule", "eval_symmetry_ensemble", "gumbel_c_scale", "gumbel_c_visit")
