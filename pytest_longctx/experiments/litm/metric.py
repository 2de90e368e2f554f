"""The paper's metrics: best_subspan_em for QA, the value string in the response for key-value retrieval.

Re-implemented from their definitions in ``src/lost_in_the_middle/metrics.py`` and
``scripts/evaluate_kv_responses.py`` (nelson-liu/lost-in-the-middle @ 29b8a6d): the SQuAD normalisation
(lower case, drop punctuation, drop the articles a/an/the, collapse whitespace), then a QA prediction is
right when any normalised gold answer is a substring of the normalised prediction.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    lowered = text.lower()
    no_punct = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", no_punct).split())


def best_subspan_em(prediction: str, answers: Iterable[str]) -> bool:
    """True when a normalised gold answer occurs in the normalised prediction."""
    normalized = normalize_answer(prediction)
    return any(normalize_answer(answer) in normalized for answer in answers)


def kv_correct(value: str, response: str) -> bool:
    """True when the value (case-insensitively) occurs in the response."""
    return value.lower() in response.lower()
