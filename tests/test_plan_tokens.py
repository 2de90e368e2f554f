"""A plan's token figures are the full encodings of what it would send, on the real corpus.

The plan counts a shared prefix once per prefix and long texts from remembered pieces (``corpus/tokens.py``); the
figures must still be exactly what encoding every planned prompt gives: the prefix, then the rest of the prompt
(system, the rest of the first turn, later turns, prefill), each encoded whole by tiktoken, as plans counted
before (the documented +-1 token a request is between these two parts and the prompt encoded in one piece).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.backends.base import Request
from pytest_longctx.corpus.tokens import TiktokenCounter
from tests.corpus_data import ROOT

EVALS = ROOT / "evals" / "qa"


def encoded(text: str) -> int:
    return len(TiktokenCounter().encode(text))


@pytest.mark.e2e
def test_qa_source_plan_figures_are_full_encodings(pytester: pytest.Pytester, fr_xml: Path) -> None:
    plan_out = pytester.path / "plan.jsonl"
    report = pytester.path / "reports"
    result = pytester.runpytest_subprocess(
        str(EVALS), "-p", "no:cacheprovider", "-n", "2", "--longctx-model", "anthropic/claude-sonnet-4-5",
        "--longctx-protocol", "source", "--longctx-samples", "2", "--longctx-plan", "true",
        f"--longctx-plan-out={plan_out}", "--longctx-data-dir", str(fr_xml.parent), "--longctx-report-dir",
        str(report), "--longctx-cache-dir", str(pytester.path / "cache"), timeout=600)
    assert result.ret == 0, result.stdout.str()[-3000:]
    entries: list[dict[str, Any]] = [json.loads(line) for line in plan_out.read_text(encoding="utf-8").splitlines()]
    assert len(entries) == 2 * 48 + 2 * 2  # 48 cells and the two controls, 2 samples each
    for entry in entries:  # every qa prompt marks its government record as the prefix its variants share
        request = Request.from_json(entry["request"])
        split = request.split_prefix()
        assert split is not None, entry["template"]
        rest = split[1] + "".join(m.content for m in request.messages[1:])
        assert entry["prefix_tokens"] == encoded(split[0])
        assert entry["input_tokens"] == encoded(split[0]) + encoded((request.system or "") + rest
                                                                    + (request.prefill or ""))
    plan = json.loads((report / "longctx-plan.json").read_text(encoding="utf-8"))["plan"]
    assert plan["models"]["anthropic/claude-sonnet-4-5"]["input_tokens"] == sum(e["input_tokens"] for e in entries)
