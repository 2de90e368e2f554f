"""The plugin objects ``plugin.pytest_configure`` registers (docs/development.md): the run controller always, the
model services only when a model is used, the sequential gate only with ``--longctx-sequential``; in-process runs."""

from __future__ import annotations

from typing import Any

import pytest

TRIALS = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("objs")
@pytest.mark.parametrize("kind", ["a", "b"])
async def test_one(longctx, kind):
    answer = await longctx.ask(Request.user(f"{kind}?", max_tokens=4), oracle=Oracle("yes", ("no",)))
    assert answer == "yes"
'''

#: Writes which ``longctx-*`` plugins this run registered, as the run ends.
NAMES = '''
def pytest_unconfigure(config):
    names = sorted(n for n, _ in config.pluginmanager.list_name_plugin() if n and n.startswith("longctx-"))
    (config.rootpath / "plugins.txt").write_text("\\n".join(names), encoding="utf-8")
'''


def _registered(longctx_runner: Any) -> set[str]:
    return set((longctx_runner.pytester.path / "plugins.txt").read_text(encoding="utf-8").split("\n"))


@pytest.fixture
def project(longctx_runner: Any) -> Any:
    longctx_runner.pytester.makepyfile(test_objs=TRIALS)
    longctx_runner.pytester.makeconftest(NAMES)
    return longctx_runner


def test_a_run_registers_the_controller_and_the_services_but_no_sequential_gate(project: Any) -> None:
    run = project.run("-p", "no:xdist")
    assert run.ret == pytest.ExitCode.OK
    assert [c["n"] for c in run.record["cells"]] == [40, 40]  # --longctx-samples' default
    names = _registered(project)
    assert {"longctx-controller", "longctx-controller-last", "longctx-services", "longctx-errors"} <= names
    assert "longctx-sequential" not in names and "longctx-xdist" not in names  # xdist is off


def test_collect_only_uses_no_model_so_no_services_start(project: Any) -> None:
    run = project.run("-p", "no:xdist", "--collect-only")
    assert run.ret == pytest.ExitCode.OK
    names = _registered(project)
    assert "longctx-controller" in names
    assert "longctx-services" not in names
    assert not (run.report_dir / "longctx.json").exists()


def test_the_sequential_gate_is_registered_with_its_option_and_decides_the_run(project: Any) -> None:
    first = project.run("-p", "no:xdist")
    assert first.ret == pytest.ExitCode.OK
    compared = str(first.report_dir / "longctx.json")
    run = project.run("-p", "no:xdist", "--longctx-sequential", "--longctx-compare", compared,
                      "--longctx-threshold", "experiment=objs:max-drop=0")
    assert "longctx-sequential" in _registered(project)
    section = run.record["sequential"]
    assert section["groups_planned"] == 40 and section["groups_completed"] < 40  # it looked, and stopped early
    assert [(a["threshold"], a["settled"]) for a in section["alarms"]] == [("experiment=objs:max-drop=0", "cleared")]
    assert run.record["gate"]["status"] == "pass"
    assert run.ret == pytest.ExitCode.OK  # the same answers: the alarm clears
