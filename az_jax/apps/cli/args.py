"""The command line's argument parser and its number types: a bad argument is one line `az-jax: error: ...`, exit 2.

argparse prints the usage and then the error (two lines or more) and exits; `Parser` raises `UsageError` instead, so
that `main` reports it like every other user error. The type functions check a number where it is read, so that a
count of 0, a negative number of simulations or a seed of 1e30 never reach the library.
"""

import argparse
import re
from typing import NoReturn

MAX_SIMULATIONS = 1_000_000  # search simulations per move (the same bound as players.MAX_SIMULATIONS)
MAX_SEED = 2**32 - 1  # seeds are jax.random.key seeds; a 32-bit unsigned range is portable
MAX_COUNT = 10**9  # games, repeats, batch sizes, processes, plies: beyond this a value is a typo
MAX_DEVICES = 65_536  # --devices: host CPU devices to create, or accelerators to use


class UsageError(Exception):
    """A command line that does not parse (one-line message)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a UsageError naming the (sub)command, not usage text and an exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _integer(text: str) -> int:
    """An integer from decimal digits (with a sign): no floats, no '1e3', no thousands of digits."""
    if not re.fullmatch(r"[+-]?[0-9]{1,30}", text.strip()):
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(text)


def bounded_int(low: int, high: int):
    """The argparse type of an integer in [low, high]."""

    def parse(text: str) -> int:
        value = _integer(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {high}, got {text!r}")
        return value

    parse.__name__ = f"integer in [{low}, {high}]"
    return parse


positive_int = bounded_int(1, MAX_COUNT)
non_negative_int = bounded_int(0, MAX_COUNT)
simulations = bounded_int(0, MAX_SIMULATIONS)
seed = bounded_int(0, MAX_SEED)
devices = bounded_int(1, MAX_DEVICES)


def positive_float(text: str) -> float:
    """The argparse type of a finite number > 0 (seconds, rates)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def path(text: str) -> str:
    """The argparse type of a file or directory path: not empty, no NUL character (which no system call takes)."""
    if not text or "\x00" in text:
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r}")
    return text


def check_game_overrides(game: str, overrides: list[str]) -> None:
    """A `--set game=X` naming another game than `--game` is a UsageError: the run dir is named after --game, and the
    two must not disagree."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and key.strip() == "game" and value.strip() != game:
            raise UsageError(f"--game {game} and --set {item.strip()} disagree; give the game with --game only")


def add_search(parser) -> None:
    """`--search NAME`: the engine's search method (az_jax/core/search.py's METHODS, checked by `engine_search`)."""
    parser.add_argument(
        "--search",
        default="puct",
        metavar="NAME",
        help="the search method (puct, alphago, or one registered in az_jax/core/search.py) that grows the tree kept "
        "between moves; default puct",
    )


def engine_search(name: str) -> str:
    """`name` if it is a search method that can continue a kept tree; a UsageError (one line) otherwise."""
    from az_jax.core import search as search_lib  # starts JAX's backend: only once main has set the devices up

    try:
        method = search_lib.method(name)
    except ValueError as e:
        raise UsageError(f"--search: {e}") from None
    if not method.continues:
        able = ", ".join(n for n, m in search_lib.METHODS.items() if m.continues)
        raise UsageError(f"--search: {name} plans its budget ahead and cannot continue an engine's tree; use {able}")
    return name


def add_weights(parser) -> None:
    """`--weights best|latest`: which weights of a run play (az_jax.runtime.agent.load_agent's `weights`)."""
    parser.add_argument(
        "--weights",
        choices=("best", "latest"),
        default="best",
        help="a gated (AlphaGo Zero) run's best player, the default, or its latest weights; the same for other runs",
    )


def alphago_directory_agent(args):
    """The AlphaGo agent of the agent directory `args.run_dir` (az_jax/alphago/play_agent.py), with the search its
    preset names; UsageError (one line) when --step or --weights was given (they choose AlphaZero checkpoints) or a
    part of the directory is missing or unreadable."""
    # these start JAX's backend: only once main has set the devices up
    from az_jax.alphago import agent as alphago_agent
    from az_jax.alphago import play_agent, presets

    given = [flag for flag, value in (("--step", args.step), ("--weights", args.weights)) if value is not None]
    if given:
        raise UsageError(
            f"{' and '.join(given)}: for AlphaZero runs only; {args.run_dir} is an AlphaGo agent directory, which "
            "plays the latest network of each stage"
        )
    try:
        return play_agent.load(args.run_dir, expansion_threshold=getattr(args, "expansion_threshold", None))
    except (alphago_agent.AgentError, presets.PresetError) as e:
        raise UsageError(str(e)) from None
