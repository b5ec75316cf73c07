"""`python -m az_jax.apps.cli ...`: the same as `az-jax ...`."""

import sys

from az_jax.apps.cli import main

sys.exit(main())
