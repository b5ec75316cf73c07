"""The core ring: pure functions and frozen pytrees of the algorithm (config and presets, the network, search,
self-play, replay, learning, gating, the iteration of one device, the device boundary). It imports nothing of az_jax
outside this folder but the games (envs/), never calls `jax.jit` or `print`, and holds no state between calls."""
