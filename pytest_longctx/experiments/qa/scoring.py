"""Answer extraction for multiple choice: lenient enough for small models, strict about tags first."""

from __future__ import annotations

import re
from collections.abc import Sequence

LETTERS = "ABCD"
_TAG = re.compile(r"<answer>\s*\(?\s*([A-Da-d])\s*\)?[^<]*</answer>", re.IGNORECASE)
_OPEN_TAG = re.compile(r"<answer>\s*\(?\s*([A-D])\b", re.IGNORECASE)
_PHRASE = re.compile(r"\b(?i:answer|option|choice)\s*(?i:is)?\s*[:\-]?\s*\(?\s*([A-D])\b")
_LEADING = re.compile(r"^\s*(?:\*\*)?\(?([A-D])(?:[.):\]]|\*\*|\s*$|\s+[-–])")
_PAREN = re.compile(r"\(([A-D])\)")


def extract_choice(text: str, options: Sequence[str] = ()) -> str | None:
    """The letter a model chose, or None when unreadable.

    Tried in order: the last ``<answer>X</answer>`` tag; an unclosed ``<answer>X``; "answer is X" /
    "Answer: X"; a reply that starts with "X." / "X)" / "(X)" / "X" alone (so a plain "B. ..." counts
    as B); exactly one "(X)"; and finally a reply that repeats exactly one option's text.
    """
    for pattern in (_TAG, _OPEN_TAG):
        found = pattern.findall(text)
        if found:
            return str(found[-1]).upper()
    without_scratch = re.sub(r"<scratchpad>.*?</scratchpad>", " ", text, flags=re.DOTALL | re.IGNORECASE)
    m = _PHRASE.search(without_scratch)
    if m:
        return str(m.group(1)).upper()
    m = _LEADING.match(without_scratch)
    if m:
        return str(m.group(1))
    parens = set(_PAREN.findall(without_scratch))
    if len(parens) == 1:
        return str(parens.pop())
    if options:
        low = without_scratch.lower()
        hits = [LETTERS[i] for i, opt in enumerate(options) if opt.strip() and opt.strip().lower() in low]
        if len(hits) == 1:
            return hits[0]
    return None
