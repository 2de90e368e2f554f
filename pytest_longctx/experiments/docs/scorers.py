"""Deterministic answer scorers (SQuAD normalization, as used by Lost in the Middle).

All scorers read the first non-empty line of the model's answer and compare it with every gold
answer (the answer and its aliases), keeping the best result.

* ``em``: normalized exact match.
* ``f1``: token F1 of the normalized texts (a float; counts as correct at >= 0.5).
* ``subspan``: a normalized gold answer occurs in the normalized first line, on word boundaries
  (so "12" does not match "120"). Lost in the Middle's best-subspan match, made word-aligned.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

#: Deterministic scorers; ``judge`` (LLM-as-judge) is the fourth primary-scorer choice.
DETERMINISTIC = ("subspan", "em", "f1")
SCORERS = (*DETERMINISTIC, "judge")
F1_CORRECT = 0.5
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "‘’“”–—")


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower case, drop punctuation and articles, collapse whitespace."""
    text = text.lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def first_line(text: str) -> str:
    """The first non-empty line, stripped (models often explain after the answer)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def exact_match(prediction: str, golds: Sequence[str]) -> bool:
    pred = normalize_answer(first_line(prediction))
    return any(pred == normalize_answer(g) for g in golds)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    pred = normalize_answer(first_line(prediction)).split()
    return max((_f1(pred, normalize_answer(g).split()) for g in golds), default=0.0)


def _f1(pred: list[str], gold: list[str]) -> float:
    common = sum((Counter(pred) & Counter(gold)).values())
    if not pred or not gold or common == 0:
        return float(pred == gold)
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def subspan_match(prediction: str, golds: Sequence[str]) -> bool:
    pred = f" {normalize_answer(first_line(prediction))} "
    return any(normalize_answer(g) and f" {normalize_answer(g)} " in pred for g in golds)


@dataclass(frozen=True)
class Scores:
    """Every deterministic score of one answer."""

    em: bool
    f1: float
    subspan: bool

    def correct(self, scorer: str) -> bool:
        """Correctness under one deterministic scorer."""
        if scorer == "em":
            return self.em
        if scorer == "f1":
            return self.f1 >= F1_CORRECT
        return self.subspan


def score(prediction: str, golds: Sequence[str]) -> Scores:
    return Scores(em=exact_match(prediction, golds), f1=round(token_f1(prediction, golds), 4),
                  subspan=subspan_match(prediction, golds))
