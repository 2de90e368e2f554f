"""``longctx-gate``: decide from two run records as the run did (issue #29 item 8).

Two pytester runs make real records (a baseline and a compared candidate that misses a threshold); the command on
them prints the run's decision block and gate lines word for word and exits with the run's code; other thresholds
re-decide; bad input is one line and exit 4. Once through the installed console script.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.gate_command import main
from tests.conftest import golden_runner

CONFTEST = '''
from pytest_longctx import Evidence, LengthAxis


def pytest_longctx_evidence():
    return [Evidence("yes", "item", "question", "one question at every length",
                     LengthAxis("context_tokens", tokens="measured"))]
'''

YES = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("yes")
@pytest.mark.parametrize("context_tokens", [1000, 4000])
async def test_yes(longctx, context_tokens):
    answer = await longctx.ask(Request.user("Say yes.", max_tokens=4), oracle=Oracle("yes", ("no",)))
    longctx.record(expected="yes", answer=answer, item=f"q{longctx.sample}", measured=context_tokens - 10)
    assert answer == "yes"
'''

THRESHOLDS = ("--threshold", "*:max-drop=0", "--threshold", "*:min=0.5",
              "--threshold", "experiment=yes:min-effective-length=1000")


def _block(stdout: str) -> list[str]:
    """The run's decision block and gate lines: after the ``longctx:`` rule, without the cell table and usage."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("=") and " longctx: " in line) + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("experiment  params"))
    return lines[start:end] + [line for line in lines if line.startswith(("gate: ", "gate error: "))]


@pytest.fixture(scope="module")
def golden_records(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any]:
    """The module's golden runs, read by every test: a baseline, and a compared candidate that misses a threshold."""
    with golden_runner(request, tmp_path_factory, {}) as runner:
        runner.pytester.makeconftest(CONFTEST)
        runner.pytester.makepyfile(test_yes=YES)
        base = runner.run("--longctx-samples", "12", report_dir="base")
        assert base.ret == 0, base.result.stdout.str()
        baseline = base.report_dir / "longctx.json"
        run = runner.run("--longctx-samples", "12", "--longctx-compare", str(baseline),
                         *[a.replace("--threshold", "--longctx-threshold") for a in THRESHOLDS],
                         model="fake/wrong", report_dir="candidate")
    return run.report_dir / "longctx.json", baseline, run


@pytest.fixture
def records(golden_records: tuple[Path, Path, Any], tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Any]:
    """The golden records (candidate, baseline, the candidate's run), read from this test's own working folder."""
    monkeypatch.chdir(tmp_path)
    return golden_records


def test_longctx_gate_reproduces_the_runs_verdict_and_exit_code(records: tuple[Path, Path, Any],
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    candidate, baseline, run = records
    assert run.ret == 10, run.result.stdout.str()
    expected = _block(run.result.stdout.str())
    assert any(line.startswith("  FAIL  *:max-drop=0: ") for line in expected), expected
    assert any("effective length vs compared run: " in line for line in expected), expected
    code = main([str(candidate), "--compare", str(baseline), *THRESHOLDS, "--report-dir", str(tmp_path / "again")])
    out = capsys.readouterr().out.splitlines()
    assert code == run.ret == 10
    assert out[:len(expected)] == expected
    again = json.loads((tmp_path / "again" / "longctx.json").read_text(encoding="utf-8"))
    assert again["gate"] == run.record["gate"] and (tmp_path / "again" / "longctx.html").is_file()
    assert again["decided_by"]["command"] == "longctx-gate"

    # other thresholds re-decide the same run: a looser one passes, one beyond the tested lengths cannot decide
    assert main([str(candidate), "--compare", str(baseline), "--threshold", "*:max-drop=1/point"]) == 0
    assert "gate: PASS (1 pass)" in capsys.readouterr().out
    assert main([str(baseline), "--threshold", "experiment=yes:min-effective-length=9000"]) == 11
    assert "9,000 tokens is beyond the longest tested length" in capsys.readouterr().out
    # with no --threshold: the thresholds the candidate ran with (its verdict, re-checked)
    assert main([str(candidate), "--compare", str(baseline)]) == 10


@pytest.mark.parametrize(("args", "needle"), [
    (["nowhere.json"], "longctx-gate: nowhere.json: cannot read run record"),
    (["{candidate}", "--threshold", "*:maxdrop=0"], "--threshold: unknown check 'maxdrop'"),
    (["{candidate}", "--threshold", "*:max-drop=0"], "--threshold: '*:max-drop=0' is relative to an earlier run; "
                                                     "pass --compare BASELINE.json"),
    (["{candidate}", "--threshold", "experiment=no:0.5"], "matches none of the record's cells"),
    (["{candidate}", "--compare", "{conftest}"], "--compare: {conftest}: not JSON"),
    (["{candidate}", "--alpha", "2"], "--alpha: 2.0 must be above 0 and below 0.5"),
    (["{candidate}", "--bogus"], "longctx-gate: unrecognized arguments: --bogus"),
    (["{stopped}"], "is the record of a stopped run (interrupted by SIGINT; 24 scored trials): its run decided "
                    "nothing"),
    (["{candidate}", "--compare", "{stopped}"], "or pass --compare-partial to compare with what it has"),
])
def test_bad_input_is_one_line_and_exit_4(records: tuple[Path, Path, Any], capsys: pytest.CaptureFixture[str],
                                          args: list[str], needle: str, tmp_path: Path) -> None:
    candidate, baseline, _ = records
    stopped = tmp_path / "stopped.json"
    stopped.write_text(json.dumps({**json.loads(baseline.read_text()), "stopped": "interrupted by SIGINT"}))
    names = {"candidate": str(candidate), "stopped": str(stopped),
             "conftest": str(candidate.parent.parent / "conftest.py")}
    argv = [a.format(**names) for a in args]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 4 and len(err.strip().splitlines()) == 1, err
    assert needle.format(**names) in err


def test_the_console_script_is_installed(records: tuple[Path, Path, Any]) -> None:
    candidate, baseline, run = records
    script = shutil.which("longctx-gate", path=str(Path(sys.executable).parent))
    assert script is not None, "longctx-gate is not installed beside this Python (re-run setup.sh)"
    done = subprocess.run([script, str(candidate), "--compare", str(baseline), *THRESHOLDS], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 10 and done.stdout.splitlines()[:len(_block(run.result.stdout.str()))] == _block(
        run.result.stdout.str()), done.stdout + done.stderr
