"""The Federal Register excerpt in fixtures/ splits as the issue does, so corpus-shaped tests need no corpora.

The fast tier reads the excerpt (44 KB, eight documents); the e2e tier checks that the excerpt is the issue's
documents byte for byte, cut by the folder's own ``cut.py``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.experiments.qa.experiment import QaData
from pytest_longctx.experiments.qa.federal_register import Issue, load_issue
from pytest_longctx.experiments.qa.questions import load_questions, validate
from tests.corpus_data import FR_DATE, FR_EXCERPT, QUESTIONS, assert_collages_within, assert_examples_in_context

#: The kept sections: the issue's first document (where the splitter's sections begin) and seven short ones
DOCUMENTS = ["2024-02930", "2024-02940", "2024-02795", "2024-02923", "2024-02768", "2024-02807", "2024-02775",
             "2024-02818"]


@pytest.fixture(scope="module")
def excerpt(tmp_path_factory: pytest.TempPathFactory) -> Issue:
    """The excerpt split by the plugin's own loader."""
    return load_issue(FR_EXCERPT, FR_DATE, TiktokenCounter(), tmp_path_factory.mktemp("fr-excerpt"))


@pytest.fixture(scope="module")
def qa(tmp_path_factory: pytest.TempPathFactory, excerpt: Issue) -> QaData:
    """qa's data over the excerpt with the shipped question set (its questions about the eight documents)."""
    counter = TiktokenCounter()
    return QaData.load(excerpt, load_questions(QUESTIONS), counter.count, counter.name,
                       tmp_path_factory.mktemp("qa"), 0, "fake/perfect")


def _cut_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fr_excerpt_cut", FR_EXCERPT.parent / "cut.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_excerpt_is_small_and_splits_like_the_issue(excerpt: Issue) -> None:
    assert FR_EXCERPT.stat().st_size < 100_000
    assert excerpt.raw_sections == 9  # eight documents and the tail after the last BILLING CODE
    assert [s.id for s in excerpt.sections] == DOCUMENTS
    assert [s.index for s in excerpt.sections] == list(range(8))
    assert all(200 < s.tokens <= 5000 for s in excerpt.sections)
    assert excerpt.total_tokens == 6_684
    assert excerpt.tokenizer == "tiktoken/cl100k_base"
    first = excerpt.sections[0].text
    assert first.startswith("DEPARTMENT OF TRANSPORTATION") and "Contents" not in first[:200]


def test_the_section_cache_is_reused_and_a_corrupt_one_rebuilt(tmp_path: Path, excerpt: Issue) -> None:
    counter = TiktokenCounter()
    assert load_issue(FR_EXCERPT, FR_DATE, counter, tmp_path).sections == excerpt.sections
    cache = next(tmp_path.glob("sections-*.json"))
    assert load_issue(FR_EXCERPT, FR_DATE, counter, tmp_path).sections == excerpt.sections
    cache.write_text("{not json")
    assert load_issue(FR_EXCERPT, FR_DATE, counter, tmp_path).sections == excerpt.sections


def test_the_shipped_questions_about_the_excerpt_validate(excerpt: Issue) -> None:
    sections = {s.id: s.text for s in excerpt.sections}
    questions = [q for q in load_questions(QUESTIONS) if q.section_id in sections]
    assert len(questions) == 5 * len(DOCUMENTS)
    assert validate(questions, sections) == []


@pytest.mark.parametrize("budget", [2000, 4000, 6000])
def test_a_collage_of_the_excerpt_stays_within_its_budget(qa: QaData, budget: int) -> None:
    assert_collages_within(qa, budget)


def test_context_examples_of_the_excerpt_come_from_sections_in_the_context(qa: QaData) -> None:
    assert_examples_in_context(qa, 6000, 3)


@pytest.mark.e2e
def test_the_excerpt_is_the_issues_documents_byte_for_byte(fr_xml: Path, excerpt: Issue,
                                                          tmp_path: Path) -> None:
    assert _cut_module().cut(fr_xml.read_text(encoding="utf-8")) == FR_EXCERPT.read_text(encoding="utf-8")
    issue = {s.id: s for s in load_issue(fr_xml, FR_DATE, TiktokenCounter(), tmp_path).sections}
    for section in excerpt.sections:
        # a section begins with the rest of the previous document's BILLING CODE line and the markup between the two
        # documents (whitespace in the text), where the excerpt may differ from the issue
        body = " ".join(section.text.split("\n", 1)[1].split())
        assert " ".join(issue[section.id].text.split()).endswith(body), section.id
