"""The layers hold: import-linter's contracts (pyproject.toml), the evals use only the public API and their
experiment's package, and every public name resolves."""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_longctx

ROOT = Path(__file__).resolve().parents[1]
#: The plugin's internals: nothing in evals/ (a user's experiment, in effect) may import them.
PRIVATE = ("session", "dispatch", "backends", "results", "server", "plugin", "util")


def test_import_linter_contracts_are_kept() -> None:
    beside = Path(sys.executable).parent / "lint-imports"  # .venv/bin/pytest runs without the venv on PATH
    exe = str(beside) if beside.is_file() else shutil.which("lint-imports")
    if exe is None:
        pytest.skip("lint-imports not installed (pip install -e '.[test]')")
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout and " BROKEN" not in out.stdout, out.stdout


def test_the_contracts_count_type_checking_imports() -> None:
    """An import under ``if TYPE_CHECKING:`` is an arrow too: excluding them hid four that ran back up."""
    import tomllib

    linter = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    assert linter.get("exclude_type_checking_imports", False) is False


def test_no_public_name_is_shadowed_by_a_module() -> None:
    """A module ``pytest_longctx/<name>.py`` would replace the public ``pytest_longctx.<name>`` once imported
    (a submodule becomes the package's attribute, so the lazy loader is never asked)."""
    package = ROOT / "pytest_longctx"
    shadowed = [n for n in pytest_longctx.__all__ if (package / f"{n}.py").exists() or (package / n).is_dir()]
    assert shadowed == []
    importlib.import_module("pytest_longctx.run_settings")  # the module the Settings type lives in, first

    assert callable(pytest_longctx.settings) and pytest_longctx.settings.__module__ == "pytest_longctx.api"


def _imports(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(a.name for a in node.names)
    return modules


def test_evals_import_nothing_private() -> None:
    files = sorted((ROOT / "evals").rglob("*.py"))
    assert files, "no eval files found"
    private = [(f.relative_to(ROOT).as_posix(), m) for f in files for m in _imports(f)
               if m.startswith(tuple(f"pytest_longctx.{p}" for p in PRIVATE))]
    assert private == []


def test_every_public_name_resolves() -> None:
    missing = [name for name in pytest_longctx.__all__ if getattr(pytest_longctx, name, None) is None]
    assert missing == []
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        pytest_longctx.not_a_name  # noqa: B018 - the lazy loader must not invent names


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycles_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_in_the_package() -> None:
    """No module imports (at any depth, lazily or for type checking) a module that imports it back."""
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (pip install -e '.[test]')")
    built = grimp.build_graph("pytest_longctx")
    graph = {m: set(built.find_modules_directly_imported_by(m)) for m in built.modules}
    assert _cycles(graph) == []
