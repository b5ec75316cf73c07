"""The training iteration's programs as this checkout lowers them (StableHLO text, source locations removed), hashed:
two commits whose hashes agree run the same computation, so a throughput difference between them is the machine's.

    python -m experiments.performance.program_hash [--game connect_four] [--preset small] [--set k=v ...]

Prints one line per program (the whole iteration, its self-play half, its learning half): name, SHA-256 prefix,
characters. Run it in a worktree of each commit (experiments/performance/paired_bench.py makes them) with that tree
first on PYTHONPATH. Works with the layout before az_jax/core/ and az_jax/runtime/ too.
"""

import argparse
import hashlib
import re
import sys


def _trainer(game: str, preset_name: str, sets: list[str]):
    try:  # the rings as folders
        from az_jax.core.devices import make_mesh
        from az_jax.core.overrides import override
        from az_jax.core.presets import preset
        from az_jax.runtime.trainer import Trainer
    except ImportError:  # the flat layout before them
        from az_jax.config import override, preset  # type: ignore[no-redef]
        from az_jax.devices import make_mesh  # type: ignore[no-redef]
        from az_jax.trainer import Trainer  # type: ignore[no-redef]
    return Trainer(override(preset(game, preset_name), sets), make_mesh())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    import jax

    trainer = _trainer(args.game, args.preset, args.set)
    state = trainer.abstract_state()
    key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype)
    programs = {
        "iterate": lambda: trainer.iterate.lower(state),
        "selfplay": lambda: trainer.selfplay.lower(state, key),
        "learn": lambda: trainer.learn.lower(state, key),
    }
    for name, lower in programs.items():
        text = lower().as_text()
        text = re.sub(r"loc\([^)]*\)", "", text)  # source locations: file names and lines differ between commits
        text = re.sub(r"#loc[0-9]* = .*", "", text)
        print(f"{name:9s} {hashlib.sha256(text.encode()).hexdigest()[:16]} {len(text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
