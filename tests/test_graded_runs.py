"""Whole runs of the suite's experiments (``pytest evals/<lrt|qa|docs|litm> -n 2``) against a model of known accuracy.

``anthropic/claude-sonnet-4-5`` is answered by the local Messages-API server with the graded responder
(``graded:<spec>``). The server keeps every request body; the same responder's :meth:`~Graded.verdict` on each
body says what the rule decided, and the run record must report exactly that: trial by trial where a trial can be
matched to its request (lrt), item by item elsewhere (every trial of one item shares its difficulty, rho=1).
No cache (``--longctx-cache off``): every trial sends exactly one request.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.experiments.litm.data import corpus_file
from pytest_longctx.server.graded import Graded, Verdict, prompt_text
from tests.corpus_data import find_for_tests

ROOT = Path(__file__).resolve().parent.parent
MODEL = "anthropic/claude-sonnet-4-5"
QA_KEY = ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl"
DOCS = ROOT / "fixtures" / "docs"


def run_evals(pytester: pytest.Pytester, evals: str, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        str(ROOT / "evals" / evals), "-p", "no:cacheprovider", "-n", "2", "--longctx-model", MODEL,
        "--longctx-report-dir", str(report), "--longctx-cache", "off",
        "--longctx-cache-dir", str(pytester.path / "cache"), *args, timeout=300)
    path = report / "longctx.json"
    assert path.is_file(), result.stdout.str()
    return result, json.loads(path.read_text(encoding="utf-8"))


def near(share: float, n: int, p: float) -> bool:
    """``share`` of ``n`` trials within 4 binomial standard deviations of ``p``."""
    return abs(share - p) <= 4 * math.sqrt(p * (1 - p) / n)


def expected_share(accuracy: float, flip: float) -> float:
    return accuracy * (1 - flip) + (1 - accuracy) * flip


def verdicts(graded: Graded, bodies: list[dict[str, Any]], experiment: str) -> list[Verdict]:
    found = [graded.verdict(b) for b in bodies]
    return [v for v in found if v.experiment == experiment]


def per_item(graded: Graded, bodies: list[dict[str, Any]], trials: list[dict[str, Any]], experiment: str,
             item: Callable[[dict[str, Any]], str] = lambda t: str(t["item"])) -> None:
    """Every item's trials are right as often as the rule said for its requests; unflipped verdicts of an item
    agree (rho=1: the item decides in every cell). ``item``: the responder's item id of a trial."""
    decided = verdicts(graded, bodies, experiment)
    assert len(decided) == len(trials) and {t["outcome"] for t in trials} == {"correct", "incorrect"}
    assert Counter(v.item for v in decided if v.right) == Counter(item(t) for t in trials if t["outcome"] == "correct")
    assert Counter(v.item for v in decided) == Counter(item(t) for t in trials)
    for item in {v.item for v in decided}:
        assert len({v.right for v in decided if v.item == item and not v.flipped}) == 1


@pytest.mark.e2e
def test_lrt_run_reports_what_the_rule_decided_trial_by_trial(pytester: pytest.Pytester, api: Any) -> None:
    graded = Graded("accuracy=0.85,flip=0.02,seed=1")
    srv = api(graded)
    result, record = run_evals(pytester, "lrt", "--longctx-samples", "20", "--longctx-lrt-lines", "200,400")
    assert result.ret == 0, result.stdout.str()  # wrong answers are data (outcome incorrect); nothing errored
    trials = record["trials"]
    assert len(trials) == 2 * 5 * 20 and not [t for t in trials if t["outcome"] == "error"]
    by_request = {}  # (asked line, its value) -> what the rule decided for that request
    for body in srv.stats.requests:
        text = prompt_text(body)
        line = re.search(r"Go to line (\d+) ", text).group(1)
        value = re.search(rf"^line {line}: REGISTER_CONTENT is <(\d+)>$", text, re.M).group(1)
        by_request[int(line), int(value)] = graded.verdict(body)
    assert len(by_request) == len(trials)
    matched: dict[str, list[bool]] = {}
    for trial in trials:
        verdict = by_request[trial["detail"]["target_line"], trial["expected"]]
        assert (trial["outcome"] == "correct") == verdict.right and trial["raw"] == verdict.reply
        if not verdict.right:
            assert trial["detail"]["miss_distance"] in (-1, 1)  # a neighbour's value: the miss table has data
        matched.setdefault(json.dumps(trial["params"], sort_keys=True), []).append(verdict.right)
    for cell in record["cells"]:
        assert cell["correct"] == sum(matched[json.dumps(cell["params"], sort_keys=True)]) and cell["n"] == 20
    share = sum(t["outcome"] == "correct" for t in trials) / len(trials)
    assert near(share, len(trials), expected_share(0.85, 0.02))
    misses = [t for t in record["tables"] if t["title"].startswith("LRT misses")]
    assert misses and "LRT misses" in result.stdout.str()


