"""The gate end to end: whole runs of the suite's experiments against models of known accuracy (the local
Messages-API server's graded responder), gated with the CI recipe of docs/ci-gating.md.

* LRT at its default samples (20 cells x 20 files; smaller files than the remote default's, the same counts):
  production at 85%, a candidate uniformly 5 points worse (its right files a subset of production's, 2% of answers
  flipped at random in each run) fails the recipe with exit 10; an unchanged candidate passes.
* qa, a model whose questions are right or wrong together across every cell, run twice with the question-level
  fates drawn anew: no change, and the clustered gate passes where counting trials as independent would not.
* qa, two models whose own right-section baselines exclude different questions: their runs still pair question by
  question, on identical prompts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.results.clustered import paired_difference
from pytest_longctx.results.pairing import NOT_ASKED, OTHER_ITEM, pair_runs
from pytest_longctx.server.graded import Graded

ROOT = Path(__file__).resolve().parent.parent
QA_KEY = ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl"


def recipe() -> list[str]:
    """The thresholds of the CI recipe in docs/ci-gating.md."""
    text = (ROOT / "docs" / "ci-gating.md").read_text(encoding="utf-8")
    block = text.split("<!-- recipe -->", 1)[1].split("<!-- /recipe -->", 1)[0]
    return re.findall(r"--longctx-threshold '([^']+)'", block)


def run(pytester: pytest.Pytester, evals: str, model: str, name: str, *args: str) -> tuple[int, dict[str, Any]]:
    report = pytester.path / name
    result = pytester.runpytest_subprocess(
        str(ROOT / "evals" / evals), "-p", "no:cacheprovider", "-n", "2", "--longctx-model", f"anthropic/{model}",
        "--longctx-report-dir", str(report), "--longctx-cache", "off", "--longctx-cache-dir",
        str(pytester.path / "cache"), *args, timeout=600)
    path = report / "longctx.json"
    assert path.is_file(), result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    return int(result.ret), json.loads(path.read_text(encoding="utf-8"))


def test_the_recipe_is_pooled_regression_alarms() -> None:
    thresholds = recipe()
    assert thresholds == ["experiment=lrt:max-drop=0", "experiment=qa:max-drop=0", "experiment=docs:max-drop=0",
                          "experiment=litm-*:max-drop=0"]


LRT = ("--longctx-lrt-lines", "100,200,300,400")


@pytest.mark.e2e
def test_lrt_recipe_fails_a_uniform_5_point_drop_and_passes_an_unchanged_model(pytester: pytest.Pytester,
                                                                              api: Any) -> None:
    api(Graded("claude-prod=0.85,claude-same=0.85,claude-worse=0.80,flip=0.02,seed=1"))
    gate = [t for t in recipe() if t.startswith("experiment=lrt")]
    code, prod = run(pytester, "lrt", "claude-prod", "prod", *LRT)
    assert code == 0 and len(prod["trials"]) == 400 and len(prod["cells"]) == 20  # 20 cells x 20 (default)
    compared = ["--longctx-compare", str(pytester.path / "prod" / "longctx.json"),
                *(a for t in gate for a in ("--longctx-threshold", t))]

    code, same = run(pytester, "lrt", "claude-same", "same", *LRT, *compared)
    check = same["gate"]["checks"][0]
    assert code == 0, check["words"]
    assert (check["verdict"], check["n"], check["clusters"]) == ("pass", 400, 400)  # every file paired
    assert same["comparison"]["pairing"]["paired"] == 400 and same["comparison"]["same_seed"] is True

    code, worse = run(pytester, "lrt", "claude-worse", "worse", *LRT, *compared)
    check = worse["gate"]["checks"][0]
    assert code == 10, check["words"]
    assert check["verdict"] == "fail" and check["p"] < 0.01 and check["high"] < 0
    assert "shown larger than 0" in check["words"]
    assert worse["experiments"]["lrt"]["detectable"]["drop"] < 0.05  # the run says it could see 5 points
    assert worse["comparison"]["significant_drops"] < 20  # most single cells cannot tell; the pooled gate can


#: The full design (every question in every cell), whose properties these tests check; a remote model's default
#: block design has its own run in tests/test_qa_design.py.
QA = ("--longctx-context-sizes", "2000", "--longctx-samples", "10", "--longctx-qa-design", "full")


def qa_spec(seed: int, *models: str) -> Graded:
    return Graded(",".join(f"{m}=0.7" for m in models) + f",seed={seed},rho=1,qa-key={QA_KEY}")


@pytest.mark.e2e
def test_qa_questions_that_share_their_fate_do_not_cry_wolf(pytester: pytest.Pytester, api: Any,
                                                           fr_xml: Path) -> None:
    """Two runs of an unchanged model whose every question is right or wrong in all its cells, its fate drawn
    anew for each run (two servers, two difficulty seeds). The pooled gate, counting questions, passes; the same
    pairs counted as independent trials would call a significant drop."""
    data = ("--longctx-data-dir", str(fr_xml.parent), *QA)
    api(qa_spec(11, "claude-qa"))
    code, first = run(pytester, "qa", "claude-qa", "first", *data)
    assert code == 0
    api(qa_spec(12, "claude-qa"))
    first_record = str(pytester.path / "first" / "longctx.json")
    code, second = run(pytester, "qa", "claude-qa", "second", *data, "--longctx-cache-dir",
                       str(pytester.path / "cache2"), "--longctx-compare", first_record,
                       "--longctx-threshold", "experiment=qa:max-drop=0")
    check = second["gate"]["checks"][0]
    assert code == 0, check["words"]
    assert check["clusters"] == 10 and check["n"] == second["experiments"]["qa"]["pooled"]["n"]
    pairs = pair_runs([t for t in second["trials"] if t["experiment"] == "qa"],
                      [t for t in first["trials"] if t["experiment"] == "qa"]).pairs
    now = [a["outcome"] == "correct" for _, a, _ in pairs]
    before = [b["outcome"] == "correct" for _, _, b in pairs]
    naive = paired_difference(now, before, list(range(len(pairs))))
    clustered = paired_difference(now, before, [a["cluster"] for _, a, _ in pairs])
    assert naive.regressed + naive.improved > 0  # the two draws disagree on some questions
    assert clustered.deff > 10  # ... in every cell at once
    assert clustered.p_drop_over(0) > 0.05 > min(naive.p_drop_over(0), 1 - naive.p_drop_over(0))


@pytest.mark.e2e
def test_qa_models_with_different_baseline_filters_pair_on_questions(pytester: pytest.Pytester, api: Any,
                                                                     fr_xml: Path) -> None:
    """Each model's first run stores its right-section baseline; its second run asks only the questions it got
    right there. The two filters differ, yet the second runs pair question by question, on the same prompts."""
    data = ("--longctx-data-dir", str(fr_xml.parent), *QA)
    api(qa_spec(21, "claude-a"))
    run(pytester, "qa", "claude-a", "a1", *data)
    _, a = run(pytester, "qa", "claude-a", "a2", *data)
    api(qa_spec(22, "claude-b"))
    run(pytester, "qa", "claude-b", "b1", *data)
    code, b = run(pytester, "qa", "claude-b", "b2", *data, "--longctx-compare",
                  str(pytester.path / "a2" / "longctx.json"), "--longctx-threshold", "experiment=qa:max-drop=0.5")
    assert code in (0, 10), b["gate"]
    excluded = [{t["detail"]["baseline_excluded"] for t in r["trials"] if t["experiment"] == "qa"} for r in (a, b)]
    assert excluded[0] != excluded[1] and max(max(e) for e in excluded) > 0  # each run's own model's filter
    asked = [{t["item"] for t in r["trials"] if t["experiment"] == "qa"} for r in (a, b)]
    assert asked[0] != asked[1]  # ... so they asked different questions
    qa_now = [t for t in b["trials"] if t["experiment"] == "qa"]
    qa_before = [t for t in a["trials"] if t["experiment"] == "qa"]
    pairing = pair_runs(qa_now, qa_before)
    assert pairing.pairs and set(pairing.unpaired_here) <= {NOT_ASKED}
    for _, now, before in pairing.pairs:  # same question, same context, same option order
        assert now["item"] == before["item"] and now["expected"] == before["expected"]
        for key in ("options", "gold_offset", "sections", "context_tokens_actual"):
            assert now["detail"][key] == before["detail"][key], key
    shared = sum(1 for r in asked[1] if r in asked[0])
    cells = len({json.dumps(t["params"], sort_keys=True) for t in qa_now})
    assert len(pairing.pairs) == shared * cells  # every question both kept pairs in every cell
    by_index = pair_runs(qa_now, qa_before, by_item=False)  # what pairing by sample index would have done
    assert by_index.unpaired_here.get(OTHER_ITEM, 0) > 0 and len(by_index.pairs) < len(pairing.pairs)
    summary = b["comparison"]["pairing"]
    assert summary["paired"] >= len(pairing.pairs)  # the run's own comparison (all experiments) says so too
