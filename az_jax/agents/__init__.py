"""Trained agents that ship with az_jax, one `NAME.azagent` file each (az_jax/runtime/agent_file.py): loadable by NAME
wherever a run directory is taken (`az_jax.load_agent("connect_four")`, `az-jax play --run-dir connect_four`,
`az-jax gtp --run-dir go_9x9`, players `run:connect_four` in `az-jax eval`). README's "Shipped agents" says how each
was trained and what it measures."""
