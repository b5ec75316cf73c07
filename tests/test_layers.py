"""The layering README's architecture section states, checked on the source by folder: every module sits in a ring (the
core, the runtime, or an outer package), the core imports nothing around it, the runtime no outer package, only the
apps import the apps, envs/ nothing of az_jax, no module-level import circle, and no module imports the project inside
a function without a comment saying why."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "az_jax"
CORE, RUNTIME = PACKAGE / "core", PACKAGE / "runtime"
OUTER = ("evaluation", "engines", "frontends", "alphago", "apps")  # the outer packages; apps is the top
# package data the runtime reads (the shipped agents): no code, an __init__.py with a docstring alone
DATA = ("agents",)
MODULES = sorted(PACKAGE.rglob("*.py"))


def _name(path: pathlib.Path) -> str:
    """az_jax/core/config.py -> az_jax.core.config (a package's __init__.py: the package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def _imports(path: pathlib.Path) -> list[tuple[str, int, bool]]:
    """(module imported, line, inside a function) for every import of `path`; `from az_jax import x` gives az_jax.x."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                continue  # for the type checker only: never imported when the module runs
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.extend((f"{child.module}.{alias.name}", child.lineno, in_function) for alias in child.names)
            visit(child, inside)

    visit(ast.parse(path.read_text()), False)
    return found


def test_every_module_sits_in_a_ring():
    # a module is in a ring by the folder it sits in: the core, the runtime, or one of the outer packages
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"modules outside every ring: {loose}"
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders == {"core", "runtime", *OUTER, *DATA}, folders
    for folder in DATA:
        code = sorted((PACKAGE / folder).rglob("*.py"))
        assert code == [PACKAGE / folder / "__init__.py"], code
        body = ast.parse(code[0].read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), f"{folder}/__init__.py holds code"


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=_ids(sorted(CORE.glob("*.py"))))
def test_the_core_imports_only_the_core_and_the_games(path):
    for name, line, _ in _imports(path):
        if name.startswith(("az_jax", "envs")):
            assert name.startswith(("az_jax.core", "envs")), f"{path.relative_to(ROOT)}:{line} imports {name}"


@pytest.mark.parametrize("path", sorted(RUNTIME.glob("*.py")), ids=_ids(sorted(RUNTIME.glob("*.py"))))
def test_the_runtime_imports_no_outer_package(path):
    for name, line, _ in _imports(path):
        if name.startswith(("az_jax", "envs")):
            allowed = ("az_jax.core", "az_jax.runtime", "envs")
            assert name.startswith(allowed), f"{path.relative_to(ROOT)}:{line} imports {name}, an outer package"


def test_envs_hold_games_only_and_only_the_apps_import_the_apps():
    for path in sorted((ROOT / "envs").rglob("*.py")):
        for name, line, _ in _imports(path):
            assert not name.startswith("az_jax"), f"{path.relative_to(ROOT)}:{line} imports {name}"
    for path in MODULES:
        if path.is_relative_to(PACKAGE / "apps"):
            continue
        for name, line, _ in _imports(path):
            assert not name.startswith("az_jax.apps"), f"{path.relative_to(ROOT)}:{line} imports the app {name}"


def test_no_import_circles():
    # module-level imports only (an import inside a function runs when called, and says why: the test below)
    known = {_name(p): p for p in MODULES}

    def target(name: str) -> str | None:  # `from az_jax.core import config` names az_jax.core.config
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    edges = {
        module: {t for name, _, inside in _imports(path) if not inside and (t := target(name)) and t != module}
        for module, path in known.items()
    }
    packages = {m for m, p in known.items() if p.name == "__init__.py"}
    for module in edges:  # a package's __init__ is not a module of its own here: its imports are its members'
        edges[module] -= packages
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(edges[module]):
            assert state.get(nxt) != 1, "import circle: " + " -> ".join([*path[path.index(nxt) :], nxt])
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])


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
