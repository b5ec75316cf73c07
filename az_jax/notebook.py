"""What the notebooks in colab/ call: device set-up, live training plots, a run dir on Google Drive, the search's view
of a position, and a game against an agent on pgx's SVG board (typed moves, or buttons with ipywidgets).

Importing this module starts no JAX backend (pgx and the games are imported inside the functions), so a notebook can
call `setup_cpu_devices()` after importing it.

    az_jax.notebook.setup_cpu_devices()
    live = az_jax.notebook.LivePlot()
    az_jax.train_and_evaluate(config, run_dir, progress=False, progress_fn=live)
    session = az_jax.notebook.GameSession(az_jax.load_agent(run_dir), human_first=True)
    session.play("4"); session                     # the board, the agent's reply and its search's visit counts
    session.widget()                               # the same with a button per legal move
"""
from __future__ import annotations

import dataclasses
import html
import os
from typing import Sequence

import numpy as np

from az_jax.metrics import read_metrics  # noqa: F401  (notebooks call notebook.read_metrics)

LOSS_KEYS = ("train/loss", "train/value_loss", "train/policy_loss")
MAX_BUTTONS = 25        # games with more legal moves than this get a text box instead of one button per move


# --- devices and run dirs --------------------------------------------------------------------------------------------
def setup_cpu_devices(count: int | None = None) -> int:
    """One JAX host device per core (at most 8; or `count`) for CPU runtimes, as `az-jax` does; no effect on the
    GPU/TPU backend. Call it before anything creates a JAX array. Returns the count asked for."""
    from az_jax import host_devices
    count = count or min(os.cpu_count() or 1, 8)
    host_devices.setup(count, cores=min(os.cpu_count() or 1, 8))
    return count


def describe_devices() -> dict:
    """{'backend': 'cpu' | 'gpu' | 'tpu', 'count': devices, 'kind': the first device's kind} (starts JAX)."""
    import jax
    devices = jax.devices()
    return {"backend": jax.default_backend(), "count": len(devices), "kind": devices[0].device_kind}


def accelerator_overrides(backend: str) -> list[str]:
    """Settings that fill an accelerator better than the small preset's CPU-sized ones: more games in parallel
    (the search's batch), and bfloat16 activations on TPU. Empty on CPU."""
    if backend == "tpu":
        return ["selfplay_batch_size=1024", "compute_dtype=bfloat16"]
    if backend == "gpu":
        return ["selfplay_batch_size=512"]
    return []


def choose_run_dir(checkpoint_dir: str, run_name: str, *, mount_drive: bool = True,
                   fallback_dir: str = "runs") -> str:
    """`checkpoint_dir/run_name`, mounting Google Drive first when the path is under /content/drive (on Colab). When
    Drive cannot be mounted (not on Colab, or refused) the run goes to `fallback_dir/run_name` instead, with a note."""
    if mount_drive and os.path.abspath(checkpoint_dir).startswith("/content/drive"):
        try:
            from google.colab import drive  # only on Colab
            drive.mount("/content/drive")
        except Exception as e:  # ImportError off Colab; Colab raises others when the user declines
            print(f"Google Drive not mounted ({type(e).__name__}: {e}); using {fallback_dir}/ instead, which does "
                  f"not survive a runtime reset")
            checkpoint_dir = fallback_dir
    run_dir = os.path.join(checkpoint_dir, run_name)
    os.makedirs(run_dir, exist_ok=True)
    return run_dir


def run_status(run_dir: str, num_iterations: int | None = None) -> str:
    """One line: a new run, or which checkpoint training will resume from (train_and_evaluate does that itself)."""
    from az_jax import checkpoint as ckpt
    path = ckpt.checkpoint_dir(run_dir)
    steps = sorted(int(s) for s in os.listdir(path) if s.isdigit()) if os.path.isdir(path) else []
    if not steps:
        return f"new run in {run_dir}"
    total = f" of {num_iterations}" if num_iterations else ""
    return f"resuming from checkpoint {steps[-1]}{total} in {run_dir}"


# --- live plots ------------------------------------------------------------------------------------------------------
def plot_history(history: Sequence[dict], title: str = ""):
    """A matplotlib figure of metric records ({'iteration': i, key: value, ...}): the losses on the left, every
    evaluation score (eval/vs_<opponent>_score, 0.5 = even) on the right."""
    import matplotlib.pyplot as plt
    fig, (losses, scores) = plt.subplots(1, 2, figsize=(11, 3.6))
    for key in LOSS_KEYS:
        points = [(r["iteration"], r[key]) for r in history if key in r and r.get("train/steps", 1) > 0]
        if points:
            losses.plot(*zip(*points), label=key.split("/")[1])
    losses.set(xlabel="iteration", title="training loss")
    score_keys = sorted({k for r in history for k in r if k.startswith("eval/") and k.endswith("_score")})
    for key in score_keys:
        points = [(r["iteration"], r[key]) for r in history if key in r]
        scores.plot(*zip(*points), marker="o", label=key[len("eval/"):-len("_score")])
    scores.axhline(0.5, color="grey", lw=0.8, ls=":")
    scores.set(xlabel="iteration", ylim=(-0.02, 1.02), title="score against baselines (win 1, draw ½)")
    for ax in (losses, scores):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


