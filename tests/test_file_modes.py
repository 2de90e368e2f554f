"""Files the plugin writes are created with the user's umask (0644 under umask 022), like ``open(path, "w")``.

Atomic writes go through a temporary file; ``tempfile.mkstemp`` would make every report, cache entry and record
0600. Checked for the writer itself and for what a real run writes (reports, cache entries, the run history).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.util.fsutil import atomic_write_text
from tests.passkey_api import MODEL


@pytest.fixture
def umask() -> Iterator[Any]:
    """``umask(mask)`` sets the process's umask for the test (restored after)."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002], ids=["022", "077", "002"])
def test_atomic_writes_follow_the_umask(tmp_path: Path, umask: Any, mask: int) -> None:
    umask(mask)
    target = tmp_path / "sub" / "out.json"
    atomic_write_text(target, "{}")
    atomic_write_text(target, "{}\n")  # replacing keeps the umask's mode too
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert mode(target) == mode(plain) == 0o666 & ~mask
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.json"]  # no temporary file left


def test_a_run_writes_its_files_with_the_umask(runner: Any, api: Any, umask: Any) -> None:
    api()
    umask(0o022)
    run = runner.run("--longctx-samples", "2", model=MODEL, cache=True, subprocess=True)
    assert run.ret == pytest.ExitCode.OK, run.result.stdout.str()
    written = [p for folder in (run.report_dir, runner.pytester.path / "cache") for p in folder.rglob("*")
               if p.is_file()]
    assert {p.name for p in written} >= {"longctx.json", "longctx.html"}
    assert any(p.is_relative_to(runner.pytester.path / "cache") for p in written)  # cache entries were written
    assert {str(p.relative_to(runner.pytester.path)): oct(mode(p)) for p in written if mode(p) != 0o644} == {}
