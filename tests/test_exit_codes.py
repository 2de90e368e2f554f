"""The exit-code table of docs/ci-gating.md holds: every code it lists is produced by a real run, and no other
code is listed.

One pytester run per code, with fake models (and, for the fatal-stop case, the SDK against the local
Messages-API server). Usage errors and gate outcomes are covered row by row in test_bad_inputs_gate.py;
this file checks the table itself.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx import GATE_ERROR_EXIT_CODE, GATE_EXIT_CODE
from pytest_longctx.server import FaultPlan
from tests.passkey_api import EVAL, MODEL

GATING_DOC = Path(__file__).resolve().parent.parent / "docs" / "ci-gating.md"

ONE = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("codes")
@pytest.mark.parametrize("size", [1, 2])
async def test_codes(longctx, size):
    answer = await longctx.ask(Request.user("Say yes." * size, max_tokens=4), oracle=Oracle("yes", ("no",)))
    longctx.record(expected="yes", answer=answer)
    assert answer == "yes"
'''

#: A hook that breaks after the trials ran: pytest reports INTERNALERROR (3); the record must still be written.
BROKEN_HOOK = '''
def pytest_runtest_logfinish(nodeid, location):
    if nodeid.endswith("[2-s1]"):
        raise RuntimeError("a broken plugin hook")
'''


def readme_codes() -> dict[int, str]:
    """The exit-code table of docs/ci-gating.md: {code: meaning}."""
    lines = GATING_DOC.read_text(encoding="utf-8").split("\n## Exit codes", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| code |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = [re.match(r"\| (\d+) \| (.+) \|$", line) for line in lines[start:end]]
    return {int(m.group(1)): m.group(2) for m in rows if m}


def _run(runner: Any, *args: str, model: str = "fake/perfect", **kwargs: Any) -> Any:
    return runner.run("--longctx-samples", "2", *args, model=model, **kwargs)


def code_0(runner: Any) -> Any:
    run = _run(runner, "--longctx-threshold", "*:0.9", model="fake/perfect")
    assert run.record["gate"]["status"] == "pass"
    return run


def code_0_wrong_answers_are_data(runner: Any) -> Any:
    run = _run(runner, model="fake/wrong")
    assert {t["outcome"] for t in run.record["trials"]} == {"incorrect"}
    return run


def code_1(runner: Any) -> Any:
    run = _run(runner, model="fake/error")
    assert {t["outcome"] for t in run.record["trials"]} == {"error"}
    return run


def code_3(runner: Any) -> Any:
    runner.pytester.makeconftest(BROKEN_HOOK)
    run = _run(runner)
    assert "INTERNALERROR" in run.result.stdout.str() + run.result.stderr.str()
    assert len(run.record["trials"]) == 4  # nothing computed is lost
    return run


def code_4(runner: Any) -> Any:
    run = _run(runner, "--longctx-samples", "many")
    assert run.result.stderr.str().strip().splitlines()[-1].startswith("ERROR: --longctx-samples: ")
    return run


def code_5(runner: Any) -> Any:
    run = _run(runner, "-k", "no_such_test", "--longctx-threshold", "*:0.9")
    assert not (run.report_dir / "longctx.json").exists()
    return run


def code_10(runner: Any) -> Any:
    run = _run(runner, "--longctx-threshold", "*:0.9", model="fake/wrong")
    assert run.record["gate"]["status"] == "fail"
    return run


def code_11(runner: Any) -> Any:
    run = _run(runner, "-n", "2", "--longctx-threshold", "size=3:0.9")  # under xdist only the gate can tell
    assert run.record["gate"]["status"] == "error"
    return run


CASES = {0: [code_0, code_0_wrong_answers_are_data], 1: [code_1], 3: [code_3], 4: [code_4], 5: [code_5],
         GATE_EXIT_CODE: [code_10], GATE_ERROR_EXIT_CODE: [code_11]}


@pytest.mark.parametrize("case", [f for fs in CASES.values() for f in fs], ids=lambda f: f.__name__)
def test_exit_code(longctx_runner: Any, case: Any) -> None:
    longctx_runner.pytester.makepyfile(test_codes=ONE)
    expected = next(code for code, fs in CASES.items() if case in fs)
    run = case(longctx_runner)
    assert run.ret == expected, run.result.stdout.str() + run.result.stderr.str()


def test_code_2_a_fatal_api_error_interrupts_the_run(longctx_runner: Any, api: Any) -> None:
    api(faults=FaultPlan(sticky="auth"))
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    run = longctx_runner.run("--longctx-samples", "2", "--longctx-prefetch", "off", model=MODEL, cache=True)
    assert run.ret == pytest.ExitCode.INTERRUPTED
    assert "authentication" in run.record["stopped"].lower()


def test_the_readme_table_lists_exactly_the_codes_checked_here() -> None:
    documented = readme_codes()
    assert set(documented) == set(CASES) | {2}, documented
    assert "GATE_EXIT_CODE" in documented[GATE_EXIT_CODE] and "GATE_ERROR_EXIT_CODE" in documented[GATE_ERROR_EXIT_CODE]
    assert "INTERNALERROR" in documented[3]
