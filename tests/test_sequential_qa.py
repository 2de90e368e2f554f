"""The README recipe's qa alarm with ``--longctx-sequential`` catches a regression confined to the longer contexts
(issue 38.3): qa at 2,000 and 8,000 tokens against the local server's graded responder, production at 0.85
everywhere, the candidate the same model (one difficulty seed) at 0.85 on the short contexts and 0.45 on the long
ones. Every trial of an item reaches the e-process once the item's trials have all answered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.server.graded import Graded

ROOT = Path(__file__).resolve().parent.parent
QA_KEY = ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl"
QA = ("--longctx-context-sizes", "2000,8000", "--longctx-samples", "12")


def _run(pytester: pytest.Pytester, model: str, name: str, *args: str) -> tuple[int, dict[str, Any], str]:
    report = pytester.path / name
    result = pytester.runpytest_subprocess(
        str(ROOT / "evals" / "qa"), "-p", "no:cacheprovider", "-p", "no:xdist", "--longctx-model",
        f"anthropic/{model}", "--longctx-report-dir", str(report), "--longctx-cache-dir",
        str(pytester.path / f"cache-{name}"), *QA, *args, timeout=900)
    out = result.stdout.str() + result.stderr.str()
    path = report / "longctx.json"
    assert path.is_file(), out
    assert "INTERNALERROR" not in out
    return int(result.ret), json.loads(path.read_text(encoding="utf-8")), out


@pytest.mark.e2e
def test_a_qa_regression_confined_to_the_longer_contexts_is_caught(pytester: pytest.Pytester, api: Any,
                                                                  fr_xml: Path) -> None:
    api(Graded(f"claude-prod=0.85,claude-long=0.85@4000,0.45@7000,flip=0.02,seed=3,rho=1,qa-key={QA_KEY}"))
    data = ("--longctx-data-dir", str(fr_xml.parent))
    code, prod, out = _run(pytester, "claude-prod", "prod", *data)
    assert code == 0, out
    sizes = {t["params"]["context_tokens"] for t in prod["trials"] if t["experiment"] == "qa"}
    assert sizes == {2000, 8000}, sizes
    code, cand, out = _run(pytester, "claude-long", "cand", *data, "--longctx-compare",
                           str(pytester.path / "prod" / "longctx.json"),
                           "--longctx-threshold", "experiment=qa:max-drop=0", "--longctx-sequential")
    check = cand["gate"]["checks"][0]
    assert code == 10, check["words"]
    assert check["verdict"] == "fail" and check["sequential"]["settled"] == "fired", check["words"]
    alarm = cand["sequential"]["alarms"][0]
    assert alarm["trials"] > alarm["items"]  # an item's every paired trial reached the e-process, not one group's
    assert alarm["mean_drop"] > 0
