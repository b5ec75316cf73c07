"""A person plays one game against an Agent in the terminal: `play_session(load_agent(run_dir))`.

The board is drawn with `envs.notation.render`; moves are typed in the game's usual notation (`envs.notation`). The
agent searches exactly as in evaluation (`Agent.search`: greedy by visit count, no root noise) and its move is shown
with its root value estimate (from its own point of view, in [-1, 1]) and the most visited root moves.

Randomness: one `jax.random.key(seed)`, split for the initial state and for every agent search; no key is used twice.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from envs import notation

QUIT_WORDS = ("quit", "exit")
LIST_WORDS = ("moves", "help", "?")
TOP_VISITS = 5          # root moves shown after each agent move


def _over(state) -> bool:
    return bool(state.terminated) or bool(state.truncated)


def _ask_move(game: str, state, input_fn: Callable[[str], str], print_fn: Callable[..., None]) -> int | None:
    """Prompts until a legal move is typed; None when the person quits (a quit word, EOF or Ctrl-C)."""
    host = jax.device_get(state)
    prompt = f"Your move ({notation.side_to_move(game, host)}): "
    while True:
        try:
            text = input_fn(prompt)
        except (EOFError, KeyboardInterrupt):
            return None
        word = text.strip().lower()
        if word in QUIT_WORDS:
            return None
        if word in LIST_WORDS:
            print_fn(f"Moves: {notation.notation_help(game)}.")
            print_fn("Legal now: " + " ".join(notation.legal_moves(game, host)))
            continue
        try:
            return notation.parse_move(game, host, text)
        except ValueError as e:
            print_fn(f"Error: {e}")


def _agent_move(agent, game: str, state, key: jax.Array, num_simulations: int | None,
                print_fn: Callable[..., None]) -> int:
    """Searches a batch of one state, prints the chosen move, root value and top visit counts; returns the action."""
    host = jax.device_get(state)
    batch = jax.tree.map(lambda x: jnp.asarray(x)[None], state)
    actions, out = agent.search(batch, key, num_simulations)
    tree = out.search_tree                    # read on the host: Tree.summary() would compile a few eager ops
    root = mctx.Tree.ROOT_INDEX
    visits = np.asarray(jax.device_get(tree.children_visits[0, root]))
    value = float(jax.device_get(tree.node_values[0, root]))     # the agent's own point of view
    action = int(actions[0])
    top = [a for a in np.argsort(-visits, kind="stable")[:TOP_VISITS] if visits[a] > 0]
    shown = ", ".join(f"{notation.format_move(game, host, int(a))} {int(visits[a])}" for a in top)
    print_fn(f"Agent ({notation.side_to_move(game, host)}) plays {notation.format_move(game, host, action)}"
             f"   value {value:+.3f}   visits: {shown}")
    return action


def play_session(agent, *, human_first: bool = True, num_simulations: int | None = None, seed: int = 0,
                 input_fn: Callable[[str], str] = input, print_fn: Callable[..., None] = print) -> float:
    """One game of a person against `agent` (an az_jax.agent.Agent). Returns the person's result: +1 win, 0 draw,
    -1 loss; 0.0 also when the person quits ("quit", "exit", EOF). `human_first` picks who makes the first move;
    `num_simulations` overrides the agent's evaluation simulations."""
    game = agent.config.game
    env = agent.env
    init, step = jax.jit(env.init), jax.jit(env.step)
    key = jax.random.key(seed)
    key, init_key = jax.random.split(key)
    state = init(init_key)
    human = int(state.current_player) if human_first else 1 - int(state.current_player)
    human_side = notation.player_names(game)[0 if human_first else 1]
    print_fn(f"{game}: you play {human_side} and move {'first' if human_first else 'second'}. "
             f"Moves: {notation.notation_help(game)}.")
    print_fn(f"Type {' / '.join(LIST_WORDS)} to list the legal moves, {' or '.join(QUIT_WORDS)} to stop.")
    while not _over(state):
        print_fn(notation.render(game, state))
        if int(state.current_player) == human:
            action = _ask_move(game, state, input_fn, print_fn)
            if action is None:
                print_fn("Session ended.")
                return 0.0
        else:
            key, search_key = jax.random.split(key)
            action = _agent_move(agent, game, state, search_key, num_simulations, print_fn)
        state = step(state, jnp.int32(action))
    print_fn(notation.render(game, state))
    result = float(np.asarray(state.rewards)[human])
    print_fn("You win." if result > 0 else "You lose." if result < 0 else "Draw.")
    return result
