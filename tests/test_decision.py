"""The one decision (``results/decision.py``; issue #38 items 1 and 10): its exit codes, its sequential verdicts,
several models' combined gate, and ``longctx-gate`` outside the pytest layer.

* the exit-code table a run and ``longctx-gate`` share: a refused record 4, a stop 2, errored trials 1, then the
  gate's 10 and 11; pytest's own status first, never ORed;
* a sequential run's recorded verdicts decide its alarms (the fixed reading kept beside), from the run and from a
  record; ``longctx-gate`` on a real sequential run's record (LRT against the local server) keeps the run's verdict
  and says so, refuses other thresholds on a run that stopped early and another alpha;
* ``longctx-gate`` imports nothing of ``pytest_longctx.session``, ``pytest_longctx.plugin`` or pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.gate_command import main
from pytest_longctx.results.decision import GateResult, combine, record_exit_code, with_sequential
from pytest_longctx.server.graded import Graded
from tests.lrt_runs import run_lrt

FAIL = {"threshold": "*:max-drop=0", "verdict": "fail", "words": "fixed: shown larger"}
PASS = {"threshold": "*:max-drop=0", "verdict": "pass", "words": "fixed: not shown", "p_adjusted": 0.2}


@pytest.mark.parametrize(("result", "code"), [
    (GateResult(), 0),
    (GateResult(thresholds=("t",), checks=(PASS,)), 0),
    (GateResult(thresholds=("t",), checks=(FAIL,)), 10),
    (GateResult(thresholds=("t",), checks=(FAIL,), errors=("could not check",)), 11),
    (GateResult(thresholds=("t",), checks=(FAIL,), errored=3), 1),
    (GateResult(thresholds=("t",), checks=(PASS,), errored=3, stopped="SIGINT"), 2),
    (GateResult(thresholds=("t",), checks=(PASS,), errored=3, refused="twice"), 4),
])
def test_the_exit_code_is_computed_once(result: GateResult, code: int) -> None:
    assert result.exit_code == code
    assert result.to_json()["run_exit_code"] == code
    assert GateResult.from_json(result.to_json(), stopped=result.stopped).exit_code == code
    assert result.run_exit(3) == 3  # pytest's own status (here INTERNALERROR) comes first, never ORed
    assert result.run_exit(0) == (code if code != 2 else 1)  # a stop pytest did not report ended the run normally


def test_an_older_record_counts_its_own_errored_trials() -> None:
    gate = {"status": "pass", "checks": [PASS], "thresholds": ["t"], "exit_code": 0}  # no errored_trials: older
    trials = [{"outcome": "correct"}, {"outcome": "error"}]
    assert record_exit_code({"gate": gate, "trials": trials}) == 1
    assert record_exit_code({"gate": gate, "trials": trials[:1]}) == 0


SECTION = {"alarms": [{"threshold": "*:max-drop=0", "settled": "fired", "settled_by": "e-process",
                       "settled_at_item": 45, "verdict": "fail", "words": "e-value 90 >= 1/0.0125: shown larger"}]}


@pytest.mark.parametrize("source", ["run", "record"])
def test_recorded_sequential_verdicts_decide_the_alarms(source: str) -> None:
    fixed = GateResult(thresholds=("*:max-drop=0", "*:min=0.5"),
                       checks=(PASS, {"threshold": "*:min=0.5", "verdict": "pass", "words": "ok"}))
    decided = with_sequential(fixed, SECTION, source=source)
    alarm, other = decided.checks
    assert (decided.status, decided.exit_code, decided.counts["fail"]) == ("fail", 10, 1)
    assert alarm["fixed"] == {"verdict": "pass", "words": "fixed: not shown", "p_adjusted": 0.2}
    assert alarm["sequential"]["settled"] == "fired" and "words" not in alarm["sequential"]
    assert alarm["words"].endswith("shown larger") and other == fixed.checks[1]
    assert alarm["words"].startswith("the run's sequential verdict, from its record") == (source == "record")
    assert decided.to_json()["sequential_verdicts"] == source


def test_several_models_combine_into_the_worst() -> None:
    results = {"a": GateResult(thresholds=("t",), checks=(PASS,)),
               "b": GateResult(thresholds=("t",), checks=(FAIL,), errored=2)}
    gate = combine(results, ["t"], 0.05)
    assert (gate.status, gate.exit_code, gate.errored, gate.counts["fail"]) == ("fail", 1, 2, 1)
    assert [c["words"] for c in gate.checks] == ["a: fixed: not shown", "b: fixed: shown larger"]
    assert gate.to_json()["models"] == {"a": {"status": "pass", "exit_code": 0}, "b": {"status": "fail",
                                                                                         "exit_code": 10}}
    assert combine({"a": GateResult()}, ["t"], 0.05).status == "none"


def test_longctx_gate_imports_nothing_of_the_pytest_layer(tmp_path: Path) -> None:
    from tests.test_decision_properties import Pair, record

    pair = Pair({("qa", 1, 0): ("correct", "incorrect"), ("qa", 1, 1): ("correct", "correct")})
    for side, name in enumerate(("base.json", "cand.json")):
        (tmp_path / name).write_text(json.dumps(record(pair, side)), encoding="utf-8")
    script = (
        "import sys\nfrom pytest_longctx.gate_command import main\n"
        f"code = main([{str(tmp_path / 'cand.json')!r}, '--compare', {str(tmp_path / 'base.json')!r}, "
        f"'--threshold', '*:max-drop=0', '--report-dir', {str(tmp_path / 'out')!r}])\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('pytest_longctx.session', 'pytest_longctx.plugin', "
        "'_pytest', 'pytest_longctx.dispatch')) or m == 'pytest')\n"
        "print(code, bad)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout
    assert (tmp_path / "out" / "longctx.html").is_file()


ALARM = "experiment=lrt:max-drop=0"


@pytest.mark.e2e
def test_longctx_gate_keeps_a_sequential_runs_verdicts(pytester: pytest.Pytester, api: Any,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    api(Graded("claude-prod=0.85,claude-bad=0.55,flip=0.02,seed=1"))
    one = ("-p", "no:xdist")
    code, _, _ = run_lrt(pytester, "claude-prod", "prod", "--longctx-cache", "off", dist=one)
    assert code == 0
    baseline = str(pytester.path / "prod" / "longctx.json")
    code, bad, _ = run_lrt(pytester, "claude-bad", "bad", "--longctx-compare", baseline, "--longctx-threshold", ALARM,
                           "--longctx-sequential", dist=one)
    check = bad["gate"]["checks"][0]
    assert code == 10 and bad["sequential"]["stopped"] and check["sequential"]["settled"] == "fired"
    assert bad["gate"]["sequential_verdicts"] == "run"
    candidate = str(pytester.path / "bad" / "longctx.json")

    capsys.readouterr()
    assert main([candidate, "--compare", baseline, "--report-dir", str(pytester.path / "again")]) == 10
    out = capsys.readouterr().out
    assert "is a sequential run's record: its alarms keep the verdicts" in out
    again = json.loads((pytester.path / "again" / "longctx.json").read_text(encoding="utf-8"))
    decided = again["gate"]["checks"][0]
    assert decided["verdict"] == "fail" and decided["sequential"] == check["sequential"]
    assert decided["words"] == f"the run's sequential verdict, from its record: {check['words']}"
    assert 'id="decision"' in (pytester.path / "again" / "longctx.html").read_text(encoding="utf-8")

    for argv, needle in [(["--threshold", "experiment=lrt:max-drop=0.1"], "is not one of the sequential run's "
                                                                          "alarms"),
                         (["--alpha", "0.01"], "its alarms were settled at alpha 0.05")]:
        assert main([candidate, "--compare", baseline, *argv]) == 4
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err


def _shape(name: str) -> Any:
    from tests.test_decision_properties import Pair

    items = range(6)
    shapes = {
        "a compared run at 0%": {("qa", 1, i): ("incorrect", "correct") for i in items},
        "both runs at 100%": {("qa", s, i): ("correct", "correct") for s in (1, 2) for i in items},
        "an empty cell (every trial errored)": {**{("qa", 1, i): ("correct", "correct") for i in items},
                                                **{("qa", 2, i): ("correct", "error") for i in items}},
        "one item": {("qa", 1, 0): ("correct", "incorrect")},
    }
    return Pair(shapes[name])


@pytest.mark.parametrize("shape", ["a compared run at 0%", "both runs at 100%", "an empty cell (every trial errored)",
                                   "one item"])
def test_every_shape_of_record_gives_a_decision_table(shape: str) -> None:
    from pytest_longctx.gate_spec import parse_threshold
    from pytest_longctx.reporting.decision import terminal_lines
    from pytest_longctx.reporting.decision_table import decision_html
    from tests.test_decision_properties import DECLARED, gate_settings, record

    pair = _shape(shape)
    candidate, notes = record(pair, 1), []
    ts = ("*:max-drop=0", "*:min=0.5/shown", "*:max-drop=0/each")
    from pytest_longctx.results.decide import decide

    result = decide(candidate, gate_settings(tuple(parse_threshold(t) for t in ts)), DECLARED, record(pair, 0), notes)
    assert not [n for n in notes if "could not" in n], notes
    lines = [text for _, text in terminal_lines(candidate)]
    assert f"exit code {result.exit_code}" in lines[0] and result.exit_code == (1 if result.errored else
                                                                               result.gate_exit_code)
    assert any(line.startswith("  ") and "*:max-drop=0:" in line for line in lines), lines
    html = decision_html(candidate)
    assert html.startswith('<section id="decision"') and "*:max-drop=0" in html


def test_a_summary_that_fails_costs_a_note_not_the_decision_table(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_longctx.results.overview
    from pytest_longctx.gate_spec import parse_threshold
    from pytest_longctx.reporting.decision import terminal_lines
    from pytest_longctx.reporting.decision_table import decision_html
    from pytest_longctx.results.decide import decide
    from tests.test_decision_properties import DECLARED, gate_settings, record

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(pytest_longctx.results.overview, "overview", broken)
    pair = _shape("a compared run at 0%")
    candidate, notes = record(pair, 1), []
    decide(candidate, gate_settings((parse_threshold("experiment=qa:max-drop=0"),)), DECLARED, record(pair, 0), notes)
    assert notes == ["could not compute the per-experiment summary: ZeroDivisionError: float division by zero"]
    assert "experiments" not in candidate
    lines = [text for _, text in terminal_lines(candidate)]
    assert lines[1] == "qa" and lines[2].startswith("  PASS  experiment=qa:max-drop=0: drop -1.000"), lines
    html = decision_html(candidate)
    assert '<th scope="row">qa</th>' in html and "experiment=qa:max-drop=0" in html


@pytest.mark.parametrize("samples_all", [False, True])
def test_longctx_gate_reads_from_a_record_what_the_run_handed_its_gate(tmp_path: Path, samples_all: bool) -> None:
    """A run decides on ``Settings.gate``; ``longctx-gate`` rebuilds the same ``GateSettings`` from its record's
    settings (and its own --compare / --compare-partial), field for field."""
    from dataclasses import replace

    from pytest_longctx.gate_command import _parser, _settings
    from tests.report_data import settings_for

    baseline = tmp_path / "baseline.json"
    ran = replace(settings_for("fake/random", tmp_path, ("*:0.8", "experiment=qa:max-drop=0.05/shown@n=3"), baseline,
                               samples=7, seed=11),
                  alpha=0.1, effective_accuracy=0.7, protocol="source", samples_all=samples_all, compare_partial=True)
    args = _parser().parse_args(["longctx.json", "--compare", str(baseline), "--compare-partial"])
    assert _settings({"settings": ran.to_json()}, args) == ran.gate
    assert _settings({"settings": replace(ran, seed=12).to_json()}, args) != ran.gate
