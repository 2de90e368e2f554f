"""The docs knobs and retrievers end to end: the repository's ``evals/docs`` in a pytester project, answered by the
local Messages-API server's graded model (``graded:``), read back from the run record and the terminal summary.

At ``rho=1`` and ``flip=0`` the graded model gets an item right in every cell or in none, and which items it gets
right is known in advance (``draw(seed, "item", "docs", id) < accuracy``): so is every cell, the hallucination rate
(the removed cell's errors) and every distractor a miss answers (the server answers an inserted distractor's).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.server.graded import Graded
from pytest_longctx.util.grading import draw

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "docs"
MODEL = "anthropic/claude-sonnet-4-5"
ACCURACY, SEED = 0.6, 3

TOY_RETRIEVER = """
import json
from pathlib import Path


def pytest_longctx_retriever(config, name):
    if name != "toy":
        return None

    def toy(question, passages, k):
        # a user's collection would be queried here; the toy keeps the k longest passages
        chosen = [p["id"] for p in sorted(passages, key=lambda p: (-len(p["text"]), p["id"]))[:k]]
        with Path(__file__).with_name("toy-calls.jsonl").open("a") as fh:
            fh.write(json.dumps({"question": question, "ids": chosen}) + "\\n")
        return chosen

    return toy
"""


@pytest.fixture
def project(longctx_runner: Any, api: Any) -> Any:
    """The repository's evals/docs copied into a pytester project with a conftest offering the toy retriever, and
    the graded model behind the local server."""
    here = longctx_runner.pytester.path / "evals_docs"
    here.mkdir()
    for name in ("conftest.py", "test_docs.py", "test_docs_knobs.py"):
        shutil.copy(ROOT / "evals" / "docs" / name, here / name)
    longctx_runner.pytester.makeconftest(TOY_RETRIEVER)
    api(Graded(f"accuracy={ACCURACY},flip=0,seed={SEED},rho=1,docs-key={FIXTURES}"))
    return longctx_runner


def knows(item: str) -> bool:
    """Whether the graded model gets this item right (in every cell)."""
    return draw(SEED, "item", "docs", item) < ACCURACY


def run(project: Any, *args: str) -> Any:
    return project.run(*args, "--longctx-docs", str(FIXTURES), "--longctx-docs-judge", "false", model=MODEL)


def check_knobs(record: dict[str, Any], out: str) -> None:
    """Every knob cell as the rule decided, the hallucination line, the miss table and the overlap figures."""
    trials = [t for t in record["trials"] if t["experiment"] == "docs"]
    assert trials and not [t for t in trials if t["outcome"] == "error"]
    for t in trials:
        assert (t["outcome"] == "correct") == knows(t["item"]), t["nodeid"]
    cells = {json.dumps(c["params"], sort_keys=True): c for c in record["cells"]}
    removed, present = cells['{"answer_doc": "removed"}'], cells['{"answer_doc": "present"}']
    assert removed["correct"] == present["correct"] and 0 < removed["correct"] < removed["n"]
    rate = 1 - removed["accuracy"]
    assert (f"docs unanswerable: hallucination rate {rate:.3f} [{1 - removed['ci_high']:.3f}, "
            f"{1 - removed['ci_low']:.3f}] (answered with the answer document removed; {removed['n']} trials, "
            f"{removed['n']} items); accuracy on answerable {present['accuracy']:.3f}") in out
    halluc = next(t for t in record["tables"] if t["title"].startswith("docs unanswerable items"))["rows"]
    assert halluc[1][1] == f"{removed['n'] - removed['correct']}/{removed['n']} answered"
    assert halluc[1][2] == f"{rate:.3f} [{1 - removed['ci_high']:.3f}, {1 - removed['ci_low']:.3f}]"
    abstained = {t["item"]: t["detail"]["abstained"] for t in trials if t["params"].get("answer_doc") == "removed"}
    assert abstained == {i: knows(i) for i in abstained}  # right there is saying it is not there
    table = next(t for t in record["tables"] if t["title"].startswith("docs distractors"))
    for row in table["rows"]:  # distractors, accuracy, misses, answered #1..#4
        count, misses, answered = int(row[0]), int(row[2]), [int(x) for x in row[3:]]
        assert misses == row[1]["n"] - row[1]["correct"] > 0
        assert sum(answered) == (misses if count else 0) and not any(answered[count:])
    assert [r[0] for r in table["rows"]] == ["0", "1", "4"] and "docs distractors 0:" in out
    forms = next(t for t in record["tables"] if t["title"] == "docs literal vs low-overlap question")["rows"]
    assert [r[0] for r in forms] == ["literal", "low-overlap"] and forms[0][1] == forms[1][1]
    assert float(forms[0][2]) > 0.4 > 0.05 > float(forms[1][2]) and float(forms[0][3]) > float(forms[1][3])
    low = [t["detail"] for t in trials if t["params"].get("question_form") == "low-overlap"]
    assert all(d["question_form"] == "low-overlap" and d["content_overlap"] <= 1 / 3 for d in low)


def test_knobs_run_in_process_report_what_the_graded_model_decided(project: Any) -> None:
    ran = run(project, "evals_docs/test_docs_knobs.py", "-p", "no:xdist", "--longctx-samples", "28")
    assert ran.ret == 0, ran.result.stdout.str()
    record = ran.record
    assert sorted((json.dumps(c["params"]), c["n"]) for c in record["cells"]) == sorted([
        ('{"answer_doc": "present"}', 28), ('{"answer_doc": "removed"}', 28), ('{"distractors": 0}', 14),
        ('{"distractors": 1}', 14), ('{"distractors": 4}', 14), ('{"question_form": "literal"}', 28),
        ('{"question_form": "low-overlap"}', 28)])
    check_knobs(record, ran.result.stdout.str())


def test_abstention_is_gateable_with_the_threshold_grammar(project: Any) -> None:
    ran = run(project, "evals_docs/test_docs_knobs.py", "-p", "no:xdist", "--longctx-samples", "28", "-k",
              "unanswerable", "--longctx-threshold", "experiment=docs,answer_doc=removed:min=0.9")
    assert ran.ret == 10, ran.result.stdout.str()  # the graded model abstains on 60%: shown below 0.9
    ran = run(project, "evals_docs/test_docs_knobs.py", "-p", "no:xdist", "--longctx-samples", "28", "-k",
              "unanswerable", "--longctx-threshold", "experiment=docs,answer_doc=removed:min=0.2")
    assert ran.ret == 0, ran.result.stdout.str()


@pytest.mark.parametrize(("model", "args", "collected"), [
    (MODEL, [], 2 * 140 + 3 * 14 + 2 * 28),  # every qualifying item of the shipped folder in every knob cell
    (MODEL, ["--longctx-samples", "20"], 2 * 20 + 3 * 14 + 2 * 20),
    ("local/smollm2-135m", [], 0),  # the embedded model: left out, the main job keeps its time
    (MODEL, ["--longctx-protocol", "source"], 0),  # the write-up has none
])
def test_collection_of_the_knobs(pytester: pytest.Pytester, model: str, args: list[str], collected: int) -> None:
    result = pytester.runpytest_subprocess(str(ROOT / "evals" / "docs" / "test_docs_knobs.py"), "--collect-only",
                                           "-q", "-p", "no:cacheprovider", "--longctx-model", model, *args)
    if collected:
        result.stdout.fnmatch_lines([f"{collected} tests collected*"])
    else:
        result.stdout.fnmatch_lines(["no tests collected (* deselected)*"])


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid", "toy"])
def test_each_retriever_arm_end_to_end(project: Any, retriever: str) -> None:
    ran = run(project, "evals_docs/test_docs.py", "-p", "no:xdist", "-k", "context_size and rag and 100",
              "--longctx-samples", "6", "--longctx-docs-retriever", retriever)
    assert ran.ret == 0, ran.result.stdout.str()
    trials = ran.record["trials"]
    assert len(trials) == 6 and all(t["detail"]["retriever"] == retriever for t in trials)
    assert ran.record["settings"]["docs_retriever"] == retriever
    assert all(len(t["detail"]["retrieved"]) == 4 and t["detail"]["retrieval_recall"] in (0, 1) for t in trials)
    calls = project.pytester.path / "toy-calls.jsonl"
    if retriever == "toy":  # the hook's retriever chose every trial's passages
        chosen = [json.loads(line)["ids"] for line in calls.read_text().splitlines()]
        assert sorted(t["detail"]["retrieved"] for t in trials) == sorted(chosen)
    else:
        assert not calls.exists()
        recall = sum(t["detail"]["retrieval_recall"] for t in trials)
        assert recall >= 4, recall  # the shipped questions name their documents' words: found mostly


def test_an_unknown_retriever_is_a_usage_error(project: Any) -> None:
    ran = run(project, "evals_docs/test_docs.py", "--collect-only", "--longctx-docs-retriever", "chroma")
    assert ran.ret == 4
    err = ran.result.stderr.str()
    assert "--longctx-docs-retriever: no retriever 'chroma'; use bm25, dense or hybrid" in err
    assert "Traceback" not in err


@pytest.mark.e2e
def test_knobs_on_two_workers_are_the_same_trials(project: Any) -> None:
    ran = run(project, "evals_docs/test_docs_knobs.py", "-n", "2", "--longctx-samples", "28")
    assert ran.ret == 0, ran.result.stdout.str()
    check_knobs(ran.record, ran.result.stdout.str())
    alone = run(project, "evals_docs/test_docs_knobs.py", "-p", "no:xdist", "--longctx-samples", "28")

    def trials(record: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sorted((t["nodeid"], t["outcome"], t["item"], t["answer"]) for t in record["trials"])

    assert trials(ran.record) == trials(alone.record)
