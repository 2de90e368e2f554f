"""A wrong answer's report is built without formatting the traceback it would throw away (issue #14, start-up)."""

from __future__ import annotations

import ast
from typing import Any

import pytest

QUIZ = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("quiz")
async def test_quiz(longctx):
    answer = await longctx.ask(Request.user(f"q{longctx.sample}?", max_tokens=4), oracle=Oracle("right", ("wrong",)))
    longctx.record(expected="right", answer=answer)
    assert answer == "right", f"got {answer}"


@pytest.mark.longctx("quiz-xfail")
@pytest.mark.xfail(reason="pytest's xfail handling keeps the exception", strict=True)
async def test_quiz_xfail(longctx):
    answer = await longctx.ask(Request.user(f"x{longctx.sample}?", max_tokens=4), oracle=Oracle("right", ("wrong",)))
    assert answer == "right", f"got {answer}"


@pytest.mark.longctx("quiz-broken")
async def test_assert_before_asking(longctx):
    assert longctx.sample < 0, "a bug in the eval, not a wrong answer"
'''

# Counts every traceback pytest formats for a test's report (the work a wrong answer no longer pays for).
COUNTING = '''
import pytest

FORMATTED = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    original = item.repr_failure

    def counting(excinfo, *args, **kwargs):
        FORMATTED.append(item.nodeid)
        return original(excinfo, *args, **kwargs)

    item.repr_failure = counting
    try:
        return (yield)
    finally:
        del item.repr_failure


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"tracebacks formatted: {sorted(set(FORMATTED))}")
'''


def test_wrong_answers_format_no_traceback(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_quiz=QUIZ)
    longctx_runner.pytester.makeconftest(COUNTING)
    run = longctx_runner.run("--longctx-samples", "3", model="fake/wrong", subprocess=True)

    trials = run.record["trials"]
    by_experiment = {e: [t["outcome"] for t in trials if t["experiment"] == e]
                     for e in ("quiz", "quiz-xfail", "quiz-broken")}
    assert by_experiment == {"quiz": ["incorrect"] * 3, "quiz-xfail": ["incorrect"] * 3, "quiz-broken": ["error"] * 3}
    assert all(t["reason"] == "got wrong" for t in trials if t["experiment"] == "quiz")
    outcomes = run.result.parseoutcomes()
    assert outcomes.get("incorrect") == 6 and outcomes.get("errors") == 3  # xfail: incorrect, never an XPASS
    line = next(ln for ln in run.result.outlines if ln.startswith("tracebacks formatted: "))
    formatted = ast.literal_eval(line.removeprefix("tracebacks formatted: "))
    assert formatted and all("test_assert_before_asking" in n or "test_quiz_xfail" in n for n in formatted)
    assert run.ret == pytest.ExitCode.TESTS_FAILED  # the errors, never the wrong answers
