"""The layers hold: import-linter's contracts (pyproject.toml), the evals use only the public API and their
experiment's package, and every public name resolves."""

from __future__ import annotations

import ast
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
