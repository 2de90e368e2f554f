"""The LRT and docs source protocols end to end: ``pytest evals/lrt`` / ``evals/docs`` with
``--longctx-protocol source`` against the local Messages-API server (the real SDK, no network).

The server's responders answer from the prompt (the LRT's asked line; the docs item's gold answer and
the judge's verdict), so every trial must be correct: a wrong one is a fault in the protocol's plumbing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.server.responders import last_user_text

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent
MODEL = "anthropic/claude-test"
DOCS = ROOT / "fixtures" / "docs"


def run_evals(pytester: pytest.Pytester, evals: str, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "evals" / evals), "-p", "no:cacheprovider", "--longctx-model", MODEL, "--longctx-protocol",
        "source", "--longctx-report-dir", str(report), "--longctx-cache-dir", str(pytester.path / "cache"), *args,
        timeout=300)
    path = report / ("longctx-plan.json" if "--longctx-plan" in args else "longctx.json")  # a plan's own record
    assert path.is_file(), result.stdout.str()
    return result, json.loads(path.read_text(encoding="utf-8"))


def lrt_reader(body: dict[str, Any]) -> str:
    """A model that executes the instruction: the value of the line it names."""
    text = last_user_text(body)
    k = re.search(r"\[EXECUTE THIS\]: Go to line (\d+) ", text)
    found = re.search(rf"^line {k.group(1)}: REGISTER_CONTENT is <(\d+)>$", text, re.M) if k else None
    return found.group(1) if found else "EXIT"


def test_lrt_source_protocol_through_the_local_messages_api(pytester: pytest.Pytester, api: Any) -> None:
    srv = api(lrt_reader)
    result, record = run_evals(pytester, "lrt", "--longctx-lrt-lines", "500,1000", "--longctx-samples", "3")
    assert result.ret == 0, result.stdout.str()
    assert record["settings"]["protocol"] == "source" and record["settings"]["lrt_lines"] == [500, 1000]
    trials = record["trials"]
    assert len(trials) == 2 * 4 * 3 and all(t["outcome"] == "correct" for t in trials)
    assert {t["params"]["shuffle"] for t in trials} == {"none", "full", "block-10", "block-100"}
    assert all(t["detail"]["protocol"] == "source" and t["detail"]["template"] == "lrt-source@1" for t in trials)
    assert all(1 <= t["expected"] <= 10_000 for t in trials)
    bodies = srv.stats.requests
    assert len(bodies) == len(trials)
    for body in bodies:
        assert body["max_tokens"] == 10 and len(body["messages"]) == 1
        assert body["messages"][0]["content"].startswith("Testing Long Context\n\n")
    titles = [t["title"] for t in record["tables"] if t["experiment"] == "lrt"]
    assert titles[0].startswith("LRT accuracy vs number of lines, ordered") and "per block size" in titles[1]
    first = record["tables"][0]
    assert first["columns"] == ["lines", "none", "full"] and first["rows"][0][1] == {"correct": 3, "n": 3}
    assert "LRT accuracy vs number of lines" in result.stdout.str()


def test_lrt_source_plan_has_50_trials_a_size(pytester: pytest.Pytester, api: Any) -> None:
    api(lrt_reader)
    result, record = run_evals(pytester, "lrt", "--longctx-lrt-lines", "500", "--longctx-plan", "true")
    assert result.ret == 0, result.stdout.str()
    assert [m["requests"] for m in record["plan"]["models"].values()] == [4 * 50]


def docs_reader(qa_file: Path) -> Any:
    """A model that knows every gold answer, and a judge that says whether the answer contains the gold."""
    gold = {}
    for line in qa_file.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        gold[item["question"]] = item["answer"]

    def respond(body: dict[str, Any]) -> str:
        text = last_user_text(body)
        if text.startswith("For the question provided"):
            answer = re.search(r"^Answer: (.*)$", text, re.M)
            expected = re.search(r"^Gold standard answer: (.*)$", text, re.M)
            assert answer and expected
            return json.dumps({"correct": expected.group(1).lower() in answer.group(1).lower()})
        question = re.search(r"^Question: (.*)\nAnswer:$", text, re.M)
        return f"It is {gold[question.group(1)]}." if question else "I don't know."
    return respond


def test_docs_source_protocol_through_the_local_messages_api(pytester: pytest.Pytester, api: Any) -> None:
    srv = api(docs_reader(DOCS / "longctx-qa.jsonl"))
    result, record = run_evals(pytester, "docs", "--longctx-docs", str(DOCS))
    assert result.ret == 0, result.stdout.str()
    cells = record["cells"]
    assert len(cells) == 5 + 5 * 2
    assert all(c["n"] == 14 and c["accuracy"] == 1.0 and c["errors"] == 0 for c in cells)  # every pair, every cell
    trials = record["trials"]
    assert all(t["detail"]["protocol"] == "source" and t["detail"]["scorer"] == "judge" for t in trials)
    by_cell: dict[str, list[str]] = {}
    for t in trials:
        by_cell.setdefault(json.dumps(t["params"], sort_keys=True), []).append(f"{t['sample']}:{t['item']}")
    pairs = {tuple(sorted(v)) for v in by_cell.values()}
    assert len(pairs) == 1  # paired: sample i asks the same item in every cell
    assert len({p.split(":", 1)[1].split("/")[0] for p in next(iter(pairs))}) == 14  # one pair per document
    bodies = [last_user_text(b) for b in srv.stats.requests]
    # The same answer to the same item gets the same (cached) verdict: one judge request per item.
    assert sum(b.startswith("For the question provided, return a JSON object") for b in bodies) == 14
    asked = [b for b in bodies if b.startswith("Using only the context provided")]
    # Identical prompts are answered from the cache (e.g. the rag arm's chunks of a lone short document).
    assert len(asked) == len(set(asked)) and len(trials) - 14 <= len(asked) <= len(trials)
    assert not any("[Document: " in b for b in bodies)
    titles = [t["title"] for t in record["tables"] if t["experiment"] == "docs"]
    assert titles[0].startswith("docs accuracy by answer depth") and titles[1].startswith("docs long context vs RAG")
