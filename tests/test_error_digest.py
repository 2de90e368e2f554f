"""A run whose trials all error prints one line per distinct error with its count (and the word ERROR), not a
block and a short-summary line per trial; other tests' errors are pytest's as ever; the exit code stays 1."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_longctx.reporting.errors import ErrorGroup, error_lines

PLAIN = '''
import pytest


@pytest.fixture
def broken():
    raise RuntimeError("a broken fixture")


def test_plain(broken):
    pass


@pytest.fixture
def bug():
    raise ValueError("the same bug every time")


@pytest.mark.longctx("demo")
@pytest.mark.parametrize("n", [1, 2, 3])
def test_traceback(n, bug):
    pass


@pytest.mark.longctx("demo")
def test_fails():
    assert 1 == 2
'''


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "n2"])
def test_errors_are_one_line_per_distinct_error(runner: Any, xdist: list[str]) -> None:
    runner.pytester.makepyfile(test_plain=PLAIN)
    run = runner.run("--longctx-samples", "5", *xdist, model="fake/error")
    out = run.result.stdout.str()
    assert run.ret == pytest.ExitCode.TESTS_FAILED, out
    lines = run.result.stdout.lines
    assert [line for line in lines if re.match(r"ERROR \d+x ", line)] == [
        "ERROR 10x BackendError: fake/error: injected backend failure "
        "(e.g. test_eval.py::test_passkey[16-s0] and 9 more)",
        "ERROR 3x ValueError: the same bug every time (e.g. test_plain.py::test_traceback[1] and 2 more)"]
    assert out.count("injected backend failure") == 1, out  # no ERRORS block nor short-summary line per trial
    assert "ERROR at call of test_passkey" not in out
    assert out.count("ERROR at setup of test_traceback") == 1  # a traceback is shown once, for its first test
    assert "FAILED test_plain.py::test_fails - assert 1 == 2" in lines  # the short summary says what it is
    assert any(line.startswith("ERROR test_plain.py::test_plain - RuntimeError: a broken fixture") for line in lines)
    assert "longctx errors: 13 tests errored, 2 distinct errors (never counted as wrong answers)" in out
    assert re.match(r"=+ 1 failed, (\d+ warnings?, )?14 errors in ", lines[-1]), lines[-1]  # pytest's own counts


def test_error_lines() -> None:
    class Report:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    assert error_lines([ErrorGroup("E: x", [Report("a.py::t[1]")]), ErrorGroup("E: y", [Report("a"), Report("b")])]) \
        == ["ERROR 1x E: x (a.py::t[1])", "ERROR 2x E: y (e.g. a and 1 more)"]
