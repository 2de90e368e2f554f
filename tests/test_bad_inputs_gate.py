"""Bad gate, compare and report-dir inputs (issue #16), one pytester run per row.

Every row first makes a good run (a record in ``reports/`` and a filled cache), then the bad run in
the same project, and asserts: the exit code, exactly one line naming the culprit, no traceback, and
that the earlier record and the cache survived. Usage errors (exit 4) happen before any request:
``reports/longctx.json`` and the cache are byte for byte as they were. Gate errors (exit 11) come
from a completed run: its record is written (status ``error`` with the reason) and the earlier
record moves to ``history/0001.json`` unchanged.
"""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import golden_runner
from tests.golden import GoldenCopy, one_line, output

DEMO = '''
import pytest

from pytest_longctx import Oracle, Request

FILLER = "The grass is green. The sky is blue. "
pytestmark = pytest.mark.longctx("demo")


@pytest.mark.parametrize("filler", [2, 8])
async def test_passkey(longctx, filler):
    keys = [longctx.rng.randrange(10_000, 99_999) for _ in range(2)]
    text = FILLER * filler + f"The pass key is {keys[0]}. " + FILLER * filler
    answer = await longctx.ask(Request.user(text + "What is the pass key?", max_tokens=8, template="demo@1"),
                               oracle=Oracle(str(keys[0]), (str(keys[1]),)))
    longctx.record(expected=keys[0], answer=answer)
    assert str(keys[0]) in answer
'''

#: A second experiment, for a compared run that shares no cell with the demo run.
OTHER = DEMO.replace('longctx("demo")', 'longctx("other")').replace("test_passkey", "test_other")


@dataclass
class Project(GoldenCopy):
    """A pytester project with the demo eval, one good run already made (record + cache)."""

    def write(self, name: str, content: str | bytes | dict[str, Any]) -> str:
        path = self.path / name
        if isinstance(content, dict):
            content = json.dumps(content)
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)
        return str(path)

    def baseline(self, **changes: Any) -> dict[str, Any]:
        """The good run's record with some top-level fields replaced."""
        record: dict[str, Any] = json.loads(self.record)
        record.update(changes)
        return record


def _good_run(runner: Any) -> None:
    """One good run in ``runner``'s folder (record + report in ``reports/``), and a cache an earlier paid run left."""
    good = runner.run("--longctx-samples", "2", model="fake/perfect", report_dir="reports", cache=True)
    assert good.ret == 0, good.result.stdout.str()
    # fake models are never cached: an entry an earlier paid run left behind stands in for the cache
    from pytest_longctx.dispatch.cache import ResponseCache

    ResponseCache(runner.pytester.path / "cache").put("ab" * 32, {"text": "42", "input_tokens": 9, "output_tokens": 1},
                                                      {"model": "anthropic/claude-earlier"})


@pytest.fixture(scope="module")
def good_folder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's golden good run: the folder every test's project copies."""
    with golden_runner(request, tmp_path_factory, {}) as runner:
        runner.pytester.makepyfile(test_demo=DEMO)
        _good_run(runner)
    return Path(runner.pytester.path)


@pytest.fixture
def project(longctx_runner: Any, good_folder: Path) -> Project:
    """This test's copy of the project after the good run: its record and report, its cache."""
    longctx_runner.pytester.makepyfile(test_demo=DEMO)
    p = Project(longctx_runner)
    p.copy(good_folder)
    assert p.cache
    return p


def _bad_run(project: Project, *args: str, model: str = "fake/wrong") -> Any:
    return project.runner.run("--longctx-samples", "2", *args, model=model, report_dir="reports", cache=True)


# --- usage errors: exit 4 before any request -------------------------------------------------------------------

