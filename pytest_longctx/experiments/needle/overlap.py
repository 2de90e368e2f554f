"""Lexical overlap between a question and its needle: shared content words and BM25 of the needle for the question.

Content words: lower-case word runs, less a small stopword list and the name slot, crudely stemmed (a trailing
``s``, ``es``, ``ed``, ``ing`` removed when four letters stay). BM25 (k1 = 1.2, b = 0.75, Robertson-Sparck Jones
idf with +1 inside the log, so it is never negative) scores a needle against the question with the needles of
every pair and variant as the collection. Both are 0 when no content word is shared.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_longctx.experiments.needle.pairs import NAME_SLOT, VARIANTS, Pair

STOPWORDS = frozenset(
    "a an the and or but of to in on at by for from with without into onto over under up down out off as is are was "
    "were be been being has have had do does did which who whom whose what when where why how this that these those "
    "it its they them their there here one ones any some all every each no not only ever never than then so very "
    "can could will would should may might must shall character characters".split())
K1, B = 1.2, 0.75
_WORD = re.compile(r"[a-z]+")


def stem(word: str) -> str:
    """A crude stem: one common suffix off, if four letters remain."""
    for suffix in ("ing", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> list[str]:
    """Stemmed content words of ``text`` in order (the name slot dropped)."""
    return [stem(w) for w in _WORD.findall(text.replace(NAME_SLOT, " ").lower()) if w not in STOPWORDS]


@dataclass(frozen=True)
class Overlap:
    """One needle against its question."""

    pair: str
    variant: str
    shared: tuple[str, ...]
    bm25: float

    def to_row(self) -> list[str]:
        return [self.pair, self.variant, str(len(self.shared)), " ".join(self.shared) or "-", f"{self.bm25:.2f}"]


class Bm25:
    """BM25 over a collection of texts (their content words)."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.docs = [Counter(content_words(d)) for d in documents]
        self.avg = sum(sum(d.values()) for d in self.docs) / max(len(self.docs), 1)
        frequency = Counter(w for d in self.docs for w in d)
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in frequency.items()}

    def score(self, query: str, document: str) -> float:
        terms = Counter(content_words(document))
        length = sum(terms.values())
        total = 0.0
        for word in set(content_words(query)):
            tf = terms.get(word, 0)
            if tf:
                total += self.idf.get(word, 0.0) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / self.avg))
        return total


def overlaps(pairs: Sequence[Pair]) -> list[Overlap]:
    """Every pair's two needles against its question, pair by pair."""
    bm25 = Bm25([getattr(p, "needle" if v == "nonliteral" else "literal") for p in pairs for v in VARIANTS])
    out = []
    for pair in pairs:
        question = set(content_words(pair.question))
        for variant in VARIANTS:
            text = pair.needle if variant == "nonliteral" else pair.literal
            shared = tuple(sorted(question & set(content_words(text))))
            out.append(Overlap(pair.id, variant, shared, round(bm25.score(pair.question, text), 4)))
    return out


def summary(found: Sequence[Overlap]) -> dict[str, dict[str, float]]:
    """Per variant: mean shared words, share of needles sharing none, mean and max BM25."""
    out = {}
    for variant in VARIANTS:
        rows = [o for o in found if o.variant == variant]
        if rows:
            out[variant] = {"pairs": len(rows), "mean_shared": sum(len(o.shared) for o in rows) / len(rows),
                            "share_none": sum(not o.shared for o in rows) / len(rows),
                            "mean_bm25": sum(o.bm25 for o in rows) / len(rows), "max_bm25": max(o.bm25 for o in rows)}
    return out


def overlap_table(pairs: Sequence[Pair]) -> dict[str, Any]:
    """The per-item overlap table (the report's and the CLI's)."""
    found = overlaps(pairs)
    means = summary(found)
    note = "; ".join(f"{v}: mean shared words {s['mean_shared']:.2f}, none shared {s['share_none']:.0%}, "
                     f"mean BM25 {s['mean_bm25']:.2f}" for v, s in means.items())
    return {"experiment": "needle", "title": "Needle-question lexical overlap per pair",
            "columns": ["pair", "variant", "shared words", "which", "BM25"], "rows": [o.to_row() for o in found],
            "note": "Content words after stopwords and crude stemming; BM25 of the needle for the question over all "
                    "needles. " + note}
