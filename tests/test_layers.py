"""The layering README's architecture section states, checked on the source: the core imports nothing around it, the
runtime nothing of the apps, envs/ nothing of az_jax, and no module imports the project inside a function without a
comment saying why."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORE = [
    "config",
    "presets",
    "networks",
    "conv",
    "search",
    "selfplay",
    "replay",
    "learner",
    "resign",
    "gating",
    "arena",
    "iteration",
    "devices",
    "flops",
]
RUNTIME = ["trainer", "loop", "checkpoint", "metrics", "agent", "distributed", "host_devices", "files", "platforms"]
RUNTIME += ["preemption", "targets", "preflight"]
OUTER = ("az_jax.evaluation", "az_jax.engines", "az_jax.frontends", "az_jax.apps", "az_jax.alphago")


def _imports(path: pathlib.Path) -> list[tuple[str, int, bool]]:
    """(module imported, line, inside a function) for every import of `path`; `from az_jax import x` gives az_jax.x."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.extend((f"{child.module}.{alias.name}", child.lineno, in_function) for alias in child.names)
            visit(child, inside)

    visit(ast.parse(path.read_text()), False)
    return found


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_only_the_core_and_the_games(module):
    allowed = tuple(f"az_jax.{m}" for m in CORE) + ("envs",)
    for name, line, _ in _imports(ROOT / "az_jax" / f"{module}.py"):
        if name.startswith(("az_jax", "envs")):
            assert name.startswith(allowed), f"az_jax/{module}.py:{line} imports {name}, outside the core"


@pytest.mark.parametrize("module", RUNTIME)
def test_the_runtime_imports_no_app(module):
    for name, line, _ in _imports(ROOT / "az_jax" / f"{module}.py"):
        assert not name.startswith("az_jax.apps"), f"az_jax/{module}.py:{line} imports the app {name}"


def test_envs_hold_games_only_and_the_core_imports_no_outer_ring():
    for path in sorted((ROOT / "envs").rglob("*.py")):
        for name, line, _ in _imports(path):
            assert not name.startswith("az_jax"), f"{path.relative_to(ROOT)}:{line} imports {name}"
    for module in CORE:
        for name, line, _ in _imports(ROOT / "az_jax" / f"{module}.py"):
            assert not name.startswith(OUTER), f"az_jax/{module}.py:{line} imports {name}"


def test_project_imports_inside_functions_say_why():
    lines_of = {}
    for path in sorted([*(ROOT / "az_jax").rglob("*.py"), *(ROOT / "envs").rglob("*.py")]):
        for name, line, in_function in _imports(path):
            if in_function and name.startswith(("az_jax", "envs")):
                text = lines_of.setdefault(path, path.read_text().splitlines())
                # the comment is on the line, or on a comment line just above a block of such imports
                above = [text[i].strip() for i in range(line - 2, -1, -1)]  # up to the line above the block
                block_comment = next((s for s in above if not s.startswith(("from ", "import "))), "")
                assert "#" in text[line - 1] or block_comment.startswith("#"), (
                    f"{path.relative_to(ROOT)}:{line} imports {name} inside a function without saying why"
                )
