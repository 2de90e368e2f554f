"""Switches behave like pytest's own flags: bare, anywhere on the command line, with a value, from the ini file.

One pytester test per switch (every ``OptionDef`` with a bare value: the core's and the experiments'), each form
run through a real pytest: the value the option resolves to and the paths pytest collects are written by a
conftest of the project, so a path after a bare switch that was taken for its value shows up.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_longctx.experiments.docs.options import OPTIONS as DOCS_OPTIONS
from pytest_longctx.experiments.litm.options import OPTIONS as LITM_OPTIONS
from pytest_longctx.session.option_def import OptionDef
from pytest_longctx.session.option_group import normalize_switches
from pytest_longctx.session.options import OPTIONS
from tests.passkey_api import MODEL

SWITCHES = [o for o in (*OPTIONS, *LITM_OPTIONS, *DOCS_OPTIONS) if o.bare is not None]

SHOW = '''
import json
from pathlib import Path

import pytest

from pytest_longctx import option_value
from pytest_longctx.experiments.docs.options import OPTIONS as DOCS_OPTIONS
from pytest_longctx.experiments.litm.options import OPTIONS as LITM_OPTIONS
from pytest_longctx.session.options import OPTIONS


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    values = {o.flag: option_value(config, o) for o in (*OPTIONS, *LITM_OPTIONS, *DOCS_OPTIONS) if o.bare}
    Path(config.rootpath, "shown.json").write_text(json.dumps({"values": values, "args": list(config.args)}))
'''


def other_value(opt: OptionDef) -> str:
    """A value that is not the bare one (the --no- value where there is one)."""
    return opt.negated or ("off" if opt.bare == "on" else "false")


@pytest.fixture
def project(longctx_runner: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-used")
    longctx_runner.pytester.makeconftest(SHOW)
    longctx_runner.pytester.makepyfile(test_a="def test_a():\n    pass\n", test_b="def test_b():\n    pass\n")
    return longctx_runner


def shown_with(runner: Any, *args: str) -> tuple[dict[str, Any], list[str]]:
    """(option values, pytest's collection arguments) of a collect-only run with ``args``."""
    run = runner.run("--co", *args, model=MODEL, cache=True)
    assert run.ret == pytest.ExitCode.OK, run.result.stdout.str() + run.result.stderr.str()
    data = json.loads((runner.pytester.path / "shown.json").read_text())
    return data["values"], data["args"]


shown = shown_with


def test_every_registered_switch_has_its_test(pytestconfig: pytest.Config) -> None:
    from pytest_longctx.session.option_group import switches

    registered = {flag for flag in switches(pytestconfig._parser) if not flag.startswith("--no-")}
    assert registered == {o.flag for o in SWITCHES}


#: Switches that are refused alone when on: what they need beside them (a plan checks no gate: sends nothing; the
#: compared record is an empty one, written by the test).
NEEDS = {"--longctx-sequential": ["--longctx-plan=true", "--longctx-compare=base.json",
                                  "--longctx-threshold=*:max-drop=0"],
         "--longctx-compare-partial": ["--longctx-compare=base.json"]}
BASE = {"schema": "pytest-longctx/run", "version": 3, "settings": {"seed": 0, "protocol": "longctx"}, "cells": [],
        "trials": [], "stopped": None}


@pytest.mark.parametrize("opt", SWITCHES, ids=[o.flag for o in SWITCHES])
def test_switch(project: Any, opt: OptionDef) -> None:
    flag, other = opt.flag, other_value(opt)
    needs = NEEDS.get(flag, [])
    (project.pytester.path / "base.json").write_text(json.dumps(BASE))

    def shown(runner: Any, *args: str) -> tuple[dict[str, Any], list[str]]:
        return shown_with(runner, *args, *needs)

    for args, value, paths in [
        ([flag, "test_a.py"], opt.bare, ["test_a.py"]),  # before a path: the path is not its value
        (["test_a.py", flag], opt.bare, ["test_a.py"]),  # last
        ([flag, "-k", "test_b"], opt.bare, None),  # before another option
        ([flag, other, "test_a.py"], other, ["test_a.py"]),  # with a value after it (as before switches)
        ([flag, other.upper()], other.upper(), None),
        ([f"{flag}={other}", "test_b.py"], other, ["test_b.py"]),
        ([], opt.default, None),
    ]:
        values, collected = shown(project, *args)
        assert values[flag] == value, (args, values)
        if paths is not None:
            assert collected == paths, (args, collected)
    project.project(f'longctx_{opt.noun.replace("-", "_")} = "{other}"')
    assert shown(project)[0][flag] == other  # the ini value
    assert shown(project, flag)[0][flag] == opt.bare  # the command line wins
    if opt.negated is not None:
        project.project()
        values, collected = shown(project, opt.negated_flag, "test_a.py")
        assert (values[flag], collected) == (opt.negated, ["test_a.py"])


def test_a_bad_switch_value_is_a_one_line_usage_error(project: Any) -> None:
    run = project.run("--longctx-plan=maybe", "test_a.py", model=MODEL, cache=True)
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in run.result.stderr.lines if line.strip()] == [
        "ERROR: --longctx-plan: expected true or false, got 'maybe'"]


