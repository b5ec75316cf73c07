"""A person plays one game against an Agent in the terminal: `play_session(load_agent(run_dir))`.

The game is an az_jax.apps.session.GameSession. The board is drawn with `envs.notation.render`; moves are typed in the
game's usual notation (`envs.notation`). The agent searches exactly as in evaluation (`Agent.search`: greedy by visit
count, no root noise) and its move is shown with its root value estimate (from its own point of view, in [-1, 1])
and the most visited root moves.

Randomness: one `jax.random.key(seed)`, split for the initial state and for every agent search; no key is used twice.
"""

from __future__ import annotations

from collections.abc import Callable

from az_jax.apps.session import Analysis, GameSession
from envs import notation

QUIT_WORDS = ("quit", "exit")
LIST_WORDS = ("moves", "help", "?")
TOP_VISITS = 5  # root moves shown after each agent move


def _human_move(session: GameSession, input_fn: Callable[[str], str], print_fn: Callable[..., None]) -> bool:
    """Prompts until a legal move is typed and plays it; False when the person quits (a quit word, EOF or Ctrl-C)."""
    prompt = f"Your move ({session.side}): "
    while True:
        try:
            text = input_fn(prompt)
        except (EOFError, KeyboardInterrupt):
            return False
        word = text.strip().lower()
        if word in QUIT_WORDS:
            return False
        if word in LIST_WORDS:
            print_fn(f"Moves: {notation.notation_help(session.game)}.")
            print_fn("Legal now: " + " ".join(session.legal_moves()))
            continue
        try:
            session.move(text)
            return True
        except ValueError as e:
            print_fn(f"Error: {e}")


def _agent_line(analysis: Analysis) -> str:
    """The agent's move, its root value and the most visited root moves with their visit counts."""
    shown = ", ".join(f"{move} {visits}" for move, visits, _ in analysis.rows(TOP_VISITS) if visits > 0)
    return f"Agent ({analysis.side}) plays {analysis.best}   value {analysis.search_value:+.3f}   visits: {shown}"


def play_session(
    agent,
    *,
    human_first: bool = True,
    num_simulations: int | None = None,
    seed: int = 0,
    input_fn: Callable[[str], str] = input,
    print_fn: Callable[..., None] = print,
) -> float:
    """One game of a person against `agent` (an az_jax.runtime.agent.Agent). Returns the person's result: +1 win, 0
    draw, -1 loss; 0.0 also when the person quits ("quit", "exit", EOF). `human_first` picks who makes the first move;
    `num_simulations` overrides the agent's evaluation simulations."""
    session = GameSession(agent, human_first=human_first, num_simulations=num_simulations, seed=seed, auto_reply=False)
    game = session.game
    human_side = notation.player_names(game)[0 if human_first else 1]
    print_fn(
        f"{game}: you play {human_side} and move {'first' if human_first else 'second'}. "
        f"Moves: {notation.notation_help(game)}."
    )
    print_fn(f"Type {' / '.join(LIST_WORDS)} to list the legal moves, {' or '.join(QUIT_WORDS)} to stop.")
    while not session.over:
        print_fn(session.board())
        if session.human_to_move:
            if not _human_move(session, input_fn, print_fn):
                print_fn("Session ended.")
                return 0.0
        else:
            print_fn(_agent_line(session.agent_move()))
    print_fn(session.board())
    print_fn(session.status())
    result = session.result()
    assert result is not None  # the game is over
    return result
