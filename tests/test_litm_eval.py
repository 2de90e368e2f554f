"""``pytest evals/litm`` end to end against ``anthropic/claude-test``, answered by the local Messages-API server.

The server's model reads only the first and the last document (key-value record) of each prompt: right
exactly when the relevant one is first or last, so the run record must show
the U curve, 1.0 at both ends and 0.0 between, closed-book 0.0 and oracle 1.0; any other value is a fault.
Also: the figure and tables built from that record, in the run's own HTML report (through the hooks), option
errors, and a missing corpus.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.experiments.litm.data import corpus_file, load_questions
from pytest_longctx.experiments.litm.figure import litm_figures
from pytest_longctx.experiments.litm.metric import best_subspan_em
from pytest_longctx.experiments.litm.report import litm_tables
from pytest_longctx.server.responders import last_user_text
from tests.corpus_data import ROOT, find_for_tests
from tests.passkey_api import MODEL

EVALS = ROOT / "evals" / "litm"
_DOCUMENT = re.compile(r"^Document \[\d+\]\(Title: .*?\) (.*)$", re.M)
_QUESTION = re.compile(r"^Question: (.*)$", re.M)
_RECORD = re.compile(r'^[{ ]"[^"]+": "([^"]+)"[,}]$', re.M)


def ends_model(answers: dict[str, tuple[str, ...]]) -> Any:
    """A model that reads only the first and the last document (record); closed-book it does not know.

    Given the question's answers (a test double may know them), it answers with the first one when the first
    or last document holds it, else with the first document's opening sentence, which holds no answer.
    """
    def respond(body: dict[str, Any]) -> str:
        prompt = last_user_text(body)
        documents = _DOCUMENT.findall(prompt)
        if documents:
            gold = answers[_QUESTION.findall(prompt)[-1]]
            ends = (documents[0], documents[-1])
            return gold[0] if any(best_subspan_em(d, gold) for d in ends) else documents[0].split(".")[0]
        records = _RECORD.findall(prompt)
        return f"{records[0]} | {records[-1]}" if records else "I don't know."
    return respond


@pytest.fixture(scope="module")
def litm_data_dir(pytestconfig: pytest.Config) -> Path:
    """The corpus folder (found through the plugin's lookup, else a one-line skip)."""
    path = find_for_tests(pytestconfig, corpus_file("qa"))
    for name in ("kv-75", "kv-140"):
        find_for_tests(pytestconfig, corpus_file(name))
    return path.parents[1]


@pytest.mark.e2e
@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "n2"])
def test_u_curve_through_the_local_messages_api(longctx_runner: Any, api: Any, litm_data_dir: Path,
                                                xdist: list[str], tmp_path: Path) -> None:
    questions = load_questions(litm_data_dir / corpus_file("qa").file)
    srv = api(ends_model({q.question: q.answers for q in questions}))
    run = longctx_runner.run(str(EVALS), "--longctx-data-dir", str(litm_data_dir), "--longctx-samples", "4",
                             "--longctx-litm-documents", "10,20", "--longctx-litm-keys", "75",
                             "--longctx-litm-design", "full", *xdist, model=MODEL, subprocess=True)
    assert run.ret == 0, run.result.stdout.str()  # wrong answers are data (no gate set); errors would show below
    record = run.record
    expected_qa = {(0, None): 0, (1, 0): 4, (10, 0): 4, (10, 4): 0, (10, 9): 4,
                   (20, 0): 4, (20, 4): 0, (20, 9): 0, (20, 14): 0, (20, 19): 4}
    for (documents, position), correct in expected_qa.items():
        cell = run.cell("litm-qa", documents=documents, gold_position=position)
        assert (cell["n"], cell["correct"], cell["errors"]) == (4, correct, 0), cell
    for position, correct in {0: 4, 24: 0, 49: 0, 74: 4}.items():
        cell = run.cell("litm-kv", keys=75, key_position=position)
        assert (cell["n"], cell["correct"], cell["errors"]) == (4, correct, 0), cell
    assert len(record["cells"]) == len(expected_qa) + 4
    assert srv.stats.endpoints.get("messages") == 4 * (len(expected_qa) + 4)  # prefetch off
    # paired: trial i asks the same question (row) in every cell of a task
    items: dict[tuple[str, int], set[str]] = {}
    for t in record["trials"]:
        task = t["experiment"] if t["experiment"] == "litm-kv" or t["params"]["documents"] else "closed"
        items.setdefault((task, t["sample"]), set()).add(t["item"])
    assert all(len(v) == 1 for v in items.values()), items
    assert items[("closed", 0)] == items[("litm-qa", 0)]
    templates = {t["detail"]["template"] for t in record["trials"]}
    assert templates == {"litm-qa@1", "litm-closedbook@1", "litm-kv@1"}
    assert all("BM25" in t["detail"]["distractors"] for t in record["trials"] if t["experiment"] == "litm-qa")
    figures = litm_figures(record["cells"])
    assert len(figures) == 2 and all(f.svg.count('class="curve"') for f in figures)
    assert figures[0].svg.count('class="curve"') == 2 and figures[0].svg.count('class="ref"') == 2
    # the run's own HTML report shows them, reached through the hooks (pytest_longctx_report_sections/_tables)
    html = (run.report_dir / "longctx.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="exp-litm">'):]
    section = section[:section.index("</section>")]
    assert "<h2>Lost in the middle (litm-qa, litm-kv)</h2>" in section
    assert section.count('class="curve"') == 3 and section.count('class="ref"') == 2  # 2 QA lines, 1 KV
    assert "Multi-document QA: accuracy vs position" in section and "Key-value retrieval: accuracy vs" in section
    assert [t["title"] for t in record["tables"]] == [t["title"] for t in litm_tables(record["cells"], [])]
    assert all(escape(t["title"]) in section for t in record["tables"])


@pytest.mark.e2e
def test_same_seed_same_record(longctx_runner: Any, litm_data_dir: Path) -> None:
    """Every random choice flows from --longctx-seed: two runs ask the same prompts, another seed does not."""
    args = (str(EVALS), "--longctx-data-dir", str(litm_data_dir), "--longctx-samples", "2")
    first, second = (longctx_runner.run(*args, "--longctx-seed", "5", model="fake/random") for _ in range(2))
    other = longctx_runner.run(*args, "--longctx-seed", "6", model="fake/random")
    assert first.ret in (0, 1) and first.trials() == second.trials()
    assert [t["item"] for t in first.trials()] != [t["item"] for t in other.trials()]


@pytest.mark.e2e
def test_prompt_over_the_window_is_a_trial_error_not_a_wrong_answer(longctx_runner: Any, litm_data_dir: Path) -> None:
    run = longctx_runner.run(str(EVALS), "--longctx-data-dir", str(litm_data_dir), "--longctx-samples", "1",
                             "--longctx-litm-documents", "30", "--longctx-context-window", "3000",
                             "--longctx-litm-baselines", "false", "-k", "qa")
    cells = [c for c in run.record["cells"] if c["experiment"] == "litm-qa"]
    assert cells and all(c["errors"] == 1 and c["n"] == 0 for c in cells)
    errors = [t["error"] for t in run.record["trials"]]
    assert all("over the model's 3,000-token window" in e and "--longctx-litm-documents" in e for e in errors)


@pytest.mark.parametrize(("args", "text"), [
    (("--longctx-litm-positions", "middle"), "--longctx-litm-positions: expected paper, all or indices"),
    (("--longctx-litm-keys", "300"), "--longctx-litm-keys: 300 keys has no data file"),
])
def test_bad_options_are_usage_errors(longctx_runner: Any, args: tuple[str, ...], text: str) -> None:
    run = longctx_runner.run(str(EVALS), *args)
    assert run.ret == 4
    assert text in run.result.stderr.str() and "Traceback" not in run.result.stderr.str()


@pytest.mark.e2e
def test_missing_corpus_skips_each_experiment_with_one_line(longctx_runner: Any, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGCTX_LITM_URL", "file:///nonexistent-litm/{file}")
    monkeypatch.setenv("LONGCTX_DATA_DIR", str(tmp_path))  # else the repository's conftest.py points at ../shared
    run = longctx_runner.run(str(EVALS), "--longctx-data-dir", str(tmp_path), cache=True, subprocess=True)
    out = run.result.stdout.str() + run.result.stderr.str()
    assert run.ret == 5, out  # nothing left to run: no tests collected
    looked = (f" in --longctx-data-dir {tmp_path}, $LONGCTX_DATA_DIR={tmp_path} or the cache "
              f"{longctx_runner.pytester.path / 'cache' / 'corpora' / 'lost_in_the_middle'}")
    for line in ("litm-qa not run: lost_in_the_middle/qa_data/nq-open-oracle.jsonl.gz not found"
                 f"{looked}; get it with `",
                 "litm-kv not run: lost_in_the_middle/kv_retrieval_data/kv-retrieval-75_keys.jsonl.gz, "
                 f"lost_in_the_middle/kv_retrieval_data/kv-retrieval-140_keys.jsonl.gz not found{looked}; "
                 "get them with `"):
        assert out.count(line) == 1, out
    assert out.count("longctx-data fetch litm`") == 2, out
    assert "Traceback" not in out and not (longctx_runner.pytester.path / "cache" / "corpora").exists()


def test_help_lists_the_options(longctx_runner: Any) -> None:
    result = longctx_runner.pytester.runpytest_subprocess("--help")
    text = result.stdout.str()
    for flag in ("--longctx-litm-documents", "--longctx-litm-keys", "--longctx-litm-positions",
                 "--longctx-litm-baselines", "--longctx-litm-design"):
        assert flag in text