def _truncated(p: Project) -> str:
    return p.write("truncated.json", p.record[: len(p.record) // 2])


USAGE_ROWS: dict[str, tuple[Any, str]] = {
    # id: (args builder -> extra args, text the one line must contain)
    "selector-matches-no-cell": (lambda p: ["--longctx-threshold", "experiment=dmeo:0.9"],
                                 "--longctx-threshold: 'experiment=dmeo:0.9' matches none of the collected cells"),
    "selector-unknown-param": (lambda p: ["--longctx-threshold", "experiment=demo,shuffle=none:0.9"],
                               "'experiment=demo,shuffle=none:0.9' matches none of the collected cells"),
    "max-drop-without-compare": (lambda p: ["--longctx-threshold", "*:max-drop=0.05/sig"],
                                 "--longctx-threshold: '*:max-drop=0.05/sig' is relative to an earlier run; "
                                 "pass --longctx-compare"),
    "compare-truncated": (lambda p: ["--longctx-compare", _truncated(p)], "truncated.json: not JSON"),
    "compare-not-json": (lambda p: ["--longctx-compare", p.write("notes.json", "these are my notes\n")],
                         "notes.json: not JSON"),
    "compare-empty": (lambda p: ["--longctx-compare", p.write("empty.json", "")], "empty.json: not JSON"),
    "compare-non-utf8": (lambda p: ["--longctx-compare", p.write("latin.json", b'{"schema": "caf\xe9"}')],
                         "latin.json: cannot read run record"),
    "compare-hello": (lambda p: ["--longctx-compare", p.write("hello.json", {"hello": 1})],
                      "hello.json: not a pytest-longctx run record (no 'schema' field"),
    "compare-a-list": (lambda p: ["--longctx-compare", p.write("list.json", "[]")],
                       "list.json: the file holds list, not a run record object"),
    "compare-other-schema": (lambda p: ["--longctx-compare", p.write("other.json", {"schema": "pytest-benchmark"})],
                             "other.json: not a pytest-longctx run record (schema 'pytest-benchmark'"),
    "compare-future-version": (lambda p: ["--longctx-compare", p.write("v4.json", p.baseline(version=4))],
                               "v4.json: run record version 4 is not supported (this plugin reads versions 1, 2 "
                               "and 3)"),
    # a baseline that cannot serve: refused before any request, unless --longctx-compare-partial accepts it
    "compare-plan-record": (lambda p: ["--longctx-compare", p.write("plan.json", p.baseline(plan={"requests": 4}))],
                            "plan.json is a plan record (--longctx-plan: nothing was answered); pass the "
                            "longctx.json of a completed run"),
    "compare-stopped": (lambda p: ["--longctx-compare", p.write("stopped.json", p.baseline(
        stopped="interrupted by SIGINT"))], "stopped.json is the record of a stopped run (interrupted by SIGINT; "
        "4 scored trials); compare with a completed run's longctx.json (re-run the baseline to the end), or pass "
        "--longctx-compare-partial to compare with what it has"),
    "compare-another-seed": (lambda p: ["--longctx-compare", p.write("seed7.json", p.baseline(
        settings={**p.baseline()["settings"], "seed": 7}))], "seed7.json ran with --longctx-seed 7, this run with 0"),
    "compare-another-protocol": (lambda p: ["--longctx-compare", p.write("source.json", p.baseline(
        settings={**p.baseline()["settings"], "protocol": "source"}))],
        "source.json ran with --longctx-protocol source, this run with longctx"),
    "compare-lacks-a-cell": (lambda p: ["--longctx-compare", p.write("half.json", p.baseline(
        cells=p.baseline()["cells"][:1], trials=[t for t in p.baseline()["trials"] if t["params"] == {"filler": 2}]))],
        "half.json has no scored trial in 1 of this run's 2 cells (e.g. demo filler=8)"),
    "compare-cell-without-its-trials": (lambda p: ["--longctx-compare", p.write("half.json", p.baseline(
        cells=p.baseline()["cells"][:1]))], "half.json: 2 trials of demo{\"filler\":8} are in no cell of 'cells': "
        "the counts disagree with the trials"),
    "compare-trials-twice": (lambda p: ["--longctx-compare", p.write("twice.json", p.baseline(
        trials=p.baseline()["trials"] * 2))], "twice.json: trials[4] repeats trials[0]"),
    "compare-counts-off": (lambda p: ["--longctx-compare", p.write("off.json", p.baseline(
        cells=[{**p.baseline()["cells"][0], "n": 1}, *p.baseline()["cells"][1:]]))],
        "off.json: cells[0] (demo) says n=1 but its trials give 2: the counts disagree with the trials"),
    "sequential-stop-without-sequential": (lambda p: ["--longctx-sequential-stop", "run"],
                                           "--longctx-sequential-stop: only works with --longctx-sequential true"),
    "compare-partial-without-compare": (lambda p: ["--longctx-compare-partial"],
                                        "--longctx-compare-partial: only works with --longctx-compare PATH"),
    "compare-trials-5": (lambda p: ["--longctx-compare", p.write("t5.json", p.baseline(trials=5))],
                         "t5.json: 'trials' is 5, not a list"),
    "compare-no-cells": (lambda p: ["--longctx-compare", p.write("nocells.json", p.baseline(cells=None))],
                         "nocells.json: 'cells' is null, not a list"),
    "compare-cell-key-only": (lambda p: ["--longctx-compare", p.write("cx.json", p.baseline(cells=[{"key": "x"}]))],
                              "cx.json: cells[0] has no 'experiment'"),
    "compare-cell-without-accuracy": (
        lambda p: ["--longctx-compare", p.write("noacc.json", p.baseline(
            cells=[{k: v for k, v in c.items() if k != "accuracy"} for c in p.baseline()["cells"]]))],
        "noacc.json: cells[0] has no 'accuracy'"),
    "compare-accuracy-text": (
        lambda p: ["--longctx-compare", p.write("acc.json", p.baseline(
            cells=[{**c, "accuracy": "high"} for c in p.baseline()["cells"]]))],
        'acc.json: cells[0].accuracy is "high", not a number between 0 and 1'),
    "compare-trial-outcome": (
        lambda p: ["--longctx-compare", p.write("outcome.json", p.baseline(
            trials=[{**t, "outcome": "maybe"} for t in p.baseline()["trials"]]))],
        'outcome.json: trials[0].outcome is "maybe", not one of correct, incorrect, error'),
    "compare-a-folder": (lambda p: ["--longctx-compare", str(p.path)],
                         "is a folder; pass an earlier run's longctx.json"),
    "compare-missing": (lambda p: ["--longctx-compare", "nowhere/longctx.json"],
                        "--longctx-compare: nowhere/longctx.json not found"),
    "report-dir-is-a-file": (lambda p: ["--longctx-report-dir", p.write("afile", "x")],
                             "is a file, not a folder; pass a writable folder"),
    "report-dir-under-a-file": (lambda p: ["--longctx-report-dir", p.write("afile2", "x") + "/reports"],
                                "cannot be created: "),
}


@pytest.mark.parametrize("row", list(USAGE_ROWS), ids=list(USAGE_ROWS))
def test_usage_error_rows(project: Project, row: str) -> None:
    build, needle = USAGE_ROWS[row]
    line = project.assert_refused(_bad_run(project, *build(project)), needle)
    assert line.startswith("ERROR: --longctx-"), line
    print(f"ROW | {row} | exit 4 | {line}")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders; the file cases cover this")
def test_read_only_report_dir_is_a_usage_error(project: Project) -> None:
    locked = project.path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        run = _bad_run(project, "--longctx-report-dir", str(locked))
    finally:
        locked.chmod(0o700)
    project.assert_refused(run, "is not writable")


@pytest.mark.e2e
def test_bad_compare_file_under_xdist_is_a_usage_error_before_workers_start(project: Project) -> None:
    run = _bad_run(project, "-n", "2", "--longctx-compare", project.write("hello.json", {"hello": 1}))
    print("ROW | compare-hello -n 2 | exit 4 |",
          project.assert_refused(run, "hello.json: not a pytest-longctx run record"))
    assert "bringing up nodes" not in output(run)


# --- gate errors: the run completes, its record says why the gate could not check, exit 11 -----------------------

def _gate_error_run(project: Project, *args: str, model: str = "fake/wrong") -> tuple[Any, str]:
    run = _bad_run(project, *args, model=model)
    out = output(run)
    assert run.ret == 11, out
    assert one_line(out, "gate: ERROR").endswith("-> exit code 11")
    gate = run.record["gate"]
    assert gate["status"] == "error" and gate["exit_code"] == 11 and gate["errors"], gate
    reports = project.path / "reports"
    assert (reports / "history" / "0001.json").read_bytes() == project.record  # the earlier record, intact
    for name, data in project.cache.items():  # nothing cached before was lost or changed
        assert (project.path / "cache" / name).read_bytes() == data
    return run, out


@pytest.mark.e2e
def test_selector_without_cell_under_xdist_is_a_gate_error(project: Project) -> None:
    run, out = _gate_error_run(project, "-n", "2", "--longctx-threshold", "experiment=dmeo:0.9")
    line = one_line(out, "gate error:")
    assert "threshold 'experiment=dmeo:0.9' matches no cell of this run" in line and "experiments: demo" in line
    assert run.record["gate"]["errors"] == [line.removeprefix("gate error: ")]
    print("ROW | selector-matches-no-cell -n 2 | exit 11 |", line)


def test_baseline_of_another_experiment_set_accepted_as_partial_is_a_gate_error(project: Project) -> None:
    project.runner.pytester.makepyfile(test_demo=OTHER)
    other = project.runner.run("--longctx-samples", "2", model="fake/perfect", report_dir="other-run")
    assert other.ret == 0
    project.runner.pytester.makepyfile(test_demo=DEMO)
    _, out = _gate_error_run(project, "--longctx-compare", str(other.report_dir / "longctx.json"),
                             "--longctx-threshold", "*:max-drop=0.05", "--longctx-compare-partial")
    lines = [line for line in out.splitlines() if line.startswith("gate error:")]
    assert lines == ["gate error: threshold '*:max-drop=0.05': no trial of its 2 cells paired with the compared run "
                     "(4 its cell is not in the other run): the same seed, protocol and items are needed",
                     f"gate error: the compared run {other.report_dir / 'longctx.json'} shares no cell with this run "
                     "(it has 2 cells, this run 2)"], out
    print("ROW | compare with another experiment set + max-drop | exit 11 |", lines[0])


def test_compare_sharing_no_cell_accepted_as_partial_is_a_gate_error(project: Project) -> None:
    project.runner.pytester.makepyfile(test_demo=OTHER)
    other = project.runner.run("--longctx-samples", "2", model="fake/perfect", report_dir="other-run")
    project.runner.pytester.makepyfile(test_demo=DEMO)
    run, out = _gate_error_run(project, "--longctx-compare", str(other.report_dir / "longctx.json"),
                               "--longctx-compare-partial", model="fake/perfect")
    line = one_line(out, "gate error:")
    assert "shares no cell with this run" in line
    assert run.record["comparison"]["cells_compared"] == 0
    print("ROW | compare with another experiment set, no threshold | exit 11 |", line)


def test_baseline_whose_cells_all_errored_accepted_as_partial_is_a_gate_error(project: Project) -> None:
    errored = project.runner.run("--longctx-samples", "2", model="fake/error", report_dir="errored-run")
    assert errored.ret == 1 and all(c["n"] == 0 for c in errored.record["cells"])
    run, out = _gate_error_run(project, "--longctx-compare", str(errored.report_dir / "longctx.json"),
                               "--longctx-threshold", "*:max-drop=0.05", "--longctx-compare-partial")
    line = one_line(out, "gate error:")
    assert "no trial of its 2 cells paired with the compared run (4 errored in the compared run)" in line
    assert run.record["gate"]["counts"]["error"] == 1 and run.record["gate"]["counts"]["pass"] == 0
    assert all("compare" not in c for c in run.record["cells"])  # no diff against a made-up accuracy of 0.0
    print("ROW | baseline cells all errored + max-drop | exit 11 |", line)


def test_another_seed_accepted_as_partial_without_paired_trials_is_a_gate_error(project: Project) -> None:
    """Another seed asks other pass keys: nothing pairs, so a drop's significance cannot be tested."""
    base = project.runner.run("--longctx-samples", "2", "--longctx-seed", "7", model="fake/perfect",
                              report_dir="seed7")
    run, out = _gate_error_run(project, "--longctx-compare", str(base.report_dir / "longctx.json"),
                               "--longctx-threshold", "*:max-drop=0.05/sig", "--longctx-compare-partial")
    line = one_line(out, "gate error:")
    assert "no trial of its 2 cells paired with the compared run (4 the other run asked another item" in line
    assert all(c["compare"]["paired"] == 0 for c in run.record["cells"])
    print("ROW | max-drop/sig against another seed (nothing pairs) | exit 11 |", line)


def test_threshold_that_checked_no_cell_is_a_gate_error(project: Project) -> None:
    run, out = _gate_error_run(project, "--longctx-threshold", "*:0.5@n=30", model="fake/perfect")
    line = one_line(out, "gate error:")
    assert "threshold '*:0.5@n=30': 4 trials (independent items) < 30: nothing to decide on" in line
    page = html.unescape((run.report_dir / "longctx.html").read_text(encoding="utf-8"))
    assert '<div class="gate error">' in page and f'<div class="banner fail">{line}</div>' in page
    print("ROW | @n=30 with 2 samples | exit 11 |", line)


def test_a_missed_threshold_still_fails_with_10(project: Project) -> None:
    run = _bad_run(project, "--longctx-threshold", "experiment=demo:0.9")
    out = run.result.stdout.str()
    assert run.ret == 10 and one_line(out, "gate: FAIL") == "gate: FAIL (1 fail) -> exit code 10"
    assert run.record["gate"]["errors"] == []


# --- nothing computed is lost: pytest_sessionfinish never raises ---------------------------------------------------

def test_report_dir_replaced_by_a_file_during_the_run_goes_to_a_fallback_folder(project: Project) -> None:
    """The report dir was fine at start-up and is a file by the end: the record goes to a fallback folder."""
    project.runner.pytester.makepyfile(test_zz_clobber='''
import shutil
from pathlib import Path


def test_clobber(pytestconfig):
    target = Path(pytestconfig.getoption("longctx_report_dir"))
    shutil.rmtree(target, ignore_errors=True)
    target.write_text("not a folder any more")
''')
    run = _bad_run(project, "--longctx-report-dir", str(project.path / "doomed"), model="fake/perfect")
    out = output(run)
    assert run.ret == 0, out
    line = one_line(out, "could not write reports to")
    fallback = Path(line.rsplit("wrote them to ", 1)[1].removesuffix(" instead"))
    assert fallback.parent == project.path / "cache" / "reports-fallback"
    record = json.loads((fallback / "longctx.json").read_text(encoding="utf-8"))
    assert len(record["trials"]) == 4 and record["report_fallback"]["report_dir"] == str(project.path / "doomed")
    assert (fallback / "longctx.html").is_file()
    print("ROW | report dir turned into a file mid-run | exit 0 |", line)


def test_a_failing_comparison_is_a_gate_error_and_the_record_is_written(project: Project,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_longctx.results.decide

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("accuracy")

    monkeypatch.setattr(pytest_longctx.results.decide, "compare", broken)  # a bug in comparison code, simulated
    run, out = _gate_error_run(project, "--longctx-compare", str(project.path / "reports" / "longctx.json"))
    line = one_line(out, "gate error:")
    assert "comparison with" in line and "KeyError: 'accuracy'" in line
    assert len(run.record["trials"]) == 4


def test_a_failing_html_report_costs_only_the_html(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_longctx.reporting.html

    def broken(record: Any, sections: Any = None) -> str:
        raise ValueError("bad chart")

    monkeypatch.setattr(pytest_longctx.reporting.html, "render_html", broken)
    run = _bad_run(project, model="fake/perfect")
    out = run.result.stdout.str()
    assert run.ret == 0
    one_line(out, "could not render the HTML report: ValueError: bad chart")
    assert len(run.record["trials"]) == 4 and not (run.report_dir / "longctx.html").exists()


def test_a_bug_while_finishing_saves_the_trials_and_exits_3(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_longctx.session.run

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug in build_record")

    monkeypatch.setattr(pytest_longctx.session.run, "build_record", broken)
    run = _bad_run(project, model="fake/perfect")
    out = output(run)
    assert run.ret == pytest.ExitCode.INTERNAL_ERROR
    line = one_line(out, "internal error while finishing the run")
    saved = Path(line.rsplit("trials saved to ", 1)[1])
    assert len(json.loads(saved.read_text(encoding="utf-8"))["trials"]) == 4
    assert saved.parent.parent == project.path / "cache" / "reports-fallback"
    reports = project.path / "reports"
    assert (reports / "longctx.json").read_bytes() == project.record and not (reports / "history").exists()
    for name, data in project.cache.items():
        assert (project.path / "cache" / name).read_bytes() == data


@pytest.mark.e2e
def test_selector_without_cell_under_xdist_with_a_remote_model_is_a_usage_error_before_any_request(
        longctx_runner: Any, api: Any) -> None:
    """With a remote model the controller plans the run in a child that collects: it finds the bad selector."""
    from tests.passkey_api import EVAL, MODEL

    srv = api()
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    run = longctx_runner.run("-n", "2", "--longctx-samples", "2", "--longctx-threshold", "experiment=dmeo:0.9",
                             model=MODEL, cache=True)
    out = output(run)
    assert run.ret == pytest.ExitCode.USAGE_ERROR, out
    line = one_line(out, "'experiment=dmeo:0.9' matches none of the collected cells")
    assert line.startswith("ERROR: --longctx-threshold: ")
    assert srv.stats.endpoints == {}  # nothing sent, nothing counted
    assert not (run.report_dir / "longctx.json").exists()
    print("ROW | selector-matches-no-cell -n 2, anthropic model (planned in a child) | exit 4 |", line)
