"""Re-runs keep the level (issue 38.6): a sequential run's final look is taken once per test.

By seeded simulation: extending a run with more samples, each extension with its own final look at the same level,
raises the cumulative false alarms above alpha, while the one look the plugin allows keeps them within it. End to
end against the local server: a sequential run that made its final look leaves ``sequential.spent`` in its record;
an extension with more samples in the same report dir is refused (exit 4, one line naming the record and how to
start fresh) before any request, and the record is left as it was; a fresh report dir runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_longctx.results.eprocess import draw_drops, simulate, split
from pytest_longctx.results.stats import wilson
from pytest_longctx.server.graded import Graded
from pytest_longctx.session.rerun import earlier_look, fingerprint, refusal, spent
from tests.lrt_runs import run_lrt


def _looks(discordance: float, runs: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """No change, 400 one-trial items in a seeded order: the first run's false alarms (100 items) and the union of
    its and three extensions' (200, 300, 400 items: the same sequence continued, each with its final look)."""
    rng = np.random.default_rng(38)
    a1, a2 = split(0.05)
    x = draw_drops(rng, runs, 400, 1, 0.85, discordance, 0.5, 0.0)
    first = simulate(x[:, :100], 0.0, 0.05, a1, 0.1, group=10, final_level=a2)[1]
    union = first.copy()
    for n in (200, 300, 400):
        union |= simulate(x[:, :n], 0.0, 0.05, a1, 0.1, group=10, final_level=a2)[1]
    return first, union


@pytest.mark.parametrize("discordance", [0.04, 0.3])  # versions of one model; unrelated models
def test_one_final_look_keeps_alpha_where_extensions_spend_it_again(discordance: float) -> None:
    first, union = _looks(discordance)
    runs = len(first)
    assert wilson(int(first.sum()), runs)[0] <= 0.05  # the one look allowed: within alpha
    assert union.sum() > first.sum()  # each extension's look adds false alarms
    if discordance > 0.1:  # unrelated models: the final look decides most runs, and its repeats pass alpha
        assert wilson(int(union.sum()), runs)[0] > 0.05, f"cumulative false alarms {union.mean():.3%}"


def test_earlier_look_reads_the_report_dir(tmp_path: Any) -> None:
    mark = spent("anthropic/m", "abc123", 0.05, 0.0375, True)
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "0001.json").write_text(json.dumps({"sequential": {"spent": mark}}), encoding="utf-8")
    (tmp_path / "longctx.json").write_text(json.dumps({"sequential": None, "note": "abc123"}), encoding="utf-8")
    assert earlier_look(tmp_path, "anthropic/m", "abc123") == tmp_path / "history" / "0001.json"
    assert earlier_look(tmp_path, "anthropic/other", "abc123") is None
    assert earlier_look(tmp_path, "anthropic/m", "abc124") is None
    (tmp_path / "history" / "0001.json").write_text(
        json.dumps({"sequential": {"spent": spent("anthropic/m", "abc123", 0.05, 0.0375, False)}}), encoding="utf-8")
    assert earlier_look(tmp_path, "anthropic/m", "abc123") is None  # no final look made: nothing spent twice


def test_an_extension_after_an_e_process_settled_an_alarm_is_refused(tmp_path: Any) -> None:
    """An alarm settled by its e-process decided the test: an extension's e-process would bet on the same items
    again with another design's stakes, so it is refused like a second final look, in one line saying what to do."""
    alarm = {"threshold": "experiment=lrt:max-drop=0", "settled": "cleared", "settled_by": "e-process",
             "settled_at_item": 57}
    record = tmp_path / "longctx.json"
    seq = {"spent": spent("anthropic/m", "abc123", 0.05, 0.0425, False), "alarms": [alarm]}
    record.write_text(json.dumps({"sequential": seq}), encoding="utf-8")
    assert earlier_look(tmp_path, "anthropic/m", "abc123") == record
    line = refusal(tmp_path, "anthropic/m", Path("prod.json"), "abc123")
    assert line is not None and "\n" not in line
    assert "settled the alarm 'experiment=lrt:max-drop=0' by its e-process (cleared after 57 items)" in line
    assert "pass a fresh --longctx-report-dir" in line and "--longctx-compare a new baseline record" in line
    alarm["settled_by"] = None  # stopped before settling anything (budget, interruption): it may be extended
    record.write_text(json.dumps({"sequential": {**seq, "alarms": [alarm]}}), encoding="utf-8")
    assert earlier_look(tmp_path, "anthropic/m", "abc123") is None
    assert refusal(tmp_path, "anthropic/m", Path("prod.json"), "abc123") is None


def test_an_extension_after_the_final_look_is_refused(pytester: pytest.Pytester, api: Any) -> None:
    api(Graded("claude-prod=0.85,seed=1"))
    code, _, _ = run_lrt(pytester, "claude-prod", "prod", "--longctx-cache", "off", dist=("-p", "no:xdist"))
    assert code == 0
    prod = pytester.path / "prod" / "longctx.json"
    api(Graded("claude-other=0.77,seed=2"))  # another model: the e-process settles nothing, the final look decides
    args = ("--longctx-compare", str(prod), "--longctx-threshold", "experiment=lrt:max-drop=0",
            "--longctx-sequential")
    code, first, out = run_lrt(pytester, "claude-other", "seq", *args, "--longctx-samples", "10",
                               dist=("-p", "no:xdist"), cache="cache-other")
    seq = first["sequential"]
    assert seq["final_look"] and seq["alarms"][0]["settled_by"] == "final look", out
    assert seq["spent"] == {"model": "anthropic/claude-other", "compared_sha256": fingerprint(prod), "alpha": 0.05,
                            "final_look_level": pytest.approx(split(0.05)[1]), "final_look": True}
    before = (pytester.path / "seq" / "longctx.json").read_text(encoding="utf-8")

    report = pytester.path / "seq"
    code, _, err = run_lrt(pytester, "claude-other", "seq", *args, "--longctx-samples", "20",
                           dist=("-p", "no:xdist"), cache="cache-other")
    assert code == pytest.ExitCode.USAGE_ERROR, err
    assert f"{report / 'longctx.json'} is a sequential run of anthropic/claude-other" in err
    assert "already made its final look" in err and "pass a fresh --longctx-report-dir" in err
    assert "--longctx-compare a new baseline record" in err
    assert "Traceback" not in err
    assert (report / "longctx.json").read_text(encoding="utf-8") == before  # nothing run, nothing replaced

    code, fresh, out = run_lrt(pytester, "claude-other", "seq-fresh", *args, "--longctx-samples", "20",
                               dist=("-p", "no:xdist"), cache="cache-other")
    assert code in (0, 10) and fresh["sequential"]["final_look"] and len(fresh["trials"]) == 400, out