class LivePlot:
    """A `progress_fn(iteration, metrics)` for train_and_evaluate that redraws the losses and evaluation scores in
    the notebook every `every` iterations (and whenever an evaluation arrives), with one status line."""

    def __init__(self, every: int = 1, title: str = "", history: Sequence[dict] = ()):
        self.every = every
        self.title = title
        self.history = list(history)    # earlier records (e.g. read_metrics of a resumed run) are drawn too

    def __call__(self, iteration: int, metrics: dict) -> None:
        self.history.append({"iteration": iteration, **metrics})
        if iteration % self.every and not any(k.startswith("eval/") for k in metrics):
            return
        import matplotlib.pyplot as plt
        from IPython.display import clear_output, display
        fig = plot_history(self.history, self.title)
        clear_output(wait=True)
        display(fig)
        plt.close(fig)
        print(self.status())

    def status(self) -> str:
        last = self.history[-1]
        parts = [f"iteration {last['iteration']}", f"loss {last.get('train/loss', float('nan')):.3f}",
                 f"{last.get('perf/positions_per_second', 0):.4g} positions/s"]
        scores = {k: v for r in self.history for k, v in r.items() if k.startswith("eval/") and k.endswith("_score")}
        parts += [f"{k[len('eval/'):-len('_score')]} {v:.3f}" for k, v in sorted(scores.items())]
        return " · ".join(parts)


# --- the search's view of a position ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Analysis:
    """What the agent thinks of one position, from the side to move's point of view."""
    moves: tuple[str, ...]         # [L] the legal moves in the game's notation
    actions: tuple[int, ...]       # [L] their pgx actions
    visits: np.ndarray             # [L] root visit counts of the search
    prior: np.ndarray              # [L] the network's move probabilities (masked softmax)
    search_value: float            # the root's value after the search, in [-1, 1]
    network_value: float           # the network's value of the position, in [-1, 1]
    best: str                      # the most visited move (what the agent plays)
    simulations: int

    def rows(self, top: int | None = None) -> list[tuple[str, int, float]]:
        """(move, visits, prior) by visits, most first (ties: notation order); the `top` first."""
        order = sorted(range(len(self.moves)), key=lambda i: (-int(self.visits[i]), i))
        return [(self.moves[i], int(self.visits[i]), float(self.prior[i])) for i in order[:top]]

    def text(self, top: int = 7) -> str:
        lines = [f"search ({self.simulations} simulations): value {self.search_value:+.3f}, plays {self.best}; "
                 f"network value {self.network_value:+.3f}", f"{'move':>6} {'visits':>7} {'prior':>6}"]
        lines += [f"{m:>6} {v:>7d} {p:>6.3f}" for m, v, p in self.rows(top)]
        return "\n".join(lines)

    def _repr_html_(self, top: int = 10) -> str:
        most = max(1, int(np.max(self.visits)) if len(self.visits) else 1)
        rows = "".join(
            f"<tr><td><b>{html.escape(m)}</b></td><td style='text-align:right'>{v}</td>"
            f"<td><div style='background:#4c72b0;height:10px;width:{120 * v / most:.0f}px'></div></td>"
            f"<td style='text-align:right'>{p:.3f}</td></tr>" for m, v, p in self.rows(top))
        return (f"<div><b>search</b> ({self.simulations} simulations): value {self.search_value:+.3f}, plays "
                f"<b>{html.escape(self.best)}</b> &nbsp; <b>network</b> value {self.network_value:+.3f}"
                f"<table><tr><th>move</th><th>visits</th><th></th><th>prior</th></tr>{rows}</table></div>")


