"""The applications around the core: command line, benchmark, notebooks, terminal play, sweeps, populations.

Each imports only the public names of the core modules (az_jax.core.config, .iteration, .loop, .agent, ...).
"""
