"""Lexical overlap of a question with its answer passage: content words and BM25.

The answer passage is the first sentence (or line) of the answer document holding a gold answer: the needle, in
NoLiMa's terms. Two measures, as NoLiMa and Context Rot report them:

* ``content_overlap``: the share of the question's content words (:func:`~.retrieval.terms`: stopwords dropped,
  plurals folded) that occur in the passage; 0 shares none, 1 all.
* ``bm25``: the passage's BM25 score for the question (``bm25s``, Lucene's variant, k1 1.5, b 0.75) in an index of
  every sentence of the folder, so the idf is the folder's.

A paraphrase whose content overlap is above :data:`FLAG_ABOVE` is flagged for review: it still shares most of its
words with the passage, so it does not test what the low-overlap condition is for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_longctx.experiments.docs.retrieval import Chunk, sentence_spans, terms
from pytest_longctx.experiments.docs.scorers import normalize_answer

#: A paraphrase sharing more than a third of its content words with the answer passage is flagged (the shipped
#: folder's literal questions share 0.42 of theirs with the answer sentence on average, half of them more than 1/3).
FLAG_ABOVE = 1 / 3


def sentences(doc: str, text: str) -> list[Chunk]:
    """The sentences (and lines) of a document as passages (``tokens`` unused: 0)."""
    return [Chunk(doc, i, text[a:b], 0) for i, (a, b) in enumerate(sentence_spans(text))]


def answer_passage(chunks: Sequence[Chunk], doc: str, golds: Sequence[str]) -> Chunk | None:
    """The first passage of ``doc`` that holds a gold answer (normalized, word-aligned), or None."""
    wanted = [f" {normalize_answer(g)} " for g in golds if normalize_answer(g)]
    return next((c for c in chunks if c.doc == doc and any(w in f" {normalize_answer(c.text)} " for w in wanted)),
                None)


def content_overlap(question: str, passage: str) -> float:
    """Share of the question's distinct content words found in the passage (0 for a question without any)."""
    asked = set(terms(question))
    return len(asked & set(terms(passage))) / len(asked) if asked else 0.0


class OverlapIndex:
    """BM25 over every passage (sentence) of a folder, for measuring questions against their answer passages."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        import bm25s

        self.chunks = list(chunks)
        self.position = {c.id: i for i, c in enumerate(self.chunks)}
        self.index = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
        self.index.index([terms(c.text) or ["\x00"] for c in self.chunks], show_progress=False)

    def bm25(self, question: str, passage: Chunk) -> float:
        query = [t for t in terms(question) if t in self.index.vocab_dict]
        if not query:
            return 0.0
        return float(self.index.get_scores(query)[self.position[passage.id]])

    def measure(self, question: str, doc: str, golds: Sequence[str]) -> dict[str, Any]:
        """``{"content_overlap", "bm25"}`` of ``question`` against its answer passage (None without a passage)."""
        passage = answer_passage(self.chunks, doc, golds)
        if passage is None:
            return {"content_overlap": None, "bm25": None}
        return {"content_overlap": round(content_overlap(question, passage.text), 3),
                "bm25": round(self.bm25(question, passage), 3)}


def flagged(overlap: float | None) -> bool:
    """Whether a paraphrase's content overlap is above :data:`FLAG_ABOVE`."""
    return overlap is not None and overlap > FLAG_ABOVE
