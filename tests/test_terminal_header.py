"""The summary's header says how many trials each cell ran, as each experiment decided it (``samples_for``), not
the core's default for the model (``samples=1`` for the local model while every cell ran 10)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.reporting.samples import samples_per_cell

CONFTEST = '''
from pytest_longctx import Defaults


def pytest_longctx_defaults(config):
    return [Defaults("demo", samples=3), Defaults("other", samples=2)]
'''

OTHER = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("other")
@pytest.mark.parametrize("n", [1, 2])
async def test_other(longctx, n):
    answer = await longctx.ask(Request.user("Say 1.", max_tokens=4, template="one@1"), oracle=Oracle("1"))
    assert answer.strip() == "1"
'''


@pytest.mark.parametrize("args, header", [([], "samples per cell: demo 3, other 2"),
                                          (["--longctx-samples", "4"], "samples per cell: 4")],
                         ids=["experiments-decide", "option"])
def test_the_header_says_what_ran(runner: Any, args: list[str], header: str) -> None:
    runner.pytester.makeconftest(CONFTEST)
    runner.pytester.makepyfile(test_other=OTHER)
    run = runner.run(*args, model="fake/perfect")
    out = run.result.stdout.str()
    assert run.ret == 0, out
    (line,) = [x for x in run.result.stdout.lines if x.lstrip("=").startswith(" longctx: fake/perfect")]
    assert line.strip("= ").endswith(header), line
    assert "samples=40" not in out  # the core's default for fakes, which no cell ran


def test_samples_per_cell() -> None:
    cells = [{"experiment": "qa", "n": 9, "errors": 1}, {"experiment": "qa", "n": 6, "errors": 0},
             {"experiment": "lrt", "n": 10, "errors": 0}]
    assert samples_per_cell(cells) == "lrt 10, qa 6-10"
    assert samples_per_cell(cells[:1] + cells[2:]) == "10"
