"""Golden runs on pytest's public API: a project folder a module-scoped fixture runs pytest in once, for many tests.

``pytest.Pytester`` is per test. ``GoldenProject`` offers the part of its API ``LongctxRunner`` uses (``path``,
``makefile``/``makepyfile``/``makeconftest``, ``runpytest_inprocess``, ``runpytest_subprocess``) for a folder made
by ``tmp_path_factory``, isolated as pytester isolates its runs: an in-process run (``pytest.main``) restores
``sys.modules``, ``sys.path`` and ``sys.meta_path`` afterwards, so the inner session's test modules, conftests and
whatever they imported do not stay in the outer one; a subprocess run finds the folder on ``PYTHONPATH``. The
environment (working directory, ``HOME``, variables) is the caller's to set: ``tests.conftest.golden_runner``.

A test that goes on from a golden run copies the run's ``reports/`` and ``cache/`` into its own project
(``GoldenCopy``) and checks what it did to them.
"""

from __future__ import annotations

import importlib
import io
import os
import shutil
import subprocess
import sys
import textwrap
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: Modules an in-process run must not unload (pytester keeps them too): zope keeps state in its modules, and
#: readline cannot be imported twice (bpo-41033).
KEPT_MODULES = ("zope", "readline")


@dataclass
class GoldenResult:
    """A golden run's outcome, read as a ``pytest.RunResult``: the exit code and the output's lines."""

    ret: int | pytest.ExitCode
    outlines: list[str]
    errlines: list[str]
    stdout: pytest.LineMatcher = field(init=False)
    stderr: pytest.LineMatcher = field(init=False)

    def __post_init__(self) -> None:
        try:
            self.ret = pytest.ExitCode(self.ret)
        except ValueError:
            pass
        self.stdout = pytest.LineMatcher(self.outlines)
        self.stderr = pytest.LineMatcher(self.errlines)


class GoldenProject:
    """A folder to write a pytest project into and run pytest in, in-process or as a subprocess."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._subprocess_runs = 0

    def makefile(self, ext: str, **files: str) -> Path:
        """Write ``NAME.EXT`` for each ``NAME=text``, dedented and stripped as pytester writes it; the first path."""
        paths = [self.path / f"{name}{ext}" for name in files]
        for path, text in zip(paths, files.values(), strict=True):
            path.write_text(textwrap.dedent(text).strip(), encoding="utf-8")
        return paths[0]

    def makepyfile(self, **files: str) -> Path:
        return self.makefile(".py", **files)

    def makeconftest(self, source: str) -> Path:
        return self.makefile(".py", conftest=source)

    def runpytest_inprocess(self, *args: str) -> GoldenResult:
        """``pytest.main(args)`` in this process, its output captured; the import state restored afterwards."""
        importlib.invalidate_caches()  # files written just now must be found
        modules, paths, finders = dict(sys.modules), list(sys.path), list(sys.meta_path)
        out, err = io.StringIO(), io.StringIO()
        try:
            with redirect_stdout(out), redirect_stderr(err):
                try:
                    ret: int | pytest.ExitCode = pytest.main(list(args))
                except SystemExit as exit_:  # as ``python -m pytest`` would exit
                    ret = 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 1
        finally:
            modules.update((name, m) for name, m in sys.modules.items() if name.startswith(KEPT_MODULES))
            sys.modules.clear()
            sys.modules.update(modules)
            sys.path[:], sys.meta_path[:] = paths, finders
        return GoldenResult(ret, out.getvalue().splitlines(), err.getvalue().splitlines())

    def runpytest_subprocess(self, *args: str, timeout: float | None = None) -> GoldenResult:
        """``python -m pytest args`` in the folder (on ``PYTHONPATH``, as pytester does), its own ``--basetemp``."""
        self._subprocess_runs += 1
        basetemp = self.path / f"runpytest-{self._subprocess_runs}"
        paths = os.pathsep.join(filter(None, [str(self.path), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": paths}
        done = subprocess.run([sys.executable, "-m", "pytest", f"--basetemp={basetemp}", *args], cwd=self.path,
                              env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                              check=False)
        return GoldenResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines())


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` (its path relative to it) and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def output(run: Any) -> str:
    """A run's stdout and stderr, one text."""
    return str(run.result.stdout.str()) + "\n" + str(run.result.stderr.str())


def one_line(out: str, needle: str) -> str:
    """The one line of ``out`` that holds ``needle``, said exactly once, with no traceback anywhere in ``out``."""
    assert out.count(needle) == 1, f"{needle!r} said {out.count(needle)} times:\n{out}"
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    return next(line for line in out.splitlines() if needle in line).strip()


@dataclass
class GoldenCopy:
    """A test's project going on from a golden run: its ``reports/`` and ``cache/`` copied, and their bytes."""

    runner: Any
    record: bytes = b""
    cache: dict[str, bytes] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return Path(self.runner.pytester.path)

    def copy(self, folder: Path) -> None:
        """Copy the golden run's ``reports/`` and ``cache/`` from ``folder``; keep the record's and cache's bytes."""
        for name in ("reports", "cache"):
            shutil.copytree(folder / name, self.path / name)
        self.record = (self.path / "reports" / "longctx.json").read_bytes()
        self.cache = snapshot(self.path / "cache")

    def assert_untouched(self) -> None:
        """The record, its history and the cache are as they were copied."""
        assert (self.path / "reports" / "longctx.json").read_bytes() == self.record
        assert not (self.path / "reports" / "history").exists()
        assert snapshot(self.path / "cache") == self.cache

    def assert_refused(self, run: Any, needle: str) -> str:
        """``run`` was a usage error (exit 4) said on one line holding ``needle``, and left this project untouched;
        that line."""
        out = output(run)
        assert run.ret == pytest.ExitCode.USAGE_ERROR, out
        line = one_line(out, needle)
        self.assert_untouched()
        return line
