"""Aggregation and gating end to end, in every execution mode: plain, -n 0, -n 2 and -p no:xdist.

Each scenario asserts on the run record and the exit code, and its figures must be identical in
all four modes (compared with the first mode that ran in this session). Every run uses the same seed
and model, and each trial writes the sha256 of its prompt into its record: the prompts must be
byte-identical in every run, with or without -n.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx import GATE_EXIT_CODE

#: Answers: right (always correct), wrong (always incorrect), coin (seeded: expected yes or no); and numpy
#: values as condition params and details (they must reach the controller as plain JSON, also from workers).
ANSWERS = '''
import hashlib

import numpy as np
import pytest

from pytest_longctx import Oracle, Request

pytestmark = pytest.mark.longctx("mix")


@pytest.mark.parametrize("kind", ["right", "wrong", "coin"])
async def test_answer(longctx, kind):
    words = " ".join(str(longctx.rng.randrange(10**6)) for _ in range(8))
    prompt = f"kind={kind} {words}\\nSay yes."
    longctx.record(prompt_sha=hashlib.sha256(prompt.encode()).hexdigest())
    expected = "yes" if kind == "right" or (kind == "coin" and longctx.rng.random() < 0.5) else "no"
    answer = await longctx.ask(Request.user(prompt, max_tokens=4, template="mix@1"), oracle=Oracle("yes", ("no",)))
    longctx.record(expected=expected, answer=answer)
    assert answer == expected


@pytest.mark.longctx("numpy", exclude=("label",))
@pytest.mark.parametrize("depth", [np.float64(0.25), np.float64(0.75)])
@pytest.mark.parametrize("label", [np.str_("excluded")])
async def test_numpy_params(longctx, depth, label):
    longctx.record(position=np.int64(3), share=np.float32(0.5), tag=np.str_("t"))
    answer = await longctx.ask(Request.user(f"depth {depth}"), oracle=Oracle("yes"))
    longctx.record(expected=np.str_("yes"), answer=answer)
    assert answer == "yes"
'''

#: Harness failures of every kind: none of them is a wrong answer.
ERRORS = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.fixture
def broken():
    raise RuntimeError("fixture exploded")


@pytest.mark.longctx("err-raise")
async def test_raise_after_call(longctx):
    await longctx.ask(Request.user("hi"), oracle=Oracle("yes"))
    raise KeyError("bug in the test")


@pytest.mark.longctx("err-assert-first")
async def test_assert_before_call(longctx):
    assert longctx.sample < 0, "precondition checked before asking"
    await longctx.ask(Request.user("hi"), oracle=Oracle("yes"))


@pytest.mark.longctx("err-fixture-first")
async def test_fixture_before_longctx(broken, longctx):
    await longctx.ask(Request.user("hi"), oracle=Oracle("yes"))


@pytest.mark.longctx("err-fixture-last")
async def test_fixture_after_longctx(longctx, broken):
    await longctx.ask(Request.user("hi"), oracle=Oracle("yes"))
'''

SAMPLES = 3
ERROR_EXPERIMENTS = ("err-assert-first", "err-fixture-first", "err-fixture-last", "err-raise")


def _figures(run: Any) -> dict[str, Any]:
    """Everything in a record that must not depend on the execution mode."""
    return {"cells": run.record["cells"], "trials": run.trials(), "usage": run.record["usage"],
            "gate": run.record["gate"]}


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, Any]]:
    """Figures of the first mode that ran each scenario; later modes must match them."""
    return {}


def _same_as_reference(reference: dict[str, dict[str, Any]], scenario: str, run: Any) -> None:
    """Same figures as this scenario's first run, and the same prompts as every run (same seed and model)."""
    figures = _figures(run)
    expected = reference.setdefault(scenario, figures)
    assert figures == expected
    prompts = {t["nodeid"]: (t["seed"], t["detail"]["prompt_sha"])
               for t in run.record["trials"] if t["experiment"] == "mix"}
    assert len(prompts) == 3 * SAMPLES
    assert prompts == reference.setdefault("prompts", {"prompts": prompts})["prompts"]


