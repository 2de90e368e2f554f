"""The shipped question set passes its validation; the validators themselves can fail."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.qa.federal_register import load_issue
from pytest_longctx.experiments.qa.questions import Question, load_questions, longest_answer_share, validate
from tests.corpus_data import QUESTIONS


@pytest.fixture(scope="module")
def sections(tmp_path_factory: pytest.TempPathFactory, fr_xml: Path) -> dict[str, str]:
    issue = load_issue(fr_xml, "2024-02-12", TiktokenCounter(), tmp_path_factory.mktemp("fr"))
    return {s.id: s.text for s in issue.sections}


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    return load_questions(QUESTIONS)


def test_shipped_set_is_valid(questions, sections) -> None:
    assert validate(questions, sections) == []


def test_five_questions_per_kept_section_one_numerical(questions, sections) -> None:
    per = Counter(q.section_id for q in questions)
    numerical = Counter(q.section_id for q in questions if q.kind == "numerical")
    assert set(per) == set(sections)
    assert set(per.values()) == {5}
    assert set(numerical.values()) == {1}


def test_answer_is_rarely_the_longest_option(questions) -> None:
    assert longest_answer_share(questions) <= 0.34


def test_validator_catches_bad_items(sections) -> None:
    sid, text = next(iter(sections.items()))
    other = next(k for k in sections if k != sid)
    quote = " ".join(text.split()[20:32])
    good = Question("x/1", sid, "text", "What did the Coast Guard order?", "a", ("b", "c", "d"), quote)
    assert validate([good], sections) == []
    bad = [
        Question("x/2", sid, "text", "What does this document say?", "a", ("b", "c", "d"), quote),
        Question("x/3", sid, "text", "What did the Coast Guard order?", "a", ("a", "c", "d"), quote),
        Question("x/4", other, "text", "What did the Coast Guard order?", "a", ("b", "c", "d"), quote),
        Question("x/5", sid, "text", "What did the Coast Guard order?", "a", ("b", "c", "d"), "not in the text at all"),
    ]
    problems = validate(bad, sections)
    assert any("x/2" in p and "this document" in p for p in problems)
    assert any("x/3" in p and "distinct" in p for p in problems)
    assert any("x/4" in p and "not found" in p for p in problems)
    assert any("x/5" in p for p in problems)


def test_evidence_shared_with_another_section_is_rejected(sections) -> None:
    ids = sorted(sections)
    a, b = ids[0], ids[1]
    tail = " the same boilerplate sentence here."
    shared = {a: sections[a] + tail, b: sections[b] + tail}
    q = Question("x/6", a, "text", "What about the FAA?", "a", ("b", "c", "d"), "the same boilerplate sentence here.")
    assert any("also occurs" in p for p in validate([q], shared))


def test_malformed_question_file_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "a"}) + "\n")
    with pytest.raises(UsageError, match=r"q.jsonl:1: missing field"):
        load_questions(path)
    path.write_text("{not json\n")
    with pytest.raises(UsageError, match=r"q.jsonl:1: invalid JSON"):
        load_questions(path)
