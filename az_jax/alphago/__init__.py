"""AlphaGo (Silver et al., "Mastering the game of Go with deep neural networks and tree search", Nature 2016) on pgx
Go: the input features (Extended Data Table 2), the policy and value networks, supervised learning from expert games,
and the stages built on them. An outer ring of az_jax: the AlphaZero core imports nothing from here."""
