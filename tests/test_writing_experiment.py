"""docs/writing-an-experiment.md runs as written: its test file and ``conftest.py`` blocks, put together as the page
says, make a user experiment whose declaration (``pytest_longctx.Experiment``) registers its option, resolves it
(command line, ini, usage errors), parametrizes the test from it and reaches the record's settings and defaults;
``Experiment.own`` hands a hook only its experiments' rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import LongctxRun, LongctxRunner

PAGE = Path(__file__).resolve().parents[1] / "docs" / "writing-an-experiment.md"
PARAMETRIZE = '@pytest.mark.parametrize("filler", [10, 1000])'


def blocks() -> list[str]:
    """The page's Python blocks, in order: the test file, then the conftest.py parts."""
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


@pytest.fixture
def passkey(longctx_runner: LongctxRunner) -> LongctxRunner:
    """The page's experiment: its test without the parametrize line the declaration replaces, and its conftest.py."""
    test, *conftest = blocks()
    assert PARAMETRIZE in test and "PASSKEY = Experiment(" in conftest[-1], "the page's example changed shape"
    test = "".join(line for line in test.splitlines(keepends=True) if not line.startswith(PARAMETRIZE))
    longctx_runner.pytester.makepyfile(test_passkey=test,
                                       conftest="\n\n".join(conftest))
    return longctx_runner


def fillers(run: LongctxRun) -> list[int]:
    return sorted({c["params"]["filler"] for c in run.record["cells"] if c["experiment"] == "passkey"})


def test_the_pages_experiment_runs_with_its_declared_defaults(passkey: LongctxRunner) -> None:
    run = passkey.run("-p", "no:xdist")
    assert run.ret == 0, run.result.stdout.str()
    settings = run.record["settings"]
    assert fillers(run) == [10, 1000] and settings["passkey_fillers"] == [10, 1000]
    assert settings["defaults"]["passkey"]["conditions"] == {"fillers": [10, 1000]}
    assert settings["defaults"]["passkey"]["samples"] is None  # the fake model runs nowhere "cpu"
    assert [t["title"] for t in run.record["tables"]] == ["Pass key by filler"]


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_the_declared_option_is_read_from_the_command_line_or_the_ini_file(passkey: LongctxRunner,
                                                                           where: str) -> None:
    if where == "ini":
        passkey.project('longctx_passkey_fillers = "40"')
    run = passkey.run("-p", "no:xdist", *(["--longctx-passkey-fillers", "20,40"] if where == "cli" else []),
                      "--longctx-samples", "2")
    assert run.ret == 0, run.result.stdout.str()
    expected = [20, 40] if where == "cli" else [40]
    assert fillers(run) == expected and run.record["settings"]["passkey_fillers"] == expected
    assert {c["n"] for c in run.record["cells"]} == {2}


@pytest.mark.parametrize("value, message", [("x", "--longctx-passkey-fillers: expected a whole number, got 'x'"),
                                            ("200000", "--longctx-passkey-fillers: at most 100000 sentences")])
def test_a_bad_value_of_the_declared_option_is_a_one_line_usage_error(passkey: LongctxRunner, value: str,
                                                                     message: str) -> None:
    run = passkey.run("-p", "no:xdist", "--longctx-passkey-fillers", value)
    assert run.ret == 4
    err = run.result.stderr.str()
    assert f"ERROR: {message}" in err and "Traceback" not in err, err


@pytest.mark.e2e
def test_the_pages_experiment_resolves_its_options_on_every_worker(passkey: LongctxRunner) -> None:
    run = passkey.run("-n", "2", "--longctx-passkey-fillers", "10,40", "--longctx-samples", "2")
    assert run.ret == 0, run.result.stdout.str()
    assert fillers(run) == [10, 40] and len(run.record["trials"]) == 4


BARE = '''
from pytest_longctx import Experiment, OptionDef

DEMO = Experiment("demo", [OptionDef("demo-size", "3", "demo size (default: 3)")], experiments=("demo", "demo-b"))
pytest_addhooks = DEMO.register


@DEMO.own
def pytest_longctx_tables(cells, trials):
    names = sorted({c["experiment"] for c in cells})
    return [{"experiment": "demo", "title": f"{len(cells)} cells of {names}, {len(trials)} trials",
             "columns": ["size"], "rows": [[DEMO_SIZE[0]]]}]


DEMO_SIZE = []


def pytest_configure(config):
    DEMO_SIZE.append(DEMO.options(config)["demo-size"])
'''

TESTS = '''
import pytest
from pytest_longctx import Oracle


@pytest.mark.longctx("{name}")
async def test_{test}(longctx):
    assert (await longctx.ask("Say 1.", oracle=Oracle("1"))).strip() == "1"
'''


@pytest.mark.parametrize("names", [("demo", "demo-b", "other"), ("other",)], ids=["mine-ran", "none-of-mine"])
def test_a_declaration_without_resolve_keeps_the_options_as_given_and_own_filters_rows(
        longctx_runner: LongctxRunner, names: tuple[str, ...]) -> None:
    longctx_runner.pytester.makeconftest(BARE)
    longctx_runner.pytester.makepyfile(**{f"test_{i}": TESTS.format(name=n, test=i) for i, n in enumerate(names)})
    run = longctx_runner.run("-p", "no:xdist", "--longctx-samples", "2", "--longctx-demo-size", "5")
    assert run.ret == 0, run.result.stdout.str()
    assert run.record["settings"]["demo_size"] == "5"
    tables = run.record["tables"]
    if "demo" in names:
        assert [t["title"] for t in tables] == ["2 cells of ['demo', 'demo-b'], 4 trials"], tables
        assert tables[0]["rows"] == [["5"]]
    else:
        assert tables == []  # not called: none of its experiments ran
