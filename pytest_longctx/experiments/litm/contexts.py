"""Building the paper's contexts: documents with the gold passage at a position, records with the key at one.

The paper's distractors are Contriever-retrieved Wikipedia passages that do not contain an answer; those
files are not available, so distractors here come from the oracle file itself: the other questions' gold
passages that contain none of this question's answers (by the metric's own test, so a distractor can never
score), ranked by BM25 relevance to the question (title + text; k1 0.9, b 0.4 as in Pyserini), ties broken
by a hash of the seed. Like the paper, the N-1 best distractors keep their rank order and the gold passage
is inserted at the requested index, so one question has the same distractors at every position.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_longctx.experiments.litm.data import KvRow, Question
from pytest_longctx.experiments.litm.metric import best_subspan_em

_WORD = re.compile(r"\w+")
#: Very common English words left out of queries (they rank nothing).
_STOP = frozenset("a an and are as at be by did do does for from had has have how in is it its of on or that the "
                  "this to was were what when where which who whom whose why will with".split())
#: What the record says about the distractors (the paper's retrieved-distractor files are not available).
DISTRACTORS_NOTE = ("other NQ-Open questions' gold passages without an answer, ranked by BM25 relevance "
                    "(the paper: Contriever-retrieved Wikipedia passages)")
K1 = 0.9
B = 0.4


def words(text: str) -> list[str]:
    """Lower-case word tokens."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Document:
    """One search result: a title and a passage, and whether it is the gold one."""

    title: str
    text: str
    gold: bool = False


class Bm25:
    """A BM25 index over the oracle file's gold passages (one per question)."""

    def __init__(self, questions: Sequence[Question]) -> None:
        self.questions = list(questions)
        self._tf = [Counter(words(f"{q.title} {q.text}")) for q in self.questions]
        lengths = [sum(tf.values()) for tf in self._tf]
        self._norm = [K1 * (1 - B + B * n / (sum(lengths) / max(len(lengths), 1))) for n in lengths]
        df: Counter[str] = Counter()
        self._postings: dict[str, list[int]] = {}
        for i, tf in enumerate(self._tf):
            for word in tf:
                df[word] += 1
                self._postings.setdefault(word, []).append(i)
        n = len(self.questions)
        self._idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}

    def scores(self, query: str) -> dict[int, float]:
        """BM25 score of every passage sharing a word with ``query``."""
        out: dict[int, float] = {}
        for word in sorted(set(words(query)) - _STOP):
            idf = self._idf.get(word, 0.0)
            for i in self._postings.get(word, ()):
                tf = self._tf[i][word]
                out[i] = out.get(i, 0.0) + idf * tf * (K1 + 1) / (tf + self._norm[i])
        return out

    def distractors(self, question: Question, count: int, seed: int) -> list[int]:
        """Indices of the ``count`` most relevant passages that contain none of ``question``'s answers.

        Raises:
            ValueError: fewer than ``count`` such passages exist.
        """
        if count <= 0:
            return []
        scores = self.scores(question.question)

        def rank(i: int) -> tuple[float, str]:
            tie = hashlib.sha256(f"{seed}:{question.index}:{i}".encode()).hexdigest()
            return (-scores.get(i, 0.0), tie)

        chosen: list[int] = []
        seen = {question.text}
        for i in sorted(range(len(self.questions)), key=rank):
            other = self.questions[i]
            if i == question.index or other.text in seen:
                continue
            if best_subspan_em(f"{other.title} {other.text}", question.answers):
                continue
            seen.add(other.text)
            chosen.append(i)
            if len(chosen) == count:
                return chosen
        raise ValueError(f"only {len(chosen)} passages without an answer to question {question.index}, "
                         f"{count} needed")


def qa_documents(question: Question, pool: Bm25, documents: int, gold_position: int, seed: int) -> list[Document]:
    """``documents`` search results with the gold passage at index ``gold_position`` (0-based)."""
    if not 0 <= gold_position < documents:
        raise ValueError(f"gold position {gold_position} is outside 0..{documents - 1}")
    distractors = [Document(pool.questions[i].title, pool.questions[i].text)
                   for i in pool.distractors(question, documents - 1, seed)]
    distractors.insert(gold_position, Document(question.title, question.text, gold=True))
    return distractors


def kv_records(row: KvRow, key_position: int) -> list[tuple[str, str]]:
    """The row's records with the key to retrieve moved to index ``key_position`` (others keep their order)."""
    if not 0 <= key_position < len(row.records):
        raise ValueError(f"key position {key_position} is outside 0..{len(row.records) - 1}")
    records = [r for r in row.records if r[0] != row.key]
    records.insert(key_position, (row.key, row.value))
    return records
