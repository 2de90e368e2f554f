"""The RAG arm: sentence-aligned chunks, and the maintained retrievers (bm25s, wordllama, their fusion, a hook's)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.docs.documents import load_documents
from pytest_longctx.experiments.docs.retrieval import Chunk, chunk_document, retrieval_detail, sentence_spans, terms
from pytest_longctx.experiments.docs.retrievers import DenseRetriever, SparseRetriever, fuse, make_retriever

DOCS = Path(__file__).resolve().parent.parent / "fixtures" / "docs"


def words(text: str) -> int:
    return len(text.split())


def test_terms_drop_stopwords_and_fold_plurals() -> None:
    assert terms("What are the policies of the Clinics?") == ["policy", "clinic"]
    assert terms("Glass class 1,500") == ["glass", "class", "1", "500"]


def test_bm25_ranks_rare_matching_terms_first() -> None:
    texts = ("the mill was built by josiah penhallow", "the mill ground wheat and oats", "a recipe for rye bread",
             "mill mill mill mill")
    chunks = [Chunk("d.md", i, t, 8) for i, t in enumerate(texts)]
    sparse = SparseRetriever()
    assert sparse.order("who built the mill", chunks)[:2] == [0, 3]
    assert sparse.rank("penhallow", chunks, 1) == [chunks[0]]
    assert sparse.order("sourdough", chunks) == [0, 1, 2, 3]  # no term known: the context's order


def test_bm25_matches_the_lucene_formula() -> None:
    chunks = [Chunk("d.md", 0, "alpha beta", 2), Chunk("d.md", 1, "alpha alpha gamma", 3), Chunk("d.md", 2, "delta", 1)]
    import bm25s

    index = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    index.index([terms(c.text) for c in chunks], show_progress=False)
    avgdl = 2.0
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    expected = idf * 2 / (2 + 1.5 * (1 - 0.75 + 0.75 * 3 / avgdl))  # Lucene drops the (k1 + 1) factor
    assert float(index.get_scores(["alpha"])[1]) == pytest.approx(expected, rel=1e-5)
    assert SparseRetriever().order("alpha", chunks)[0] == 1


def test_dense_retriever_loads_offline_and_ranks_by_meaning() -> None:
    chunks = [Chunk("d.md", 0, "The bakery opens at seven and sells rye loaves.", 10),
              Chunk("d.md", 1, "Pedalworks Ltd operated the electric bicycle scheme.", 10),
              Chunk("d.md", 2, "The river cleanup collected plastic bottles.", 10)]
    dense = DenseRetriever()
    assert dense.rank("which company ran the e-bike hire programme", chunks, 1) == [chunks[1]]
    assert set(dense._cache) == {c.id for c in chunks}  # each chunk embedded once, then cached


def test_reciprocal_rank_fusion_rewards_agreement_and_breaks_ties_by_place() -> None:
    assert fuse([[0, 1, 2], [1, 0, 2]], 3) == [0, 1, 2]  # 0 and 1 tie: the earlier first
    assert fuse([[2, 1, 0], [1, 2, 0]], 3) == [1, 2, 0]  # tie again between 1 and 2: place decides
    assert fuse([[2, 0, 1], [2, 1, 0]], 3)[0] == 2
    assert fuse([[0, 1, 2], [0, 2, 1]], 3) == [0, 1, 2]


def test_hook_retriever_takes_plain_passages_and_refuses_foreign_ids() -> None:
    chunks = [Chunk("a.md", 0, "one", 1), Chunk("b.md", 0, "two", 1)]
    seen: list[list[dict[str, str]]] = []

    def mine(question: str, passages: list[dict[str, str]], k: int) -> list[str]:
        seen.append(passages)
        return [p["id"] for p in reversed(passages)][:k]

    assert make_retriever("mine", mine).rank("q", chunks, 1) == [chunks[1]]
    assert seen[0] == [{"id": "a.md#0", "doc": "a.md", "text": "one"}, {"id": "b.md#0", "doc": "b.md", "text": "two"}]
    with pytest.raises(ValueError, match="not among the passages"):
        make_retriever("bad", lambda q, p, k: ["z#9"]).rank("q", chunks, 1)
    with pytest.raises(UsageError, match="no retriever 'nope'"):
        make_retriever("nope")


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
    question = "Who is the chief arbiter of the Eastfield Chess Club Winter Rapidplay?"
    for retriever in ("bm25", "dense", "hybrid"):
        assert make_retriever(retriever).rank(question, chunks, 4)[0].doc == "eastfield-chess-rules.md", retriever
    top = make_retriever("hybrid").rank(question, chunks, 4)
    detail = retrieval_detail(top, "eastfield-chess-rules.md", ["Margaret Osei"])
    assert detail["retrieval_recall"] == 1 and detail["retrieved_answer_doc"] == 1
    assert detail["retrieved"][0].startswith("eastfield-chess-rules.md#")


def test_retrieval_detail_needs_the_gold_in_a_chunk_of_the_answer_doc() -> None:
    chunks = [Chunk("a.md", 0, "Nothing here.", 3), Chunk("b.md", 0, "Old Maud is a starter.", 5),
              Chunk("a.md", 1, "The starter is Old Maud.", 5)]
    assert retrieval_detail(chunks[:2], "a.md", ["Old Maud"]) == {
        "retrieval_recall": 0, "retrieval_rank": None, "retrieved_answer_doc": 1, "retrieved": ["a.md#0", "b.md#0"]}
    assert retrieval_detail(chunks, "a.md", ["Old Maud"])["retrieval_rank"] == 3


@given(st.integers(1, 12).flatmap(lambda n: st.lists(st.permutations(list(range(n))), min_size=1, max_size=4)))
def test_fusion_is_a_ranking_that_keeps_unanimous_orders(rankings: list[list[int]]) -> None:
    n = len(rankings[0])
    fused = fuse(rankings, n)
    assert sorted(fused) == list(range(n))
    if all(r == rankings[0] for r in rankings):
        assert fused == rankings[0]
    first = [r[0] for r in rankings]
    if len(set(first)) == 1:  # every ranking puts one item first: so does the fusion
        assert fused[0] == first[0]
