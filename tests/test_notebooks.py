"""The Colab notebooks, executed end to end with papermill on CPU with tiny settings: they install nothing here (az_jax
is importable), train, plot, resume, and play scripted moves by pressing the board's buttons."""

import ast
import json
import os
import re

import jax.numpy as jnp
import nbformat
import papermill
import pytest

from az_jax.apps import notebook
from az_jax.apps import session as session_lib
from az_jax.core import networks
from az_jax.core.overrides import override
from az_jax.core.presets import preset
from az_jax.runtime import agent as agent_lib
from envs import make_env

from conftest import FAST_COMPILES, tiny_variables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLAB = os.path.join(ROOT, "colab")
NOTEBOOKS = ("quickstart.ipynb", "accelerators.ipynb")
# connect_four: 8 games × 10 plies per iteration, so games end in iteration 2-3 and learning starts; evaluation
# against random play (4 games) and on the solver set (4-simulation search) at iterations 2 and 3.
C4_TINY = [
    "num_blocks=1",
    "num_channels=8",
    "value_hidden=8",
    "num_simulations=4",
    "selfplay_batch_size=8",
    "selfplay_steps=10",
    "replay_capacity=512",
    "batch_size=16",
    "min_replay_size=16",
    "train_ratio=0.5",
    "eval_every=2",
    "eval_games=4",
    "eval_simulations=4",
    "eval_opponents=random",
    "eval_solver_simulations=4",
    "checkpoint_every=1",
]
GO_TINY = [
    "num_blocks=1",
    "num_channels=8",
    "value_hidden=8",
    "num_simulations=2",
    "selfplay_batch_size=4",
    "selfplay_steps=4",
    "replay_capacity=64",
    "batch_size=8",
    "min_replay_size=8",
    "train_ratio=0.5",
    "eval_every=0",
    "checkpoint_every=1",
]
PLAY_SIMULATIONS = 12


@pytest.fixture(scope="module", autouse=True)
def kernel_environment():
    """The kernels inherit the session's persistent XLA compilation cache (conftest.py: the resumed accelerator run
    does not compile again) and skip XLA's optimisation passes (the tiny programs run for milliseconds and would
    compile for tens of seconds)."""
    saved = {k: os.environ.get(k) for k in ("JAX_DISABLE_MOST_OPTIMIZATIONS", "XLA_FLAGS")}
    os.environ.update(FAST_COMPILES, XLA_FLAGS="")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def execute(name, out_dir, **parameters):
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, name)
    papermill.execute_notebook(
        os.path.join(COLAB, name), out, parameters=parameters, kernel_name="python3", cwd=COLAB, progress_bar=False
    )
    return nbformat.read(out, as_version=4)


def outputs(nb, needle):
    """(stream text, {mime: data}) of the one code cell whose source contains `needle`."""
    cells = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]
    assert len(cells) == 1, needle
    text = "".join(o.get("text", "") for o in cells[0].outputs if o.output_type == "stream")
    data = {}
    for o in cells[0].outputs:
        if o.output_type in ("display_data", "execute_result"):
            data.update(o.data)
    return text, data


def records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_only_install_and_call_the_library(name):
    nb = nbformat.read(os.path.join(COLAB, name), as_version=4)
    assert [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])], "papermill needs a parameters cell"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        functions = [
            n.name
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Lambda)) and getattr(n, "name", None) != "find_clone"
        ]
        assert not functions, f"{name}: logic belongs in the library (az_jax/apps/notebook.py), found {functions}"
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
            n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
        }
        assert imported <= {"az_jax", "importlib", "os", "subprocess", "sys", "glob", "shutil"}, imported


def test_quickstart_trains_plots_and_plays(tmp_path):
    run_dir = str(tmp_path / "run")
    nb = execute(
        "quickstart.ipynb",
        str(tmp_path),
        NUM_ITERATIONS=3,
        SETTINGS=C4_TINY,
        RUN_DIR=run_dir,
        CPU_DEVICES=2,
        PLAY_SIMULATIONS=PLAY_SIMULATIONS,
        INTERACTIVE=False,
        SCRIPTED_MOVES=["4", "3"],
    )

    text, _ = outputs(nb, "az_jax.override(az_jax.preset(GAME")
    assert text.startswith(f"new run in {run_dir}")
    # Live plot: the last frame is a PNG, with the status line of iteration 3 and its evaluation.
    text, data = outputs(nb, "notebook.LivePlot(")
    assert "image/png" in data
    assert re.search(r"iteration 3 · loss \d\.\d{3} · .* positions/s · vs_random \d\.\d{3}", text), text
    logged = records(run_dir)
    assert [r["iteration"] for r in logged] == [1, 2, 3]
    assert [r["iteration"] for r in logged if "eval/vs_random_score" in r] == [2, 3]
    # the solver set's shares come with each evaluation; uniform random play would score 0.475 raw
    assert [r["iteration"] for r in logged if 0 < r.get("eval/solver_raw", -1) <= 1] == [2, 3]
    assert logged[-1]["train/steps"] > 0 and logged[-1]["train/loss"] > 0  # games ended and learning started

    # Play: two presses of the board's buttons, each answered by the agent; the board is pgx's SVG.
    text, data = outputs(nb, "session.widget()")
    lines = text.strip().splitlines()
    assert len(lines) == 2 and all(re.fullmatch(r"you: [34]   agent: [1-7] \(value [+-]\d\.\d{3}\)", l) for l in lines)
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "<svg" in data["text/html"] and "moves: 4 " in data["text/html"]
    # Analysis of the position after 4 plies: every simulation visits one root move, so the visits add up to 12.
    text, data = outputs(nb, "session.analysis()")
    assert text.startswith(f"search ({PLAY_SIMULATIONS} simulations): value ")
    table = [line.split() for line in text.strip().splitlines()[2:]]
    assert len(table) == 7 and {row[0] for row in table} == set("1234567")  # 7 legal columns
    assert sum(int(row[1]) for row in table) == PLAY_SIMULATIONS
    assert sum(float(row[2]) for row in table) == pytest.approx(1.0, abs=0.01)  # the prior over legal moves
    assert "text/html" in data


