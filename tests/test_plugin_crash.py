"""A crashed xdist worker loses only the test it was running, and that test is an error trial with the reason."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.session.identity import split_nodeid

CRASH = '''
import os

import pytest

from pytest_longctx import Oracle, Request

pytestmark = pytest.mark.longctx("crash")


@pytest.fixture
def doom(request):
    """Kills the worker during set-up of one trial (after the longctx fixture): no setup report is sent."""
    if "die_in_setup" in request.node.name and request.node.callspec.params["longctx_sample"] == 2:
        os._exit(3)


@pytest.mark.parametrize("fate", ["live", "die", "die_in_setup"])
async def test_trial(longctx, doom, fate):
    answer = await longctx.ask(Request.user(f"fate {fate}", max_tokens=4), oracle=Oracle("ok", ("ko",)))
    if fate == "die" and longctx.sample == 1:
        os._exit(1)
    longctx.record(expected="ok", answer=answer)
    assert answer == "ok"
'''


@pytest.mark.e2e
def test_crashed_worker_trial_is_an_error_with_the_reason(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_crash=CRASH)
    run = longctx_runner.run("--longctx-samples", "3", "-n", "2", "-k", "not die_in_setup")

    assert run.ret == pytest.ExitCode.TESTS_FAILED
    assert "crashed" in run.result.stdout.str()
    trials = {t["nodeid"]: t for t in run.record["trials"]}
    assert len(trials) == 6  # nothing is dropped
    died = trials["test_crash.py::test_trial[die-s1]"]
    assert (died["experiment"], died["params"], died["sample"], died["outcome"]) == ("crash", {"fate": "die"}, 1,
                                                                                      "error")
    assert died["error"].startswith("WorkerCrashed: worker 'gw") and "crashed while running" in died["error"]
    assert died["detail"] == {"crash": True, "identity_from": "setup report"}
    assert isinstance(died["seed"], int) and died["seed"] != trials["test_crash.py::test_trial[die-s0]"]["seed"]
    live, die = run.cell("crash", fate="live"), run.cell("crash", fate="die")
    assert (live["n"], live["correct"], live["errors"]) == (3, 3, 0)
    assert (die["n"], die["correct"], die["errors"]) == (2, 2, 1)  # n counts answered trials; the crash is an error
    assert run.record["usage"]["trials"] == 6
    assert run.record["settings"]["workers"] == 2


@pytest.mark.e2e
def test_worker_dying_in_setup_is_placed_in_its_cell_by_a_sibling_trial(longctx_runner: Any) -> None:
    """One worker runs the trials in order, so samples 0 and 1 of the cell were set up before sample 2 dies."""
    longctx_runner.pytester.makepyfile(test_crash=CRASH)
    run = longctx_runner.run("--longctx-samples", "3", "-n", "1", "-k", "die_in_setup")

    assert run.ret == pytest.ExitCode.TESTS_FAILED
    (dead,) = [t for t in run.record["trials"] if t["outcome"] == "error"]
    assert dead["nodeid"] == "test_crash.py::test_trial[die_in_setup-s2]"
    assert (dead["experiment"], dead["params"], dead["sample"]) == ("crash", {"fate": "die_in_setup"}, 2)
    assert dead["detail"] == {"crash": True, "identity_from": "sibling trial"} and dead["seed"] is None
    cell = run.cell("crash", fate="die_in_setup")
    assert (cell["n"], cell["correct"], cell["errors"]) == (2, 2, 1)


@pytest.mark.parametrize(("nodeid", "parts"), [
    ("t.py::test_x[die-s1]", ("t.py::test_x", "die", 1)),
    ("t.py::test_x[s12]", ("t.py::test_x", "", 12)),
    ("t.py::test_x[a-b-s0]", ("t.py::test_x", "a-b", 0)),
    ("t.py::test_x", ("t.py::test_x", "", 0)),
    ("t.py::C::test_x[bs3x]", ("t.py::C::test_x", "bs3x", 0)),
])
def test_nodeid_parts(nodeid: str, parts: tuple[str, str, int]) -> None:
    assert split_nodeid(nodeid) == parts