@pytest.mark.parametrize("opt", [o for o in SWITCHES if o.flag in ("--longctx-plan", "--longctx-docs-judge")],
                         ids=lambda o: o.flag)
@pytest.mark.parametrize("word", ["maybe", "perhaps", "no_such_dir/", "missing.py::test_a"])
def test_a_word_after_a_switch_that_is_no_value_and_no_path_is_a_usage_error(project: Any, opt: OptionDef,
                                                                           word: str) -> None:
    run = project.run(opt.flag, word, "test_a.py", model=MODEL, cache=True)
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.result.stdout.str()
    assert [line for line in run.result.stderr.lines if line.strip()] == [
        f"ERROR: {opt.flag}: {word!r} is neither a value of it (such as true or false) nor a file or folder; "
        f"write {opt.flag}=VALUE, or pass a path that exists"]
    assert not (project.pytester.path / "shown.json").exists()  # stopped before configuring, let alone planning
    assert not run.report_dir.exists()


@pytest.mark.parametrize("args, paths", [(["--longctx-plan", "tests/"], ["tests"]),
                                         (["--longctx-plan", "test_a.py::test_a"], ["test_a.py::test_a"]),
                                         (["--longctx-plan", "--pyargs", "test_b"], ["test_b"])],
                         ids=["folder", "node-id", "pyargs"])
def test_a_path_after_a_switch_is_a_path(project: Any, args: list[str], paths: list[str]) -> None:
    tests = project.pytester.mkdir("tests")
    (tests / "test_c.py").write_text("def test_c():\n    pass\n")
    values, collected = shown(project, *args)
    assert values["--longctx-plan"] == "true"
    assert [p.rstrip("/") for p in collected] == paths


def test_normalize_switches() -> None:
    bare = {"--longctx-plan": "true", "--longctx-prefetch": "on"}
    assert normalize_switches(["--longctx-plan", "evals", "--longctx-prefetch", "auto", "-k", "x", "--longctx-plan"],
                              bare) == ["--longctx-plan=true", "evals", "--longctx-prefetch=auto", "-k", "x",
                                        "--longctx-plan=true"]
    assert normalize_switches(["--longctx-plan", "No", "--", "--longctx-plan", "x"], bare) == [
        "--longctx-plan=No", "--", "--longctx-plan", "x"]


@pytest.mark.parametrize("args", [["--longctx-plan", "-k", "passkey"], ["-k", "passkey", "--longctx-plan"],
                                  ["--longctx-plan", "test_eval.py", "-n", "2"]],
                         ids=["first", "last", "before-a-path-n2"])
def test_bare_plan_plans_wherever_it_stands(runner: Any, api: Any, args: list[str]) -> None:
    srv = api()
    run = runner.run("--longctx-samples", "2", *args, model=MODEL, cache=True)
    assert run.ret == pytest.ExitCode.OK, run.result.stdout.str() + run.result.stderr.str()
    assert run.plan_record["settings"]["plan"] is True
    assert run.plan_record["plan"]["models"][MODEL]["requests"] == 4  # 2 cells x 2 samples, all planned
    assert srv.stats.endpoints.get("messages", 0) == 0