def analyse(agent, state, rng_key, num_simulations: int | None = None) -> Analysis:
    """Searches one unbatched pgx state as the agent plays (no root noise) and reads the root: visit counts, the
    root value, the network's prior and value. The key is consumed."""
    import jax
    import mctx
    from az_jax import search as search_lib
    from envs import notation
    game = agent.config.game
    batch = jax.tree.map(lambda x: x[None], state)
    sims = num_simulations or agent.default_simulations
    actions, out = agent.search(batch, rng_key, sims)
    probs, values = agent.policy_value(batch)
    visits, root_value, probs, value = jax.device_get((search_lib.visit_counts(out)[0],
                                                       out.search_tree.node_values[0, mctx.Tree.ROOT_INDEX],
                                                       probs[0], values[0]))
    legal = notation.legal_moves(game, state)
    idx = list(legal.values())
    return Analysis(moves=tuple(legal), actions=tuple(idx), visits=np.asarray(visits)[idx],
                    prior=np.asarray(probs)[idx], search_value=float(root_value), network_value=float(value),
                    best=notation.format_move(game, state, int(actions[0])), simulations=sims)


# --- a game against the agent ----------------------------------------------------------------------------------------
class GameSession:
    """One game of a person against an `az_jax.Agent` in a notebook. `play(move)` makes the person's move (typed in
    the game's notation, envs/notation.py) and the agent's reply; displaying the session shows pgx's SVG board, the
    moves so far and the agent's last analysis. Randomness: one key from `seed`, split for every search."""

    def __init__(self, agent, *, human_first: bool = True, num_simulations: int | None = None, seed: int = 0):
        import jax
        self.agent = agent
        self.game = agent.config.game
        self.num_simulations = num_simulations
        self._init, self._step = jax.jit(agent.env.init), jax.jit(agent.env.step)
        self._key, init_key = jax.random.split(jax.random.key(seed))
        self.state = self._init(init_key)
        self.human = int(self.state.current_player) if human_first else 1 - int(self.state.current_player)
        self.moves: list[str] = []
        self.last_analysis: Analysis | None = None
        if not human_first:
            self.agent_move()

    # --- state ---------------------------------------------------------------------------------------------------
    @property
    def over(self) -> bool:
        return bool(self.state.terminated) or bool(self.state.truncated)

    @property
    def human_to_move(self) -> bool:
        return not self.over and int(self.state.current_player) == self.human

    def legal_moves(self) -> list[str]:
        from envs import notation
        return list(notation.legal_moves(self.game, self.state))

    def result(self) -> float | None:
        """The person's result once the game is over: +1 win, 0 draw, -1 loss; None before."""
        return float(np.asarray(self.state.rewards)[self.human]) if self.over else None

    def status(self) -> str:
        from envs import notation
        if self.over:
            r = self.result()
            return "You win." if r > 0 else "You lose." if r < 0 else "Draw."
        side = notation.side_to_move(self.game, self.state)
        return f"{side} to move ({'you' if self.human_to_move else 'the agent'})"

    # --- moves ---------------------------------------------------------------------------------------------------
    def _apply(self, action: int, text: str) -> None:
        import jax.numpy as jnp
        self.state = self._step(self.state, jnp.int32(action))
        self.moves.append(text)

    def _next_key(self):
        import jax
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
        self._apply(analysis.actions[analysis.moves.index(analysis.best)], analysis.best)
        return analysis

    def play(self, move: str) -> str:
        """The person's move (ValueError, one line, if it is malformed, illegal or not their turn), then the agent's
        reply unless the game is over. Returns a line saying what happened."""
        from envs import notation
        if self.over:
            raise ValueError("the game is over")
        if not self.human_to_move:
            raise ValueError("it is the agent's turn")
        action = notation.parse_move(self.game, self.state, move)
        text = notation.format_move(self.game, self.state, action)
        self._apply(action, text)
        line = f"you: {text}"
        if not self.over:
            reply = self.agent_move()
            line += f"   agent: {reply.best} (value {reply.search_value:+.3f})"
        return line + ("   " + self.status() if self.over else "")

    # --- display -------------------------------------------------------------------------------------------------
    def svg(self) -> str:
        from envs.render import render_svg
        return render_svg(self.game, self.state)

    def _repr_html_(self) -> str:
        moves = " ".join(self.moves) or "(none yet)"
        analysis = self.last_analysis._repr_html_() if self.last_analysis is not None else ""
        return (f"<div style='display:flex;gap:24px;align-items:flex-start'><div>{self.svg()}</div>"
                f"<div><p><b>{html.escape(self.status())}</b></p><p>moves: {html.escape(moves)}</p>"
                f"<p style='color:#666'>agent's last search:</p>{analysis}</div></div>")

    def widget(self):
        """An ipywidgets UI: the board and the agent's last search, a button per legal move (a text box and a play
        button when there are more than MAX_BUTTONS) and a message line. Returns the widget (display it, or leave it
        last in a cell); its `press(move)` does what clicking that move's button (or typing it) does and returns the
        message shown."""
        import ipywidgets as widgets
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
        box.refresh = refresh          # re-draws after play() was called directly
        box.press = press
        refresh()
        return box

    def _controls(self, on_move) -> list:
        import ipywidgets as widgets
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
