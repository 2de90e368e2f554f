"""The experiment hooks (``pytest_longctx.hookspecs``) end to end: a user's experiment in a test file and a
``conftest.py``, nothing else wired, reaches the record's tables and settings, the HTML report's sections and
figures, and the terminal summary, in every execution mode; a hook that raises costs a note, not the run."""

from __future__ import annotations

import pytest

from tests.conftest import LongctxRunner

EVAL = '''
import pytest

pytestmark = pytest.mark.longctx("passkey")


@pytest.mark.parametrize("filler", [10, 40])
async def test_passkey(longctx, filler):
    key = longctx.rng.randrange(10_000, 99_999)
    longctx.expect(key, wrong=[key + 1])
    answer = await longctx.ask(f"{'The grass is green. ' * filler} The pass key is {key}. What is the pass key?")
    longctx.record(answer=answer)
    assert str(key) in answer
'''

CONFTEST = '''
from pytest_longctx import Section, accuracy_lines, cell_bars


def pytest_longctx_report_sections(cells, trials):
    mine = [c for c in cells if c["experiment"] == "passkey"]
    return [Section("passkey", "Pass key retrieval", ("passkey",),
                    figures=[accuracy_lines(mine, "filler", (), "Accuracy vs filler sentences"),
                             cell_bars(mine, "Passkey accuracy per filler size")], order=1)] if mine else []


def pytest_longctx_tables(cells, trials):
    rows = [[str(c["params"]["filler"]), {"correct": c["correct"], "n": c["n"]}]
            for c in cells if c["experiment"] == "passkey"]
    return [{"experiment": "passkey", "title": "Passkey by filler", "columns": ["filler", "accuracy"],
             "rows": rows}] if rows else []


def pytest_longctx_summary_lines(record):
    return [f"passkey: {len(record['trials'])} trials seen by the summary hook"]


def pytest_longctx_record_settings(config):
    return {"passkey_filler_unit": "sentence"}


def pytest_longctx_run_finished(config, record):
    record["settings"]["passkey_finished"] = True
    return ["passkey: run_finished saw the gated record"]
'''

BROKEN = '''
def pytest_longctx_tables(cells, trials):
    raise RuntimeError("table builder exploded")


def pytest_longctx_report_sections(cells, trials):
    raise RuntimeError("figure builder exploded")
'''


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["plain", "n2"])
def test_a_user_experiment_reaches_every_report_through_the_hooks(longctx_runner: LongctxRunner,
                                                                  xdist: tuple[str, ...]) -> None:
    longctx_runner.pytester.makepyfile(test_passkey=EVAL, conftest=CONFTEST)
    run = longctx_runner.run("--longctx-samples", "3", *xdist)
    assert run.ret == 0, run.result.stdout.str()
    record = run.record
    assert record["settings"]["passkey_filler_unit"] == "sentence" and record["settings"]["passkey_finished"]
    assert record["tables"] == [{"experiment": "passkey", "title": "Passkey by filler",
                                 "columns": ["filler", "accuracy"],
                                 "rows": [["10", {"correct": 3, "n": 3}], ["40", {"correct": 3, "n": 3}]]}]
    html = (run.report_dir / "longctx.html").read_text(encoding="utf-8")
    assert '<section id="exp-passkey"><h2>Pass key retrieval</h2>' in html
    assert "Accuracy vs filler sentences" in html and "Passkey accuracy per filler size" in html
    assert "Passkey by filler" in html and "<svg" in html
    out = run.result.stdout.str()
    assert "longctx passkey: 6 trials seen by the summary hook" in out
    assert "passkey: run_finished saw the gated record" in out
    assert "Passkey by filler" in out  # the table in the terminal summary


def test_an_experiment_without_hooks_gets_a_plain_section(longctx_runner: LongctxRunner) -> None:
    longctx_runner.pytester.makepyfile(test_passkey=EVAL)
    run = longctx_runner.run("--longctx-samples", "2")
    assert run.ret == 0
    html = (run.report_dir / "longctx.html").read_text(encoding="utf-8")
    assert '<section id="exp-passkey"><h2>passkey</h2>' in html and "Accuracy per condition" in html
    assert run.record["tables"] == []


def test_a_failing_hook_costs_a_note_not_the_reports(longctx_runner: LongctxRunner) -> None:
    longctx_runner.pytester.makepyfile(test_passkey=EVAL, conftest=BROKEN)
    run = longctx_runner.run("--longctx-samples", "2")
    assert run.ret == 0, run.result.stdout.str()
    notes = run.record["notes"]
    assert any("pytest_longctx_tables of" in n and "RuntimeError: table builder exploded" in n for n in notes), notes
    assert any("pytest_longctx_report_sections of" in n and "figure builder exploded" in n for n in notes), notes
    html = (run.report_dir / "longctx.html").read_text(encoding="utf-8")
    assert '<section id="exp-passkey">' in html and "Accuracy per condition" in html  # the plain section instead
    assert run.record["cells"] and len(run.record["trials"]) == 4



def test_the_core_turned_off_leaves_the_experiment_plugins_quiet(pytester: pytest.Pytester) -> None:
    """``-p no:longctx``: the experiment plugins still load (entry points) but neither crash nor report."""
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:longctx", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*1 passed*"])
    out = result.stdout.str()
    assert "longctx report" not in out and "INTERNALERROR" not in out + result.stderr.str()