def test_accelerator_notebook_detects_the_backend_and_resumes(tmp_path):
    drive = str(tmp_path / "drive")
    params = dict(SETTINGS=GO_TINY, CHECKPOINT_DIR=drive, RUN_NAME="go", MOUNT_DRIVE=False, CPU_DEVICES=2)
    first = execute("accelerators.ipynb", str(tmp_path / "first"), NUM_ITERATIONS=1, **params)
    text, _ = outputs(first, "notebook.describe_devices()")
    assert text.startswith("JAX backend: cpu — 2 × cpu")
    run_dir = os.path.join(drive, "go")
    text, _ = outputs(first, "notebook.choose_run_dir(")
    assert text.startswith(f"new run in {run_dir}") and "go_9x9: 1 blocks × 8 channels" in text

    # "After a runtime restart": the same notebook in a fresh kernel, asked for one more iteration.
    second = execute("accelerators.ipynb", str(tmp_path / "second"), NUM_ITERATIONS=2, **params)
    text, _ = outputs(second, "notebook.choose_run_dir(")
    assert text.startswith(f"resuming from checkpoint 1 of 2 in {run_dir}")
    text, _ = outputs(second, "records = notebook.read_metrics(run_dir)")
    assert text.startswith(f"2 iterations logged in {run_dir}/metrics.jsonl; checkpoints at iterations [1, 2]")
    assert [r["iteration"] for r in records(run_dir)] == [1, 2]


def test_drive_fallback_and_run_status(tmp_path, capsys):
    # Off Colab, /content/drive cannot be mounted: the run goes to the fallback dir, with a note saying so.
    run_dir = notebook.choose_run_dir("/content/drive/MyDrive/az", "r1", fallback_dir=str(tmp_path / "local"))
    assert run_dir == str(tmp_path / "local" / "r1") and os.path.isdir(run_dir)
    assert "Google Drive not mounted" in capsys.readouterr().out
    assert notebook.run_status(run_dir, 5) == f"new run in {run_dir}"
    for step in ("2", "10", "tmp_3"):
        os.makedirs(os.path.join(run_dir, "checkpoints", step))
    assert notebook.run_status(run_dir, 20) == f"resuming from checkpoint 10 of 20 in {run_dir}"


def test_game_session_typed_and_widget_moves(monkeypatch, fast_compiles):
    config = override(
        preset("tic_tac_toe", "small"), ["num_blocks=1", "num_channels=8", "value_hidden=8", "eval_simulations=6"]
    )
    env = make_env("tic_tac_toe")[0]
    net = networks.make_network(config, env.num_actions)
    variables = tiny_variables(net, jnp.zeros((1, *env.observation_shape)))  # drawn with NumPy: no init program
    session = notebook.GameSession(agent_lib.Agent(config=config, variables=variables), human_first=False, seed=1)
    # The agent moved first; the analysis it played from covers the 9 empty cells and 6 simulations.
    first = session.last_analysis
    assert len(first.moves) == 9 and int(first.visits.sum()) == 6 and session.moves == [first.best]
    with pytest.raises(ValueError, match="illegal move"):
        session.play(first.best)  # that cell is taken
    with pytest.raises(ValueError, match="malformed move"):
        session.play("10")
    # More legal moves than MAX_BUTTONS: a text box and a play button instead of one button per move.
    monkeypatch.setattr(session_lib, "MAX_BUTTONS", 3)
    ui = session.widget()
    free = session.legal_moves()
    assert [type(c).__name__ for c in ui.children[1].children] == ["Text", "Button"]
    message = ui.press(free[0])
    assert message.startswith(f"you: {free[0]}   agent: ") and len(session.moves) == 3
    assert ui.press(free[0]).startswith("Error: illegal move")  # the message line, no exception
    monkeypatch.setattr(session_lib, "MAX_BUTTONS", 25)
    ui.refresh()
    assert sorted(c.description for c in ui.children[1].children) == sorted(session.legal_moves())
    assert len(session.legal_moves()) == 6 and "<svg" in session._repr_html_()