@pytest.mark.e2e
def test_qa_run_reports_each_question_right_or_wrong_together(pytester: pytest.Pytester, api: Any,
                                                             fr_xml: Path) -> None:
    graded = Graded(f"accuracy=0.6,flip=0.05,seed=2,rho=1,qa-key={QA_KEY}")
    srv = api(graded)
    result, record = run_evals(pytester, "qa", "--longctx-data-dir", str(fr_xml.parent), "--longctx-samples", "4",
                               "--longctx-context-sizes", "2000")
    assert result.ret == 0, result.stdout.str()
    trials = record["trials"]
    assert {t["experiment"] for t in trials} == {"qa", "qa-baseline", "qa-control"}
    assert not [t for t in trials if t["outcome"] == "error"] and len(trials) >= 100
    per_item(graded, srv.stats.requests, trials, "qa")  # the baseline and the control are qa requests too
    assert all(t["answer"] in ("A", "B", "C", "D") for t in trials)  # a wrong answer is another letter


@pytest.mark.e2e
def test_docs_run_reports_the_rule_and_its_judge_agrees(pytester: pytest.Pytester, api: Any) -> None:
    graded = Graded(f"accuracy=0.7,flip=0.05,seed=3,docs-key={DOCS}")
    srv = api(graded)
    result, record = run_evals(pytester, "docs/test_docs.py", "--longctx-docs", str(DOCS), "--longctx-samples", "6")
    assert result.ret == 0, result.stdout.str()
    trials = record["trials"]
    assert not [t for t in trials if t["outcome"] == "error"]
    bodies = srv.stats.requests
    judged = verdicts(graded, bodies, "docs-judge")
    assert len(judged) == len(trials)  # one judge request per trial (no cache)
    per_item(graded, bodies, trials, "docs")
    assert all(t["detail"]["judge_agree"] is True for t in trials)  # the judge is always right


@pytest.mark.e2e
def test_litm_run_reports_the_rule_for_questions_and_keys(pytester: pytest.Pytester, api: Any,
                                                          pytestconfig: pytest.Config) -> None:
    questions = find_for_tests(pytestconfig, corpus_file("qa"))
    find_for_tests(pytestconfig, corpus_file("kv-75"))
    graded = Graded(f"accuracy=0.7,flip=0.05,seed=4,litm-key={questions}")
    srv = api(graded)
    result, record = run_evals(pytester, "litm", "--longctx-data-dir", str(questions.parents[1]),
                               "--longctx-samples", "6", "--longctx-litm-documents", "10",
                               "--longctx-litm-keys", "75")
    assert result.ret == 0, result.stdout.str()
    trials = record["trials"]
    assert not [t for t in trials if t["outcome"] == "error"]
    bodies = srv.stats.requests
    per_item(graded, bodies, [t for t in trials if t["experiment"] == "litm-qa"], "litm-qa")  # nq-open-<row>
    per_item(graded, bodies, [t for t in trials if t["experiment"] == "litm-kv"], "litm-kv",
             item=lambda t: f"kv-{t['detail']['key']}")
