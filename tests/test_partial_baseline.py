"""Nothing decided on a partial or useless baseline, nothing lost (issue #29 item 7).

An interrupted run (Ctrl-C, ``-x``) writes ``longctx.partial.json``/``.html`` beside the last complete record and
report of its folder, which stay byte for byte. A compared run that is a plan, was stopped, ran with another seed or
lacks this run's cells is refused at start-up (exit 4, one line) before any request reaches the local Messages-API
server, with and without xdist and prefetch; ``--longctx-compare-partial`` accepts a partial one and every verdict
then says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import passkey_api
from tests.passkey_api import MODEL

#: The pass-key eval (always answered right), whose test then stops the run at the sample the environment names in
#: the filler-16 cell: Ctrl-C (``STOP_AT``) or a bug in the eval (``FAIL_AT``).
EVAL = passkey_api.EVAL + '''\
    import os

    if filler == 16 and str(longctx.sample) == os.environ.get("STOP_AT"):
        raise KeyboardInterrupt  # Ctrl-C in the middle of the run
    if filler == 16 and str(longctx.sample) == os.environ.get("FAIL_AT"):
        raise RuntimeError("a bug in the eval")
'''


def _messages(srv: Any) -> int:
    return int(srv.stats.endpoints.get("messages", 0))


@pytest.fixture
def project(longctx_runner: Any, api: Any) -> Any:
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    longctx_runner.srv = api()
    return longctx_runner


def _run(project: Any, *args: str, report_dir: str = "reports", cache: bool = False) -> Any:
    return project.run("--longctx-samples", "4", *args, model=MODEL, report_dir=report_dir, cache=cache,
                       subprocess=True)


@pytest.mark.e2e
@pytest.mark.parametrize(("how", "env", "args", "reason"), [
    ("ctrl-c", {"STOP_AT": "1"}, [], "interrupted"),
    ("-x", {"FAIL_AT": "1"}, ["-x"], "-x: first failure"),
    ("-n 2 -x", {"FAIL_AT": "1"}, ["-n", "2", "-x"], "-x: first failure"),
], ids=["ctrl-c", "x", "n2-x"])
def test_an_interrupted_run_never_replaces_the_last_complete_record(project: Any, monkeypatch: pytest.MonkeyPatch,
                                                                     how: str, env: dict[str, str], args: list[str],
                                                                     reason: str) -> None:
    complete = _run(project)
    assert complete.ret == 0, complete.result.stdout.str()
    reports = complete.report_dir
    before = {name: (reports / name).read_bytes() for name in ("longctx.json", "longctx.html")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    stopped = _run(project, *args)
    out = stopped.result.stdout.str()
    assert stopped.ret == pytest.ExitCode.INTERRUPTED, out
    assert {name: (reports / name).read_bytes() for name in before} == before  # the complete run's, untouched
    assert not (reports / "history").exists()  # and not moved to the history either
    partial = json.loads((reports / "longctx.partial.json").read_text(encoding="utf-8"))
    assert reason in partial["stopped"] and len(partial["trials"]) < 8
    assert (reports / "longctx.partial.html").is_file()
    assert f"longctx report: {reports / 'longctx.partial.json'}" in out
    assert "this run was stopped" in out and "longctx.json, report and history are left as they were" in out
    # the next complete run replaces the complete record as before (the partial one stays beside it)
    monkeypatch.delenv(next(iter(env)))
    again = _run(project)
    assert again.ret == 0 and (reports / "history" / "0001.json").read_bytes() == before["longctx.json"]


def _stopped_baseline(project: Any, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STOP_AT", "1")
    stopped = _run(project, report_dir="stopped")
    monkeypatch.delenv("STOP_AT")
    return Path(stopped.report_dir / "longctx.partial.json")


REFUSED = {
    "plan": "is a plan record (--longctx-plan: nothing was answered); pass the longctx.json of a completed run",
    "stopped": "is the record of a stopped run (interrupted; ",
    "seed": "ran with --longctx-seed 7, this run with 0: its items and contexts differ; run with --longctx-seed 7, "
            "or pass --longctx-compare-partial to compare with what it has",
    "cells": "has no scored trial in 1 of this run's 2 cells (e.g. demo filler=16); compare with a run of the same "
             "experiments and conditions, or select only the tests it ran, or pass --longctx-compare-partial",
}
#: Where the refusal must happen before anything is sent: the controller after collecting (no xdist), the planning
#: child before the prefetch dispatcher has anything to send (-n 2, cache on), each worker before its first
#: request (-n 2, cache off: no prefetch). Plan, stopped and seed are refused when the options are read (the same
#: code in every mode); the cells only after collection, so they are tried in every mode.
CASES = [("plan", [], False), ("stopped", [], False), ("seed", [], False), ("cells", [], False),
         ("cells", ["-n", "2"], True), ("cells", ["-n", "2"], False)]


@pytest.mark.e2e
def test_a_useless_or_partial_baseline_is_refused_at_start_up_with_nothing_sent(
        project: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    baselines = {
        "plan": _run(project, "--longctx-plan", report_dir="plan").report_dir / "longctx-plan.json",
        "stopped": _stopped_baseline(project, monkeypatch),
        "seed": _run(project, "--longctx-seed", "7", report_dir="seed7").report_dir / "longctx.json",
        "cells": _run(project, "-k", "not 16", report_dir="half").report_dir / "longctx.json",
    }
    assert all(path.is_file() for path in baselines.values()), baselines
    for which, args, cache in CASES:
        sent = _messages(project.srv)
        run = _run(project, *args, "--longctx-compare", str(baselines[which]), "--longctx-threshold",
                   "*:max-drop=0", report_dir="candidate", cache=cache)
        out = run.result.stdout.str() + run.result.stderr.str()
        case = f"{which} {args} cache={cache}"
        assert run.ret == pytest.ExitCode.USAGE_ERROR, f"{case}:\n{out}"
        lines = [line for line in out.splitlines() if REFUSED[which] in line]
        assert lines and len(set(lines)) == 1, f"{case}:\n{out}"  # one line (xdist may echo it per worker)
        assert f"--longctx-compare: {baselines[which]} " in lines[0], case
        assert _messages(project.srv) == sent, f"{case}: a request was sent before the refusal"
        assert not (run.report_dir / "longctx.json").exists(), case


@pytest.mark.e2e
def test_a_partial_baseline_accepted_explicitly_says_so_in_every_verdict(project: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = _stopped_baseline(project, monkeypatch)
    run = _run(project, "--longctx-compare", str(stopped), "--longctx-compare-partial",
               "--longctx-threshold", "*:max-drop=0", "--longctx-threshold", "*:min=0.5", report_dir="candidate")
    out = run.result.stdout.str()
    assert run.ret == 0, out
    gate = run.record["gate"]
    assert gate["partial_baseline"].startswith("partial baseline: the compared run is the record of a stopped run")
    assert all(check["words"].endswith(f"[{gate['partial_baseline']}]") for check in gate["checks"])
    assert run.record["comparison"]["partial"] == gate["partial_baseline"]
    assert "(accepted with --longctx-compare-partial)" in out
