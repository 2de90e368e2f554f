"""Haystacks: sentences of the Federal Register (when its issue is present) or of the shipped filler, filled to a
token budget, with the needle at a depth, distractors at drawn places, and the same sentences shuffled on request.

One context is built from one ``random.Random`` seeded by the run seed and the trial's item, length, depth,
distractor count and haystack kind, never by its variant or answerability: the literal and the non-literal needle,
and the needle and its absence, sit in the same sentences at the same place with the same names.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_longctx import CorpusFile, CorpusNotFound, Settings, find_corpus
from pytest_longctx.experiments.needle.pairs import FIXTURES, Pair, words_pattern

FR = CorpusFile(corpus="federal_register_2024-02-12", file="FR-2024-02-12.xml", title="Federal Register 2024-02-12")
FILLER = FIXTURES / "filler.md"
HAYSTACKS = ("coherent", "shuffled")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
#: Words per token the first build assumes; the second build corrects it by the measured count.
WORDS_PER_TOKEN = 0.75


_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class Source:
    """The sentences haystacks are cut from, in reading order, and what they are (with each one's lower-case
    words, so leaving out the sentences that name a word is a set lookup)."""

    name: str
    sentences: tuple[str, ...]
    words: tuple[frozenset[str], ...] = ()

    @classmethod
    def of(cls, name: str, sentences: Sequence[str]) -> Source:
        return cls(name, tuple(sentences), tuple(frozenset(_WORDS.findall(s.lower())) for s in sentences))

    def without(self, avoid: Sequence[str]) -> list[str]:
        """The sentences naming none of ``avoid`` (whole words, case-insensitive)."""
        single = {w.lower() for w in avoid if _WORDS.fullmatch(w)}
        phrases = [w for w in avoid if not _WORDS.fullmatch(w)]
        pattern = words_pattern(tuple(phrases)) if phrases else None
        words = self.words or tuple(frozenset(_WORDS.findall(s.lower())) for s in self.sentences)
        return [s for s, w in zip(self.sentences, words, strict=True)
                if not (single & w) and not (pattern and pattern.search(s))]


def sentences_of(text: str, shortest: int = 6, longest: int = 60) -> list[str]:
    """Prose sentences of ``text``: whitespace collapsed, split after . ! ?, kept when mostly words."""
    out = []
    for sentence in _SENTENCE.split(" ".join(text.split())):
        words = sentence.split()
        letters = sum(c.isalpha() or c.isspace() for c in sentence)
        if shortest <= len(words) <= longest and letters >= 0.9 * len(sentence) and sentence[-1] in ".!?":
            out.append(sentence)
    return out


def federal_register(path: Path) -> Source:
    """The issue's prose sentences (its XML's text, in document order)."""
    root = ET.fromstring(path.read_bytes())  # noqa: S314 - govinfo's public XML; no external entities expanded
    return Source.of("federal-register", sentences_of(" ".join(root.itertext())))


def filler() -> Source:
    """The shipped filler prose (fixtures/needle/filler.md)."""
    return Source.of("filler", sentences_of(FILLER.read_text(encoding="utf-8"), shortest=3))


def load_source(kind: str, settings: Settings) -> Source:
    """``fr`` (the issue, or a one-line error), ``filler``, or ``auto``: the issue when present, else the filler."""
    if kind == "filler":
        return filler()
    try:
        path = find_corpus(FR, data_dir=settings.data_dir, cache_dir=settings.cache_dir / "corpora" / FR.corpus,
                           download=False)
    except CorpusNotFound:
        if kind == "fr":
            raise
        return filler()
    return federal_register(path)


def context_seed(run_seed: int, *parts: object) -> int:
    """The seed of one context, from the run seed and what the context shares across variants."""
    text = json.dumps([run_seed, *parts], sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@dataclass(frozen=True)
class Context:
    """A built haystack: its text and where things went (sentence indices in the final text)."""

    text: str
    target: str
    distractor_names: tuple[str, ...]
    #: the category's distractor each name states (index into ``Pair.distractors``), aligned with the names
    distractor_kinds: tuple[int, ...]
    needle_at: int | None
    distractors_at: tuple[int, ...]
    depth: float
    sentences: int
    source: str
    words: int = 0
    notes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Design:
    """What one context holds: the pair, the variant, the depth (percent), distractors, shuffling, the needle."""

    pair: Pair
    variant: str
    depth: int
    distractors: int = 0
    shuffled: bool = False
    answerable: bool = True


def _cut(source: Source, words: int, avoid: tuple[str, ...], rng: random.Random) -> list[str]:
    """Contiguous sentences from a drawn start (wrapping), without any that mention ``avoid``, to ``words`` words."""
    usable = source.without(avoid)
    start = rng.randrange(len(usable))
    out: list[str] = []
    total = 0
    i = start
    while total < words:
        out.append(usable[i % len(usable)])
        total += len(out[-1].split())
        i += 1
    return out


def build(design: Design, source: Source, names: Sequence[str], words: int, rng: random.Random) -> Context:
    """One context of about ``words`` words of haystack (the draws do not depend on variant or answerability)."""
    pair = design.pair
    picked = rng.sample(list(names), 1 + design.distractors)
    target, others = picked[0], tuple(picked[1:])
    avoid = (pair.key, *names)
    hay = _cut(source, words, avoid, rng)
    if design.shuffled:
        rng.shuffle(hay)
    counts = [len(s.split()) for s in hay]
    total = sum(counts)
    gap, before = 0, 0
    while gap < len(hay) and before + counts[gap] <= total * design.depth / 100:
        before += counts[gap]
        gap += 1
    kinds = rng.sample(range(len(pair.distractors)), design.distractors) if design.distractors else []
    spots = sorted(rng.randrange(len(hay) + 1) for _ in kinds)
    inserts: list[tuple[int, int, str]] = [(s, 1, pair.distractor(k, n)) for s, k, n in zip(spots, kinds, others,
                                                                                            strict=True)]
    if design.answerable:
        inserts.append((gap, 0, pair.sentence(design.variant, target)))
    text = list(hay)
    needle_at, distractors_at = None, []
    for offset, (spot, kind, sentence) in enumerate(sorted(inserts)):
        text.insert(spot + offset, sentence)
        if kind == 0:
            needle_at = spot + offset
        else:
            distractors_at.append(spot + offset)
    return Context(" ".join(text), target, others, tuple(kinds), needle_at, tuple(distractors_at),
                   round(100 * before / max(total, 1), 1), len(text), source.name, total)


def fill(design: Design, source: Source, names: Sequence[str], seed: int, budget: int,
         count: Callable[[str], int], overhead: int) -> tuple[Context, int]:
    """The context whose prompt is about ``budget`` tokens: built at a first guess, measured, built again (from
    the same seed) at the corrected size. Returns it and the measured haystack tokens."""
    measured = replace(design, variant="nonliteral", answerable=True)  # the size never depends on the variant
    words = max(int((budget - overhead) * WORDS_PER_TOKEN), 20)
    tokens = count(build(measured, source, names, words, random.Random(seed)).text)
    words = max(int(words * (budget - overhead) / max(tokens, 1)), 20)
    context = build(design, source, names, words, random.Random(seed))
    return context, count(context.text)
