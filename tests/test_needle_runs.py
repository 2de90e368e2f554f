"""Whole runs of ``evals/needle`` against the local Messages-API server and its graded model (the experiment's own
grader, loaded by name through ``pytest_longctx_graders``): the record's cells, the tables, the distractor miss
table, the hallucination rate with its interval, and the gate on abstentions."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.server.graded import Graded

ROOT = Path(__file__).resolve().parent.parent
MODEL = "anthropic/claude-sonnet-4-5"
GRADED = "accuracy=0.75,seed=11,rho=1"
SMALL = ("--longctx-needle-lengths", "500,1000", "--longctx-needle-depths", "50", "--longctx-needle-haystack", "filler")


def run_needle(pytester: pytest.Pytester, name: str, *args: str, workers: bool = False,
               ) -> tuple[pytest.RunResult, dict[str, Any]]:
    report = pytester.path / name
    full = [str(ROOT / "evals" / "needle"), "-p", "no:cacheprovider", "--longctx-model", MODEL,
            "--longctx-report-dir", str(report), "--longctx-cache", "off", *SMALL, *args]
    if workers:
        result = pytester.runpytest_subprocess(*full, "-n", "2", timeout=300)
    else:
        result = pytester.runpytest_inprocess(*full, "-p", "no:xdist")
    path = report / "longctx.json"
    assert path.is_file(), result.stdout.str()
    return result, json.loads(path.read_text(encoding="utf-8"))


def table(record: dict[str, Any], title: str) -> dict[str, Any]:
    found = [t for t in record["tables"] if t["title"].startswith(title)]
    assert len(found) == 1, [t["title"] for t in record["tables"]]
    return found[0]


def test_needle_run_reports_what_the_graded_model_decided(pytester: pytest.Pytester, api: Any) -> None:
    graded = Graded(GRADED)
    srv = api(graded)
    result, record = run_needle(pytester, "run", "--longctx-samples", "8")
    assert result.ret == 0, result.stdout.str()  # wrong answers are data; nothing errored
    trials = [t for t in record["trials"] if t["experiment"] == "needle"]
    # 2 variants x 2 lengths, 3 x 2 distractor cells, 2 abstention cells; 8 trials each
    assert len(trials) == (4 + 6 + 2) * 8 and not [t for t in trials if t["outcome"] == "error"]
    verdicts = [graded.verdict(b) for b in srv.stats.requests]
    assert {v.experiment for v in verdicts} == {"needle"} and len(verdicts) == len(trials)
    assert Counter(v.item for v in verdicts if v.right) == Counter(t["item"] for t in trials
                                                                  if t["outcome"] == "correct")
    share = sum(t["outcome"] == "correct" for t in trials) / len(trials)
    assert 0.3 < share < 1.0
    for t in trials:
        d, p = t["detail"], t["params"]
        if t["outcome"] == "incorrect" and p.get("answerable") == "no":
            assert d["answer_kind"] == "other-name"  # a hallucinated name
        elif t["outcome"] == "incorrect" and int(p.get("distractors") or 0) > 0:
            assert d["answer_kind"] == "distractor" and d["answered_distractor"] in range(4)
        elif t["outcome"] == "incorrect":
            assert d["answer_kind"] == "other-name"
        assert d["haystack_source"] == "filler" and d["context_tokens"] > 0.7 * int(p.get("tokens") or 1000)
    cells = {json.dumps(c["params"], sort_keys=True): c for c in record["cells"] if c["experiment"] == "needle"}
    assert json.dumps({"answerable": "no", "study": "abstention", "tokens": 1000}, sort_keys=True) in cells
    assert json.dumps({"depth": 50, "study": "length", "tokens": 500, "variant": "nonliteral"}, sort_keys=True) in cells

    misses = table(record, "Needle misses with distractors")
    lured = sum(1 for t in trials if t["detail"]["answer_kind"] == "distractor")
    assert sum(int(r[4]) for r in misses["rows"]) == lured > 0
    assert all(r[4] == "0" for r in misses["rows"] if r[1] == "0")  # no distractor, none named

    removed = [t for t in trials if t["params"].get("answerable") == "no"]
    hallucinated = sum(t["outcome"] == "incorrect" for t in removed) / len(removed)
    row = table(record, "Needle abstention")["rows"][0]
    assert row[2].startswith(f"{hallucinated:.3f} [") and f"n={len(removed)}" in row[2]
    low, high = (float(x) for x in row[2].split("[")[1].split("]")[0].split(", "))
    assert low <= hallucinated <= high and high - low > 0
    assert f"needle abstention: hallucination rate {hallucinated:.3f}" in result.stdout.str()

    nolima = table(record, "Needle accuracy by context length")
    assert [r[0] for r in nolima["rows"]] == ["nonliteral", "literal"] and nolima["columns"][-2:] == ["500", "1K"]
    paired = table(record, "Literal - non-literal accuracy by length")
    assert [r[0] for r in paired["rows"]] == ["500", "1K"]
    overlap = table(record, "Needle-question lexical overlap")
    assert overlap["rows"][0][0] == "nonliteral" and int(overlap["rows"][0][1]) >= 100
    assert overlap["rows"][0][2:4] == ["0.00", "100%"]
    assert record["effective_length"]["needle"]["relative"]["share"] == 0.85
    html = (pytester.path / "run" / "longctx.html").read_text(encoding="utf-8")
    assert "Non-literal needles, distractors and abstention" in html


def test_the_gate_sees_more_hallucinations_than_the_compared_run(pytester: pytest.Pytester, api: Any) -> None:
    api(Graded("accuracy=0.9,seed=12,rho=1"))
    _, before = run_needle(pytester, "before", "--longctx-samples", "30", "-k", "abstention")
    api(Graded("accuracy=0.3,seed=12,rho=1"))  # the same items, most now answered wrong
    threshold = "experiment=needle,answerable=no:max-drop=0"
    result, record = run_needle(pytester, "after", "--longctx-samples", "30", "-k", "abstention",
                                "--longctx-compare", str(pytester.path / "before" / "longctx.json"),
                                "--longctx-threshold", threshold)
    assert before["trials"] and result.ret == 10, result.stdout.str()  # GATE_EXIT_CODE
    assert record["gate"]["status"] == "fail" and [c["verdict"] for c in record["gate"]["checks"]] == ["fail"]


@pytest.mark.e2e
def test_needle_run_with_two_workers(pytester: pytest.Pytester, api: Any) -> None:
    api(Graded(GRADED))
    result, record = run_needle(pytester, "xdist", "--longctx-samples", "2", "--longctx-needle-lengths",
                                "500,1000,300000", workers=True)
    assert result.ret == 0, result.stdout.str()  # the warning naming the left-out length crosses xdist
    assert "needle: 300,000 tokens not run" in result.stdout.str()
    trials = [t for t in record["trials"] if t["experiment"] == "needle"]
    assert len(trials) == 12 * 2 and not [t for t in trials if t["outcome"] == "error"]
    assert {t["title"].split(" (")[0] for t in record["tables"]} >= {
        "Needle accuracy by context length", "Needle misses with distractors, coherent vs shuffled haystack",
        "Needle abstention: hallucination rate beside accuracy"}
    assert math.isfinite(sum(t["detail"]["context_tokens"] for t in trials))


@pytest.mark.parametrize(("option", "value", "says"), [
    ("--longctx-needle-depths", "150", "depths are percents from 0 to 100"),
    ("--longctx-needle-haystack", "books", "expected one of auto, fr, filler"),
    ("--longctx-needle-lengths", "1000,abc", "--longctx-needle-lengths")])
def test_a_bad_needle_option_is_a_one_line_usage_error(pytester: pytest.Pytester, option: str, value: str,
                                                      says: str) -> None:
    result = pytester.runpytest_subprocess(str(ROOT / "evals" / "needle"), "--collect-only", "-p", "no:xdist",
                                           "--longctx-model", "fake/perfect", f"{option}={value}")
    errors = [line for line in result.stderr.lines if line.strip()]
    assert result.ret == 4 and len(errors) == 1 and says in errors[0], result.stderr.str()


def test_the_federal_register_haystack_is_prose_without_the_pool(fr_xml: Path) -> None:
    from pytest_longctx.experiments.needle.haystack import federal_register
    from pytest_longctx.experiments.needle.pairs import load_data, mentions

    source = federal_register(fr_xml)
    data = load_data()
    assert len(source.sentences) > 3000 and sum(len(s.split()) for s in source.sentences) > 100_000
    kept = source.without(data.names)
    assert len(kept) > 0.95 * len(source.sentences) and not any(mentions(s, data.names) for s in kept[:500])