def _check_answer_cells(run: Any) -> None:
    right, wrong, coin = (run.cell("mix", kind=k) for k in ("right", "wrong", "coin"))
    assert (right["n"], right["correct"], right["incorrect"], right["errors"]) == (SAMPLES, SAMPLES, 0, 0)
    assert right["accuracy"] == 1.0
    assert (wrong["n"], wrong["correct"], wrong["incorrect"], wrong["errors"]) == (SAMPLES, 0, SAMPLES, 0)
    assert wrong["accuracy"] == 0.0
    assert coin["n"] == SAMPLES and coin["errors"] == 0
    for trial in (t for t in run.record["trials"] if t["experiment"] == "mix"):
        assert trial["outcome"] in ("correct", "incorrect")
        assert len(trial["detail"]["prompt_sha"]) == 64
        assert trial["calls"] == 1 and trial["input_tokens"] > 0
    for depth in (0.25, 0.75):
        cell = run.cell("numpy", depth=depth)
        assert (cell["n"], cell["correct"]) == (SAMPLES, SAMPLES)
    numpy_trial = next(t for t in run.record["trials"] if t["experiment"] == "numpy")
    assert numpy_trial["detail"] == {"position": 3, "share": 0.5, "tag": "t"}
    assert numpy_trial["expected"] == "yes"


def test_mixed_outcomes_with_errors(longctx_runner: Any, mode_args: list[str],
                                    reference: dict[str, dict[str, Any]]) -> None:
    longctx_runner.pytester.makepyfile(test_answers=ANSWERS, test_errors=ERRORS)
    run = longctx_runner.run("--longctx-samples", str(SAMPLES), "--longctx-threshold", "kind=wrong:0.5/point",
                             *mode_args)

    assert run.ret == pytest.ExitCode.TESTS_FAILED  # errors fail the run; the missed threshold does not add to it
    _check_answer_cells(run)
    for experiment in ERROR_EXPERIMENTS:
        cell = run.cell(experiment)
        assert (cell["errors"], cell["correct"], cell["incorrect"], cell["n"]) == (SAMPLES, 0, 0, 0), experiment
    errors = [t for t in run.record["trials"] if t["outcome"] == "error"]
    assert len(errors) == SAMPLES * len(ERROR_EXPERIMENTS)
    assert all(t["error"] for t in errors)
    assert {t["error"] for t in errors if t["experiment"] == "err-fixture-first"} == {"RuntimeError: fixture exploded"}
    assert run.record["gate"]["status"] == "fail"
    assert run.record["stopped"] is None
    _same_as_reference(reference, "mixed", run)


def test_threshold_met(longctx_runner: Any, mode_args: list[str], reference: dict[str, dict[str, Any]]) -> None:
    longctx_runner.pytester.makepyfile(test_answers=ANSWERS)
    run = longctx_runner.run("--longctx-samples", str(SAMPLES), "--longctx-threshold",
                             "experiment=mix,kind=r*:0.9/point/each", "--longctx-threshold", "*:0.0", *mode_args)

    assert run.ret == pytest.ExitCode.OK  # the wrong answers are data, not failures
    _check_answer_cells(run)
    outcomes = run.result.parseoutcomes()
    assert "failed" not in outcomes and "errors" not in outcomes
    gate = run.record["gate"]
    assert (gate["status"], gate["exit_code"]) == ("pass", 0)
    assert gate["counts"]["pass"] == 2 and gate["counts"]["fail"] == 0
    assert [c["verdict"] for c in run.cell("mix", kind="right")["checks"]] == ["pass"]  # the /each one
    assert run.cell("mix", kind="wrong")["checks"] == []
    pooled = gate["checks"][1]
    assert (pooled["threshold"], pooled["cells"], pooled["n"]) == ("*:0.0", 5, 5 * SAMPLES)
    _same_as_reference(reference, "met", run)


def test_threshold_missed(longctx_runner: Any, mode_args: list[str], reference: dict[str, dict[str, Any]]) -> None:
    longctx_runner.pytester.makepyfile(test_answers=ANSWERS)
    run = longctx_runner.run("--longctx-samples", str(SAMPLES), "--longctx-threshold", "kind=wrong:0.5/point/each",
                             *mode_args)

    assert run.ret == GATE_EXIT_CODE == 10
    gate = run.record["gate"]
    assert (gate["status"], gate["exit_code"], gate["counts"]["fail"]) == ("fail", 10, 1)
    assert run.cell("mix", kind="wrong")["checks"][0]["verdict"] == "fail"
    assert run.cell("mix", kind="right")["checks"] == []
    _same_as_reference(reference, "missed", run)
