"""One game of a person against an `az_jax.runtime.agent.Agent`, for the terminal (az_jax/apps/terminal.py) and the
notebook (az_jax/apps/notebook.py): the position, the moves so far, the person's moves typed in the game's notation
(envs/notation) and the agent's replies, each with the agent's `Analysis` of the position it moved from. The notebook
shows a session as HTML (pgx's SVG board) and as an ipywidgets UI (`GameSession.widget`).

    session = GameSession(load_agent(run_dir), human_first=True)
    session.play("4")          # the person's move and the agent's reply; session.last_analysis is what it saw

The agent searches exactly as in evaluation (`Agent.search`: greedy by visit count, no root noise). Randomness: one
`jax.random.key(seed)`, split for the initial state and for every search; no key is used twice.
"""

from __future__ import annotations

import dataclasses
import html

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from envs import is_over, notation
from envs.render import render_svg

MAX_BUTTONS = 25  # games with more legal moves than this get a text box instead of one button per move


# --- the search's view of a position ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Analysis:
    """What the agent thinks of one position, from the side to move's point of view."""

    side: str  # the side to move, as envs.notation names it ("X", "White", ...)
    moves: tuple[str, ...]  # [L] the legal moves in the game's notation, in action order
    actions: tuple[int, ...]  # [L] their pgx actions
    visits: np.ndarray  # [L] root visit counts of the search
    prior: np.ndarray  # [L] the network's move probabilities (masked softmax)
    search_value: float  # the root's value after the search, in [-1, 1]
    network_value: float  # the network's value of the position, in [-1, 1]
    best: str  # the move the agent plays (greedy by visits, as in evaluation)
    simulations: int

    @property
    def best_action(self) -> int:
        return self.actions[self.moves.index(self.best)]

    def rows(self, top: int | None = None) -> list[tuple[str, int, float]]:
        """(move, visits, prior) by visits, most first (ties: action order); the `top` first."""
        order = sorted(range(len(self.moves)), key=lambda i: (-int(self.visits[i]), i))
        return [(self.moves[i], int(self.visits[i]), float(self.prior[i])) for i in order[:top]]

    def text(self, top: int = 7) -> str:
        lines = [
            f"search ({self.simulations} simulations): value {self.search_value:+.3f}, plays {self.best}; "
            f"network value {self.network_value:+.3f}",
            f"{'move':>6} {'visits':>7} {'prior':>6}",
        ]
        lines += [f"{m:>6} {v:>7d} {p:>6.3f}" for m, v, p in self.rows(top)]
        return "\n".join(lines)

    def _repr_html_(self, top: int = 10) -> str:
        most = max(1, int(np.max(self.visits)) if len(self.visits) else 1)
        rows = "".join(
            f"<tr><td><b>{html.escape(m)}</b></td><td style='text-align:right'>{v}</td>"
            f"<td><div style='background:#4c72b0;height:10px;width:{120 * v / most:.0f}px'></div></td>"
            f"<td style='text-align:right'>{p:.3f}</td></tr>"
            for m, v, p in self.rows(top)
        )
        return (
            f"<div><b>search</b> ({self.simulations} simulations): value {self.search_value:+.3f}, plays "
            f"<b>{html.escape(self.best)}</b> &nbsp; <b>network</b> value {self.network_value:+.3f}"
            f"<table><tr><th>move</th><th>visits</th><th></th><th>prior</th></tr>{rows}</table></div>"
        )


def analyse(agent, state, rng_key, num_simulations: int | None = None) -> Analysis:
    """Searches one unbatched pgx state as the agent plays (no root noise) and reads the root: visit counts, the
    root value, the network's prior and value. The key is consumed."""
    game = agent.config.game
    host = jax.device_get(state)
    batch = jax.tree.map(lambda x: np.asarray(x)[None], host)
    sims = num_simulations or agent.default_simulations
    actions, out = agent.search(batch, rng_key, sims)
    probs, values = agent.policy_value(batch)
    # Read on the host: indexing the device arrays (or Tree.summary()) would compile a few eager ops.
    children_visits, node_values, probs, values, actions = jax.device_get(
        (out.search_tree.children_visits, out.search_tree.node_values, probs, values, actions)
    )
    root = mctx.Tree.ROOT_INDEX
    legal = notation.legal_moves(game, host)
    idx = list(legal.values())
    return Analysis(
        side=notation.side_to_move(game, host),
        moves=tuple(legal),
        actions=tuple(idx),
        visits=np.asarray(children_visits[0, root])[idx],
        prior=np.asarray(probs[0])[idx],
        search_value=float(node_values[0, root]),
        network_value=float(values[0]),
        best=notation.format_move(game, host, int(actions[0])),
        simulations=sims,
    )


