"""The RAG arm's material: sentence-aligned chunks of ~N tokens, the terms they are indexed by, recall facts.

Standard library only (the retrievers are in :mod:`.retrievers`). Chunks are verbatim slices of their document,
cut at sentence or line boundaries (a sentence longer than a chunk is cut between words), so a gold answer is
split across chunks only when its own sentence is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_longctx.experiments.docs.scorers import normalize_answer

CHUNK_TOKENS = 200
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"”')\]]*\s+|\n+")
_TERM = re.compile(r"\w+")
STOPWORDS = frozenset("""a an and are as at be but by did do does for from had has have how i in is it its of on or
that the their there these this to was were what when where which who whom whose why will with""".split())


@dataclass(frozen=True)
class Chunk:
    """A verbatim slice of one document."""

    doc: str
    index: int
    text: str
    tokens: int

    @property
    def id(self) -> str:
        return f"{self.doc}#{self.index}"


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence or line of ``text``, whitespace between them left out."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if text[start:match.start()].strip():
            spans.append((start, match.start()))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return spans


def _word_windows(text: str, span: tuple[int, int], tokens: int, size: int) -> list[tuple[int, int, int]]:
    """Cut one over-long span between words into pieces of about ``size`` tokens."""
    words = [(m.start() + span[0], m.end() + span[0]) for m in re.finditer(r"\S+", text[span[0]:span[1]])]
    per = max(1, int(len(words) * size / tokens))
    pieces = []
    for i in range(0, len(words), per):
        group = words[i:i + per]
        pieces.append((group[0][0], group[-1][1], math.ceil(tokens * len(group) / len(words))))
    return pieces


def chunk_document(doc: str, text: str, count_tokens: Callable[[str], int], size: int = CHUNK_TOKENS) -> list[Chunk]:
    """Pack consecutive sentences into chunks of at most ``size`` tokens (sum of sentence counts)."""
    pieces: list[tuple[int, int, int]] = []
    for span in sentence_spans(text):
        n = count_tokens(text[span[0]:span[1]])
        pieces.extend(_word_windows(text, span, n, size) if n > size else [(span[0], span[1], n)])
    chunks: list[Chunk] = []
    group: list[tuple[int, int, int]] = []

    def close() -> None:
        if group:
            chunks.append(Chunk(doc, len(chunks), text[group[0][0]:group[-1][1]], sum(p[2] for p in group)))
            group.clear()

    for piece in pieces:
        if group and sum(p[2] for p in group) + piece[2] > size:
            close()
        group.append(piece)
    close()
    return chunks


def terms(text: str) -> list[str]:
    """Lower-cased word terms without stopwords, plural -s folded (``policies`` → ``policy``)."""
    out = []
    for word in _TERM.findall(text.lower()):
        if word in STOPWORDS:
            continue
        if len(word) > 4 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def retrieval_detail(retrieved: Sequence[Chunk], answer_doc: str, golds: Sequence[str]) -> dict[str, object]:
    """Recall facts for the trial record.

    ``retrieval_recall`` is 1 when a retrieved chunk of the answer document contains a gold answer
    (normalized); ``retrieved_answer_doc`` is 1 when any chunk of the answer document was retrieved.
    """
    wanted = [f" {normalize_answer(g)} " for g in golds if normalize_answer(g)]
    rank = next((i + 1 for i, c in enumerate(retrieved) if c.doc == answer_doc
                 and any(w in f" {normalize_answer(c.text)} " for w in wanted)), None)
    return {"retrieval_recall": int(rank is not None), "retrieval_rank": rank,
            "retrieved_answer_doc": int(any(c.doc == answer_doc for c in retrieved)),
            "retrieved": [c.id for c in retrieved]}
