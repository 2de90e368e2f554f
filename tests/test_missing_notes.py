"""The "not run" line of an experiment without its data is printed (and recorded, so the HTML shows it) only when
the run selected that experiment: ``-k lrt`` says nothing about qa's missing corpus."""

from __future__ import annotations

from typing import Any

import pytest

CONFTEST = '''
from pytest_longctx import CorpusFile, data_missing


def pytest_generate_tests(metafunc):
    if metafunc.module.__name__.endswith("needs_data"):
        raise data_missing(("corpus-qa",), [CorpusFile("corp", "corp.xml", "The corpus")], "corp")
'''

NEEDS = '''
import pytest

pytestmark = pytest.mark.longctx("corpus-qa")


@pytest.mark.parametrize("size", [1, 2])
def test_question(longctx, size):
    pass
'''

OTHER = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("demo")
@pytest.mark.parametrize("n", [1])
async def test_other(longctx, n):
    answer = await longctx.ask(Request.user("Say 1.", max_tokens=4, template="one@1"), oracle=Oracle("1"))
    assert answer.strip() == "1"
'''

LINE = "longctx: corpus-qa not run: The corpus (corp/corp.xml) not found"


@pytest.fixture
def project(longctx_runner: Any) -> Any:
    longctx_runner.pytester.makeconftest(CONFTEST)
    longctx_runner.pytester.makepyfile(test_needs_data=NEEDS, test_other=OTHER)
    return longctx_runner


@pytest.mark.parametrize("args, shown", [([], True), (["-k", "other"], False), (["-k", "needs"], True),
                                         (["-k", "corpus"], True), (["-k", "not other"], True),
                                         (["-k", "question"], True), (["-k", "other", "-n", "2"], False),
                                         (["-m", "longctx"], True), (["-m", "not longctx"], False)],
                         ids=["all", "k-other", "k-module", "k-experiment", "k-not-other", "k-function",
                              "k-other-n2", "m-longctx", "m-not-longctx"])
def test_not_run_only_for_selected_experiments(project: Any, args: list[str], shown: bool) -> None:
    run = project.run(*args, subprocess=True)
    out = run.result.stdout.str()
    assert out.count(LINE) == (1 if shown else 0), out
    if run.report_dir.joinpath("longctx.json").is_file():
        assert [m["experiments"] for m in run.record["missing_data"]] == ([["corpus-qa"]] if shown else [])
