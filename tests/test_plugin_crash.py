"""A crashed xdist worker loses only the test it was running: the other trials still count."""

from __future__ import annotations

from typing import Any

import pytest

CRASH = '''
import os

import pytest

from pytest_longctx import Oracle, Request

pytestmark = pytest.mark.longctx("crash")


@pytest.mark.parametrize("fate", ["live", "die"])
async def test_trial(longctx, fate):
    answer = await longctx.ask(Request.user(f"fate {fate}", max_tokens=4), oracle=Oracle("ok", ("ko",)))
    if fate == "die" and longctx.sample == 1:
        os._exit(1)
    longctx.record(expected="ok", answer=answer)
    assert answer == "ok"
'''


def test_crashed_worker_loses_only_its_test(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_crash=CRASH)
    run = longctx_runner.run("--longctx-samples", "3", "-n", "2")

    assert run.ret == pytest.ExitCode.TESTS_FAILED
    assert "crashed" in run.result.stdout.str()
    nodeids = [t["nodeid"] for t in run.record["trials"]]
    assert len(nodeids) == 5
    assert "test_crash.py::test_trial[die-s1]" not in nodeids
    live, die = run.cell("crash", fate="live"), run.cell("crash", fate="die")
    assert (live["n"], live["correct"], live["errors"]) == (3, 3, 0)
    assert (die["n"], die["correct"], die["errors"]) == (2, 2, 0)
    assert run.record["usage"]["trials"] == 5
    assert run.record["settings"]["workers"] == 2
