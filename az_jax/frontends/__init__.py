"""az_jax as an engine for other programs: a search tree kept between moves (tree_search.py), time management
(clock.py), and the GTP (gtp_engine.py) and UCI (uci_engine.py) front-ends behind `az-jax gtp` and `az-jax uci`."""
