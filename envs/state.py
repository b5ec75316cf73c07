"""Facts of one pgx state read on the host."""


def is_over(state) -> bool:
    """Whether one unbatched pgx state (device or host copy) is a finished game: terminated by the rules or truncated
    at a length cap."""
    return bool(state.terminated) or bool(state.truncated)
