"""Lost in the middle on plain values: the paper's prompts (snapshots, and byte-for-byte against the source
repository when its mirror is here), its metric, context building, the cell plan and its options' errors.

Update the snapshots deliberately with ``pytest tests/test_litm_units.py --snapshot-update``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.litm import data, prompts
from pytest_longctx.experiments.litm.contexts import Bm25, kv_records, qa_documents
from pytest_longctx.experiments.litm.data import KvRow, corpus_file, load_kv, load_questions, sample_order
from pytest_longctx.experiments.litm.metric import best_subspan_em, kv_correct, normalize_answer
from pytest_longctx.experiments.litm.plan import LitmOptions, kv_cells, parse_options, qa_cells
from tests.corpus_data import find_for_tests

MIRROR = Path("/work/.mirror/nelson-liu+lost-in-the-middle/repo")


@pytest.fixture(scope="module")
def pool(pytestconfig: pytest.Config) -> Bm25:
    return Bm25(load_questions(find_for_tests(pytestconfig, corpus_file("qa"))))


@pytest.fixture(scope="module")
def kv75(pytestconfig: pytest.Config) -> list[KvRow]:
    return load_kv(find_for_tests(pytestconfig, corpus_file("kv-75")))


# --- prompts ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("template", prompts.TEMPLATES, ids=lambda t: t.id)
def test_templates_are_the_source_files_word_for_word(template: prompts.Template) -> None:
    if not MIRROR.is_dir():
        pytest.skip(f"the source repository's mirror is not at {MIRROR}")
    path, commit = template.source.split(" @ ")
    text = subprocess.run(["git", "-C", str(MIRROR), "show", f"{data.COMMIT}:{path}"], capture_output=True,
                          text=True, check=True).stdout
    assert data.COMMIT.startswith(commit)
    assert template.text == text


def test_rendered_prompts(snapshot: object) -> None:
    docs = [("Title A", "Text of A."), ("Title {B}", "Text of B.")]
    records = [("k1", "v1"), ("k2", "v2"), ("k3", "v3")]
    rendered = {
        "qa": prompts.qa_request("who wrote {this}?", docs).to_json(),
        "closedbook": prompts.qa_request("who wrote it?", []).to_json(),
        "kv": prompts.kv_request(records, "k2").to_json(),
    }
    assert rendered == snapshot


@pytest.mark.e2e
def test_qa_prompt_on_the_corpus_for_a_fixed_seed(pool: Bm25, snapshot: object) -> None:
    question = pool.questions[sample_order(len(pool.questions), 0, "qa")[0]]
    docs = qa_documents(question, pool, 10, 4, 0)
    assert prompts.qa_request(question.question, [(d.title, d.text) for d in docs]).messages[0].content == snapshot


def test_kv_records_format_as_in_the_source() -> None:
    text = prompts.format_kv_records([("a", "1"), ("b", "2"), ("c", "3")])
    assert text == '{"a": "1",\n "b": "2",\n "c": "3"}'


# --- metric ----------------------------------------------------------------------------------------------

def test_normalize_answer_is_squad_normalisation() -> None:
    assert normalize_answer("The  Beatles!") == "beatles"
    assert normalize_answer("An apple, a Day") == "apple day"
    assert normalize_answer("theatre") == "theatre"


@pytest.mark.parametrize(("prediction", "answers", "expected"), [
    ("It was Wilhelm Conrad Röntgen, in 1901.", ["Wilhelm Conrad Röntgen"], True),
    ("wilhelm conrad röntgen", ["Wilhelm Conrad Röntgen"], True),
    ("Röntgen", ["Wilhelm Conrad Röntgen"], False),
    ("the 1890s", ["1890s", "the 1890s"], True),
    ("in 1890", ["1890s"], False),
    ("I don't know.", ["yes"], False),
])
def test_best_subspan_em(prediction: str, answers: list[str], expected: bool) -> None:
    assert best_subspan_em(prediction, answers) is expected


def test_kv_value_anywhere_in_the_response_case_insensitive() -> None:
    assert kv_correct("9f0e-AB", 'The value is "9F0E-ab".')
    assert not kv_correct("9f0e-ab", "9f0e")


# --- contexts --------------------------------------------------------------------------------------------

@pytest.mark.e2e
@pytest.mark.parametrize(("documents", "position"), [(10, 0), (10, 4), (10, 9), (20, 14), (30, 29)])
def test_gold_exactly_once_at_its_position_and_no_answer_elsewhere(pool: Bm25, documents: int,
                                                                   position: int) -> None:
    for index in sample_order(len(pool.questions), 7, "qa")[:15]:
        question = pool.questions[index]
        docs = qa_documents(question, pool, documents, position, 7)
        assert len(docs) == documents
        assert [i for i, d in enumerate(docs) if d.gold] == [position]
        assert docs[position].text == question.text
        assert sum(d.text == question.text for d in docs) == 1
        assert len({d.text for d in docs}) == documents
        for d in docs:
            if not d.gold:
                assert not best_subspan_em(f"{d.title} {d.text}", question.answers), (question.answers, d.title)


@pytest.mark.e2e
def test_distractors_are_the_same_at_every_position_and_deterministic(pool: Bm25) -> None:
    question = pool.questions[42]
    at0 = qa_documents(question, pool, 20, 0, 3)
    for position in (4, 19):
        moved = qa_documents(question, pool, 20, position, 3)
        assert [d for d in moved if not d.gold] == [d for d in at0 if not d.gold]
    assert qa_documents(question, pool, 20, 9, 3) == qa_documents(question, pool, 20, 9, 3)
    fresh = Bm25(pool.questions)
    assert fresh.distractors(question, 19, 3) == pool.distractors(question, 19, 3)


@pytest.mark.e2e
def test_distractors_are_relevant_to_the_question(pool: Bm25) -> None:
    """BM25 ranks passages sharing the question's words first (hard distractors, like the paper's)."""
    hits = 0
    for index in sample_order(len(pool.questions), 1, "qa")[:30]:
        question = pool.questions[index]
        top = pool.questions[pool.distractors(question, 1, 1)[0]]
        content = set(question.question.lower().split()) - {"the", "of", "in", "a", "who", "what", "when", "is"}
        hits += bool(content & set(f"{top.title} {top.text}".lower().split()))
    assert hits >= 27


@pytest.mark.e2e
def test_seed_decides_ties_only(pool: Bm25) -> None:
    question = pool.questions[5]
    a, b = pool.distractors(question, 9, 1), pool.distractors(question, 9, 2)
    scores = pool.scores(question.question)
    assert sorted(scores.get(i, 0.0) for i in a) == sorted(scores.get(i, 0.0) for i in b)


@pytest.mark.e2e
def test_kv_key_moves_to_its_position_others_keep_their_order(kv75: list[KvRow]) -> None:
    row = kv75[0]
    for position in (0, 24, 49, 74):
        records = kv_records(row, position)
        assert len(records) == 75 and records[position] == (row.key, row.value)
        assert [r for r in records if r[0] != row.key] == [r for r in row.records if r[0] != row.key]
    with pytest.raises(ValueError, match="outside"):
        kv_records(row, 75)


def test_sample_order_is_a_seeded_permutation() -> None:
    assert sample_order(50, 3, "qa") == sample_order(50, 3, "qa")
    assert sorted(sample_order(50, 3, "qa")) == list(range(50))
    assert sample_order(50, 3, "qa") != sample_order(50, 4, "qa")


# --- data files ------------------------------------------------------------------------------------------

def test_corpus_files_pin_the_commit_and_checksums(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = corpus_file("kv-140")
    assert spec.url == ("https://raw.githubusercontent.com/nelson-liu/lost-in-the-middle/"
                        "29b8a6d042ce29abccee3db1a73171a107d7e6af/kv_retrieval_data/kv-retrieval-140_keys.jsonl.gz")
    assert spec.sha256 == "66d54aae7e38779da482895ccd538faaf5309f144e54f30dc530a95091581fa1"
    monkeypatch.setenv(data.URL_ENV, "https://mirror.example/litm/{file}")
    assert corpus_file("qa").url == "https://mirror.example/litm/qa_data/nq-open-oracle.jsonl.gz"


@pytest.mark.e2e
def test_shipped_files_have_the_documented_rows(pool: Bm25, kv75: list[KvRow]) -> None:
    assert len(pool.questions) == 2655 and len(kv75) == 500
    assert {len(r.records) for r in kv75} == {75}


def test_missing_file_is_one_line_naming_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(data.URL_ENV, (tmp_path / "nowhere" / "{file}").as_uri().replace("%7B", "{").replace("%7D", "}"))
    with pytest.raises(UsageError) as info:
        data.locate("qa", data_dir=str(tmp_path), cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert "\n" not in message and "qa_data/nq-open-oracle.jsonl.gz" in message and "--longctx-data-dir" in message


def test_a_corrupt_file_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(UsageError, match=r"x\.jsonl\.gz"):
        load_questions(bad)


# --- plan and options ------------------------------------------------------------------------------------

def test_paper_positions_and_small_defaults() -> None:
    small, large = qa_cells(LitmOptions(), 8192), qa_cells(LitmOptions(), 200_000)
    assert small == [(0, None), (1, 0), (10, 0), (10, 4), (10, 9)]
    assert [c for c in large if c[0] == 30] == [(30, p) for p in (0, 4, 9, 14, 19, 24, 29)]
    assert kv_cells(LitmOptions(), 8192) == [(75, 0), (75, 24), (75, 49), (75, 74)]
    assert kv_cells(LitmOptions(), 200_000)[4:] == [(140, 0), (140, 34), (140, 69), (140, 104), (140, 139)]


def test_positions_all_and_lists() -> None:
    every = parse_options("10", "75", "all", "false")
    assert qa_cells(every, 8192) == [(10, p) for p in range(10)] and len(kv_cells(every, 8192)) == 75
    some = parse_options("10,20", None, "0,12", None)
    assert qa_cells(some, 8192)[2:] == [(10, 0), (20, 0), (20, 12)]


@pytest.mark.parametrize(("args", "flag"), [
    (("x", None, None, None), "--longctx-litm-documents"),
    (("1", None, None, None), "--longctx-litm-documents"),
    ((None, "300", None, None), "--longctx-litm-keys"),
    ((None, None, "middle", None), "--longctx-litm-positions"),
    ((None, None, "-1", None), "--longctx-litm-positions"),
    ((None, None, None, "maybe"), "--longctx-litm-baselines"),
])
def test_bad_option_values_are_one_line_errors(args: tuple[str | None, ...], flag: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_options(*args)
    assert str(info.value).startswith(flag) and "\n" not in str(info.value)


def test_positions_beyond_every_count_are_an_error() -> None:
    with pytest.raises(UsageError, match="none of 50 is below 10 documents"):
        qa_cells(parse_options("10", None, "50", None), 8192)
