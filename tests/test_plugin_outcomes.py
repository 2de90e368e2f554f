"""Outcomes per fake model: wrong answers are data (incorrect), backend failures are errors, never wrong answers."""

from __future__ import annotations

from typing import Any

import pytest

QUIZ = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("quiz")
@pytest.mark.parametrize("question", ["capital", "colour"])
async def test_quiz(longctx, question):
    answer = await longctx.ask(Request.user(f"{question} #{longctx.sample}?", max_tokens=4),
                               oracle=Oracle("right", ("wrong-1", "wrong-2")))
    longctx.record(expected="right", answer=answer)
    assert answer == "right", f"got {answer}"
'''

SAMPLES = 10


@pytest.mark.parametrize(("model", "ret"), [
    ("fake/perfect", pytest.ExitCode.OK),
    ("fake/wrong", pytest.ExitCode.OK),
    ("fake/random", pytest.ExitCode.OK),
    ("fake/error", pytest.ExitCode.TESTS_FAILED),
    ("fake/flaky", pytest.ExitCode.TESTS_FAILED),
])
def test_fake_models(longctx_runner: Any, model: str, ret: int) -> None:
    longctx_runner.pytester.makepyfile(test_quiz=QUIZ)
    run = longctx_runner.run("--longctx-samples", str(SAMPLES), model=model)

    assert run.ret == ret
    trials = run.record["trials"]
    assert len(trials) == 2 * SAMPLES
    counts = {o: sum(t["outcome"] == o for t in trials) for o in ("correct", "incorrect", "error")}
    outcomes = run.result.parseoutcomes()
    assert outcomes.get("incorrect", 0) == counts["incorrect"]
    assert "failed" not in outcomes  # a wrong answer never fails a test
    for cell in run.record["cells"]:
        assert cell["n"] == cell["correct"] + cell["incorrect"]
        assert cell["n"] + cell["errors"] == SAMPLES
    if model == "fake/perfect":
        assert counts == {"correct": 20, "incorrect": 0, "error": 0}
    elif model == "fake/wrong":
        assert counts == {"correct": 0, "incorrect": 20, "error": 0}
        assert all(t["reason"].startswith("got wrong-") for t in trials)
        assert all(t["answer"] in ("wrong-1", "wrong-2") and t["raw"] == t["answer"] for t in trials)
    elif model == "fake/random":
        assert counts["error"] == 0 and counts["correct"] > 0 and counts["incorrect"] > 0
    elif model == "fake/error":
        assert counts == {"correct": 0, "incorrect": 0, "error": 20}  # never counted as wrong answers
        assert outcomes.get("errors") == 20
        assert {t["error"] for t in trials} == {"BackendError: fake/error: injected backend failure"}
        assert all(t["fatal"] is False and t["reason"] is None for t in trials)
        assert all(c["n"] == 0 for c in run.record["cells"])
        assert run.record["stopped"] is None  # an ordinary backend error does not stop the run
    else:
        assert counts["error"] > 0 and counts["correct"] > 0 and counts["incorrect"] == 0


FATAL = '''
import pytest

from pytest_longctx.errors import FatalBackendError


@pytest.mark.longctx("fatal")
async def test_spend_limit(longctx):
    if longctx.sample == 1:
        raise FatalBackendError("spend limit reached")
'''


def test_fatal_backend_error_stops_the_run(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_fatal=FATAL)
    run = longctx_runner.run("--longctx-samples", "5")
    assert run.ret == pytest.ExitCode.INTERRUPTED  # stopped, not merely failed
    record = run.record
    assert record["stopped"] == "FatalBackendError: spend limit reached"
    assert [t["outcome"] for t in record["trials"]] == ["correct", "error"]  # nothing ran after it
    assert record["trials"][1]["fatal"] is True