# --- a game against the agent ----------------------------------------------------------------------------------------
class GameSession:
    """One game of a person against `agent`. `play(move)` makes the person's move (typed in the game's notation) and
    the agent's reply; `move(text)` and `agent_move()` make one move each. With `auto_reply` (the default) the agent
    also opens the game when `human_first` is False; the terminal turns it off to draw the board before each move.
    `num_simulations` overrides the agent's evaluation simulations."""

    def __init__(
        self,
        agent,
        *,
        human_first: bool = True,
        num_simulations: int | None = None,
        seed: int = 0,
        auto_reply: bool = True,
    ):
        self.agent = agent
        self.game = agent.config.game
        self.num_simulations = num_simulations
        self.auto_reply = auto_reply
        self._init, self._step = jax.jit(agent.env.init), jax.jit(agent.env.step)
        self._key, init_key = jax.random.split(jax.random.key(seed))
        self.state = self._init(init_key)
        self.human = int(self.state.current_player) if human_first else 1 - int(self.state.current_player)
        self.moves: list[str] = []
        self.last_analysis: Analysis | None = None
        if auto_reply and not human_first:
            self.agent_move()

    # --- state ---------------------------------------------------------------------------------------------------
    @property
    def over(self) -> bool:
        return is_over(self.state)

    @property
    def human_to_move(self) -> bool:
        return not self.over and int(self.state.current_player) == self.human

    @property
    def side(self) -> str:
        """The side to move, as envs.notation names it."""
        return notation.side_to_move(self.game, self.state)

    def legal_moves(self) -> list[str]:
        return list(notation.legal_moves(self.game, self.state))

    def result(self) -> float | None:
        """The person's result once the game is over: +1 win, 0 draw, -1 loss; None before."""
        return float(np.asarray(self.state.rewards)[self.human]) if self.over else None

    def status(self) -> str:
        if self.over:
            r = self.result()
            assert r is not None  # the game is over
            return "You win." if r > 0 else "You lose." if r < 0 else "Draw."
        return f"{self.side} to move ({'you' if self.human_to_move else 'the agent'})"

    def board(self) -> str:
        """The position as text (envs.notation.render)."""
        return notation.render(self.game, self.state)

    # --- moves ---------------------------------------------------------------------------------------------------
    def _apply(self, action: int, text: str) -> None:
        self.state = self._step(self.state, jnp.int32(action))
        self.moves.append(text)

    def _next_key(self) -> jax.Array:
        self._key, key = jax.random.split(self._key)
        return key

    def analysis(self, num_simulations: int | None = None) -> Analysis:
        """The agent's view of the current position (whoever is to move)."""
        if self.over:
            raise ValueError("the game is over")
        return analyse(self.agent, self.state, self._next_key(), num_simulations or self.num_simulations)

    def agent_move(self) -> Analysis:
        """The agent searches and plays its most visited move; returns what its search saw."""
        if self.over:
            raise ValueError("the game is over")
        analysis = self.analysis()
        self.last_analysis = analysis
        self._apply(analysis.best_action, analysis.best)
        return analysis

    def move(self, text: str) -> str:
        """The person's move alone (ValueError, one line, if it is malformed, illegal or not their turn); returns it
        as the game's notation writes it."""
        if self.over:
            raise ValueError("the game is over")
        if not self.human_to_move:
            raise ValueError("it is the agent's turn")
        action = notation.parse_move(self.game, self.state, text)
        written = notation.format_move(self.game, self.state, action)
        self._apply(action, written)
        return written

    def play(self, text: str) -> str:
        """The person's move (as `move`), then the agent's reply (with `auto_reply`) unless the game is over. Returns
        a line saying what happened."""
        line = f"you: {self.move(text)}"
        if self.auto_reply and not self.over:
            reply = self.agent_move()
            line += f"   agent: {reply.best} (value {reply.search_value:+.3f})"
        return line + ("   " + self.status() if self.over else "")

    # --- display (notebook) --------------------------------------------------------------------------------------
    def svg(self) -> str:
        return render_svg(self.game, self.state)

    def _repr_html_(self) -> str:
        moves = " ".join(self.moves) or "(none yet)"
        analysis = self.last_analysis._repr_html_() if self.last_analysis is not None else ""
        return (
            f"<div style='display:flex;gap:24px;align-items:flex-start'><div>{self.svg()}</div>"
            f"<div><p><b>{html.escape(self.status())}</b></p><p>moves: {html.escape(moves)}</p>"
            f"<p style='color:#666'>agent's last search:</p>{analysis}</div></div>"
        )

    def widget(self):
        """An ipywidgets UI: the board and the agent's last search, a button per legal move (a text box and a play
        button when there are more than MAX_BUTTONS) and a message line. Returns the widget (display it, or leave it
        last in a cell); its `press(move)` does what clicking that move's button (or typing it) does and returns the
        message shown."""
        import ipywidgets as widgets  # optional: only notebooks have it

        view = widgets.HTML(self._repr_html_())
        message = widgets.Label("")
        controls = widgets.HBox([])

        def refresh(note: str = "") -> None:
            view.value = self._repr_html_()
            message.value = note
            controls.children = self._controls(on_move) if self.human_to_move else []

        def on_move(text: str) -> None:
            try:
                refresh(self.play(text))
            except ValueError as e:
                message.value = f"Error: {e}"

        def press(text: str) -> str:
            """Clicks the button of move `text` (or types it into the text box and clicks play)."""
            for child in controls.children:
                if isinstance(child, widgets.Button) and child.description == text:
                    child.click()
                    return message.value
            boxes = [c for c in controls.children if isinstance(c, widgets.Text)]
            if boxes:
                boxes[0].value = text
                controls.children[-1].click()
            else:
                message.value = f"Error: no button {text!r} (legal: {' '.join(self.legal_moves()) or 'none'})"
            return message.value

        box = widgets.VBox([view, controls, message])
        box.refresh = refresh  # re-draws after play() was called directly
        box.press = press
        refresh()
        return box

    def _controls(self, on_move) -> list:
        import ipywidgets as widgets  # optional: only notebooks have it

        legal = self.legal_moves()
        if len(legal) <= MAX_BUTTONS:
            buttons = []
            for text in legal:
                button = widgets.Button(description=text, layout=widgets.Layout(width="auto"))
                button.on_click(lambda _, t=text: on_move(t))
                buttons.append(button)
            return buttons
        box = widgets.Text(placeholder=f"your move, e.g. {legal[0]}")
        go = widgets.Button(description="play")
        go.on_click(lambda _: on_move(box.value))
        return [box, go]
