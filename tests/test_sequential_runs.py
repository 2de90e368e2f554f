"""The sequential gate end to end (``--longctx-sequential``): LRT runs against the local Messages-API server's graded
responder, two workers, gated against a production run with the recipe's alarm.

* a candidate collapsed by 30 points stops early (the record says after how many sample groups and items), its
  remaining trials skipped with the reason, and fails (exit 10); with the cache on, prefetch stays a window ahead
  and stops sending;
* an unchanged candidate passes;
* the verdicts equal the fixed design's on the same graded models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.server.graded import Graded
from tests.lrt_runs import compared_with_production, run_lrt

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.e2e
def test_sequential_stops_a_collapse_early_and_agrees_with_the_fixed_design(pytester: pytest.Pytester,
                                                                            api: Any) -> None:
    api(Graded("claude-prod=0.85,claude-same=0.85,claude-bad=0.55,flip=0.02,seed=1"))
    compared = compared_with_production(pytester)

    code, bad, out = run_lrt(pytester, "claude-bad", "bad-seq", *compared, "--longctx-sequential")
    check = bad["gate"]["checks"][0]
    seq = bad["sequential"]
    assert code == 10, check["words"]
    assert check["verdict"] == "fail" and check["sequential"]["settled"] == "fired"
    assert check["fixed"]["verdict"] == "fail"  # the fixed reading of the answered trials agrees
    assert seq["stopped"] and "settled after" in seq["reason"]
    assert seq["groups_completed"] < seq["groups_planned"] == 20
    alarm = seq["alarms"][0]
    assert alarm["settled_at_item"] is not None and alarm["settled_at_item"] < 200
    answered = len(bad["trials"])
    assert answered < 400 and all(t["outcome"] != "error" for t in bad["trials"])
    assert "skipped" in out and "sequential gate settled" in out  # the rest skipped, with the reason
    assert bad["prefetch"]["sent"] < 400 - 100  # prefetch stayed a window ahead and stopped sending

    code, bad_fixed, _ = run_lrt(pytester, "claude-bad", "bad-fixed", *compared, "--longctx-cache", "off")
    assert code == 10 and bad_fixed["gate"]["checks"][0]["verdict"] == "fail"
    assert len(bad_fixed["trials"]) == 400 and "sequential" not in bad_fixed

    code, same, _ = run_lrt(pytester, "claude-same", "same-seq", *compared, "--longctx-sequential")
    check = same["gate"]["checks"][0]
    assert code == 0, check["words"]
    assert check["verdict"] == "pass" and check["sequential"]["settled"] != "fired"
    code, same_fixed, _ = run_lrt(pytester, "claude-same", "same-fixed", *compared, "--longctx-cache", "off")
    assert code == 0 and same_fixed["gate"]["checks"][0]["verdict"] == "pass"


@pytest.mark.parametrize(("args", "words"), [
    ((), "needs --longctx-compare"),
    (("--longctx-compare", "{prod}", "--longctx-threshold", "experiment=lrt:min=0.5"), "pooled max-drop alarm"),
    (("--longctx-budget", "-3"), "--longctx-budget: expected a positive amount of dollars"),
    (("--longctx-sequential-stop", "never"), "--longctx-sequential-stop: expected alarm or run, got 'never'"),
    (("--longctx-budget", "lots"), "--longctx-budget: expected dollars such as 50"),
])
def test_sequential_usage_errors(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...],
                                words: str) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    prod = pytester.path / "prod.json"
    prod.write_text("{}", encoding="utf-8")
    result = pytester.runpytest_subprocess(
        str(ROOT / "evals" / "lrt"), "-p", "no:cacheprovider", "--longctx-model", "anthropic/claude-x",
        "--longctx-sequential", *(a.format(prod=prod) for a in args), timeout=120)
    assert result.ret == 4
    assert words in result.stderr.str()


@pytest.mark.e2e
def test_a_budget_stops_the_run_with_its_reason(pytester: pytest.Pytester, api: Any) -> None:
    api(Graded("claude-prod=0.85,seed=1"))
    code, record, out = run_lrt(pytester, "claude-prod", "budget", "--longctx-cache", "off", "--longctx-budget", "0.5",
                                "--longctx-prices", "anthropic/claude-prod=3/15")
    assert code == 2, out  # stopped: the verdicts were not reached
    assert not (pytester.path / "budget" / "longctx.json").exists()  # no complete run to stand for
    assert record["stopped"].startswith("--longctx-budget: ") and "the budget is $0.50" in record["stopped"]
    assert 0 < len(record["trials"]) < 400
    assert all(t["outcome"] != "error" for t in record["trials"])
