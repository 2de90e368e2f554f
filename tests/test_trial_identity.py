"""One function gives a trial's identity: setup errors land in the same cell as the trials they belong to."""

from __future__ import annotations

from typing import Any

import pytest

UNNAMED = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.fixture
def flaky_fixture(longctx_sample):
    if longctx_sample == 1:
        raise RuntimeError("fixture exploded")


@pytest.mark.longctx()
@pytest.mark.parametrize("size", [1, 2])
async def test_unnamed(flaky_fixture, longctx, size):
    answer = await longctx.ask(Request.user(f"size {size}", max_tokens=4), oracle=Oracle("ok", ("ko",)))
    assert answer == "ok"


@pytest.mark.longctx()
@pytest.mark.parametrize("size", [1, 2])
async def test_unnamed_before(longctx, flaky_fixture, size):
    answer = await longctx.ask(Request.user(f"size {size}", max_tokens=4), oracle=Oracle("ok", ("ko",)))
    assert answer == "ok"
'''


@pytest.mark.parametrize("mode", [[], ["-n", "2"]], ids=["plain", "n2"])
def test_setup_errors_share_the_cell_of_their_trials(longctx_runner: Any, mode: list[str]) -> None:
    longctx_runner.pytester.makepyfile(test_ident=UNNAMED)
    run = longctx_runner.run("--longctx-samples", "3", *mode)

    assert run.ret == pytest.ExitCode.TESTS_FAILED
    assert sorted({c["experiment"] for c in run.record["cells"]}) == ["unnamed", "unnamed_before"]
    for experiment in ("unnamed", "unnamed_before"):  # the fixture fails before / after longctx is set up
        for size in (1, 2):
            cell = run.cell(experiment, size=size)
            assert (cell["n"], cell["correct"], cell["errors"]) == (2, 2, 1), (experiment, size, cell)
    errors = [t for t in run.record["trials"] if t["outcome"] == "error"]
    assert len(errors) == 4 and {t["sample"] for t in errors} == {1}
    assert all(t["error"] == "RuntimeError: fixture exploded" for t in errors)
    # the seed is the trial's own when longctx was set up before the fixture failed, else unknown
    assert {t["experiment"]: t["seed"] is None for t in errors} == {"unnamed": True, "unnamed_before": False}
