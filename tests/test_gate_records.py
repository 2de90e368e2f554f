"""Records that cannot lie and a decision that cannot crash, end to end (issue #38 items 1, 2 and 8).

Real runs of a pass-key eval through the ``anthropic`` SDK against the local Messages-API server, then
``longctx-gate`` on their records:

* a candidate whose every trial of some items is an API error exits 1 as a run and through ``longctx-gate`` (the
  gate alone passes: the errors must not vanish from the pairing);
* a record listing its trials twice, one whose counts disagree with its trials, and a compared run whose cluster
  labels group the items differently are refused in one line, exit 4, by the run and by ``longctx-gate``;
* a compared run that scored 0% gives a decision table in the terminal and the HTML report (it crashed the summary).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.gate_command import main
from pytest_longctx.server.responders import last_user_text
from tests.passkey_api import MODEL

CONFTEST = '''
from pytest_longctx import Evidence


def pytest_longctx_evidence():
    return [Evidence("keys", "item", "question", "one question asked at every filler length")]
'''

EVAL = '''
import pytest

from pytest_longctx import Request

FILLER = "The grass is green. The sky is blue. "


@pytest.mark.longctx("keys")
@pytest.mark.parametrize("filler", [4, 16])
async def test_key(longctx, filler):
    key = 10_000 + 7 * longctx.sample
    text = FILLER * filler + f"Question {longctx.sample}: the pass key is {key}. " + FILLER
    answer = await longctx.ask(Request.user(text + "What is the pass key?", max_tokens=16))
    longctx.record(expected=key, answer=answer.strip(), item=f"q{longctx.sample}")
    assert str(key) in answer
'''

SAMPLES = ("--longctx-samples", "10")
ALARM = "experiment=keys:max-drop=0"


def right(body: dict[str, Any]) -> str:
    """Always right: the pass key in the prompt."""
    found = re.search(r"the pass key is (\d+)", last_user_text(body))
    return found.group(1) if found else "none"


def wrong(body: dict[str, Any]) -> str:
    """Always wrong: a 0% model."""
    return "12345"


def broken_items(body: dict[str, Any]) -> str:
    """Right, but the server fails every request of questions 0, 3 and 6 (every trial of 3 of 10 items)."""
    if re.search(r"Question [036]:", last_user_text(body)):
        raise RuntimeError("the server broke on this question")
    return right(body)


@pytest.fixture
def project(longctx_runner: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LONGCTX_RETRY_BASE_S", "0")  # a failing request is retried without waiting
    longctx_runner.pytester.makeconftest(CONFTEST)
    longctx_runner.pytester.makepyfile(test_keys=EVAL)
    return longctx_runner


def _run(project: Any, api: Any, responder: Any, name: str, *args: str) -> Any:
    srv = api(responder)
    run = project.run(*SAMPLES, "--longctx-prefetch", "off", *args, model=MODEL, report_dir=name)
    srv.stop()
    return run


def _gate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # what the runs before printed
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_errored_trials_exit_1_as_a_run_and_through_longctx_gate(project: Any, api: Any,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(project, api, right, "base")
    assert base.ret == 0, base.result.stdout.str()
    baseline = str(base.report_dir / "longctx.json")
    cand = _run(project, api, broken_items, "cand", "--longctx-compare", baseline, "--longctx-threshold", ALARM)
    record = cand.record
    errored = sorted({t["sample"] for t in record["trials"] if t["outcome"] == "error"})
    assert errored == [0, 3, 6] and len(record["trials"]) == 20
    gate = record["gate"]
    assert gate["status"] == "pass" and gate["errored_trials"] == 6 and gate["run_exit_code"] == 1
    assert cand.ret == 1, cand.result.stdout.str()
    assert "exit code 1 (errors" in cand.result.stdout.str()

    code, out, _ = _gate(capsys, str(cand.report_dir / "longctx.json"), "--compare", baseline)
    assert code == 1, out  # it exited 0 while its own summary said "exit code 1 (errors)"
    status = out.splitlines()[0]
    assert "6 errors of 20 trials" in status and "exit code 1 (errors" in status, status
    assert "6 errored in this run" in out  # the pairing says where they went


def test_records_that_contradict_themselves_or_each_other_exit_4(project: Any, api: Any, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(project, api, right, "base")
    cand = _run(project, api, right, "cand")
    assert base.ret == cand.ret == 0
    good = json.loads((base.report_dir / "longctx.json").read_text(encoding="utf-8"))

    def write(name: str, **changes: Any) -> str:
        path = tmp_path / name
        path.write_text(json.dumps({**good, **changes}), encoding="utf-8")
        return str(path)

    twice = write("twice.json", trials=good["trials"] * 2)
    miscounted = write("miscounted.json", cells=[{**good["cells"][0], "correct": 9}, *good["cells"][1:]])
    coarse = write("coarse.json", trials=[{**t, "cluster": "keys|all"} for t in good["trials"]])
    candidate = str(cand.report_dir / "longctx.json")
    for argv, needle in [([twice], "trials[20] repeats trials[0]"),
                         ([candidate, "--compare", twice, "--threshold", ALARM], "trials[20] repeats trials[0]"),
                         ([miscounted], "says correct=9 but its trials give 10"),
                         ([candidate, "--compare", coarse, "--threshold", ALARM], "cluster 'keys|all' of the compared "
                                                                                  "run holds trials")]:
        code, out, err = _gate(capsys, *argv)
        assert code == 4 and len(err.strip().splitlines()) == 1 and needle in err, (argv, out, err)

    srv = api(right)  # through the run: refused before any request, or (clusters) once its own are known
    twice_run = project.run(*SAMPLES, "--longctx-prefetch", "off", "--longctx-compare", twice,
                            "--longctx-threshold", ALARM, model=MODEL, report_dir="twice")
    assert twice_run.ret == 4 and srv.stats.endpoints.get("messages", 0) == 0
    assert "trials[20] repeats trials[0]" in twice_run.result.stderr.str()
    coarse_run = project.run(*SAMPLES, "--longctx-prefetch", "off", "--longctx-compare", coarse,
                             "--longctx-threshold", ALARM, model=MODEL, report_dir="coarse")
    assert coarse_run.ret == 4, coarse_run.result.stdout.str()
    assert coarse_run.record["gate"]["refused"].endswith("compare records written with the same evidence "
                                                         "declarations")
    srv.stop()


def test_a_compared_run_at_0_percent_gives_a_decision_table(project: Any, api: Any, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    zero = _run(project, api, wrong, "zero")
    assert zero.record["cells"][0]["accuracy"] == 0.0
    baseline = str(zero.report_dir / "longctx.json")
    cand = _run(project, api, right, "cand", "--longctx-compare", baseline, "--longctx-threshold", ALARM,
                "--longctx-threshold", ALARM + "/alarm")  # one alarm, spelled twice
    out = cand.result.stdout.str()
    assert cand.ret == 0 and "could not compute" not in out, out
    assert re.search(r"^  PASS  experiment=keys:max-drop=0: drop -1\.000 ", out, re.M), out
    assert "the design detects no diffuse drop" in out and len(cand.record["gate"]["checks"]) == 1
    html = (cand.report_dir / "longctx.html").read_text(encoding="utf-8")
    assert 'id="decision"' in html and "experiment=keys:max-drop=0" in html.split('id="decision"', 1)[1]

    code, said, _ = _gate(capsys, str(cand.report_dir / "longctx.json"), "--compare", baseline,
                          "--report-dir", str(tmp_path / "again"))
    assert code == 0 and "could not compute" not in said
    assert 'id="decision"' in (tmp_path / "again" / "longctx.html").read_text(encoding="utf-8")
