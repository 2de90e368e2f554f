"""The RAG arm's retriever: sentence-aligned chunks and BM25."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.experiments.docs.documents import load_documents
from pytest_longctx.experiments.docs.retrieval import (
    BM25,
    Chunk,
    chunk_document,
    retrieval_detail,
    retrieve,
    sentence_spans,
    terms,
)

DOCS = Path(__file__).resolve().parent.parent / "fixtures" / "docs"


def words(text: str) -> int:
    return len(text.split())


def test_terms_drop_stopwords_and_fold_plurals() -> None:
    assert terms("What are the policies of the Clinics?") == ["policy", "clinic"]
    assert terms("Glass class 1,500") == ["glass", "class", "1", "500"]


def test_bm25_ranks_rare_matching_terms_first() -> None:
    corpus = [terms(t) for t in ("the mill was built by josiah penhallow", "the mill ground wheat and oats",
                                 "a recipe for rye bread", "mill mill mill mill")]
    index = BM25(corpus)
    assert index.top_k(terms("who built the mill"), 2) == [0, 3]
    assert index.top_k(terms("penhallow"), 1) == [0]
    assert index.scores(terms("sourdough")) == [0.0, 0.0, 0.0, 0.0]
    assert index.top_k(terms("sourdough"), 2) == [0, 1]  # ties: earlier first


def test_bm25_matches_the_formula() -> None:
    corpus = [["a", "b"], ["a", "a", "c"], ["d"]]
    index = BM25(corpus, k1=1.2, b=0.75)
    avgdl = 2.0
    idf_a = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    expected = idf_a * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 3 / avgdl))
    assert index.scores(["a"])[1] == pytest.approx(expected)


def test_sentence_spans_and_chunks_are_verbatim_and_bounded() -> None:
    text = "# Title\n\nFirst sentence here. Second one! Third?\n- item one\n- item two"
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "# Title", "First sentence here.", "Second one!", "Third?", "- item one", "- item two"]
    chunks = chunk_document("t.md", text, words, size=5)
    assert all(c.text in text and c.tokens <= 5 for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_long_sentence_is_cut_between_words() -> None:
    text = " ".join(f"w{i}" for i in range(50)) + "."
    chunks = chunk_document("long.txt", text, words, size=20)
    assert len(chunks) == 3 and all(c.tokens <= 20 for c in chunks)
    assert " ".join(c.text for c in chunks) == text


def test_fixture_chunks_are_about_200_tokens_and_retrieve_their_answers() -> None:
    counter = TiktokenCounter()
    docs = load_documents(DOCS)
    chunks = [c for d in docs for c in chunk_document(d.name, d.text, counter.count)]
    assert all(c.tokens <= 200 for c in chunks)
    assert sum(c.tokens for c in chunks) / len(chunks) > 100
    top = retrieve(chunks, "Who is the chief arbiter of the Eastfield Chess Club Winter Rapidplay?", 4)
    assert top[0].doc == "eastfield-chess-rules.md"
    detail = retrieval_detail(top, "eastfield-chess-rules.md", ["Margaret Osei"])
    assert detail["retrieval_recall"] == 1 and detail["retrieved_answer_doc"] == 1
    assert detail["retrieved"][0].startswith("eastfield-chess-rules.md#")


def test_retrieval_detail_needs_the_gold_in_a_chunk_of_the_answer_doc() -> None:
    chunks = [Chunk("a.md", 0, "Nothing here.", 3), Chunk("b.md", 0, "Old Maud is a starter.", 5),
              Chunk("a.md", 1, "The starter is Old Maud.", 5)]
    assert retrieval_detail(chunks[:2], "a.md", ["Old Maud"]) == {
        "retrieval_recall": 0, "retrieval_rank": None, "retrieved_answer_doc": 1, "retrieved": ["a.md#0", "b.md#0"]}
    assert retrieval_detail(chunks, "a.md", ["Old Maud"])["retrieval_rank"] == 3
