"""LLM-as-judge: does the model's answer mean the same as the gold answer?

The judge gets the question, the gold answer and the answer, and replies ``{"correct": true}`` or
``{"correct": false}``. :func:`parse_verdict` accepts that JSON inside fences or prose, string
booleans, a bare true/false/yes/no/correct/incorrect word, and a reply that opens with
"Correct." or "Incorrect:"; anything else is ``None``.

An unparseable reply is recorded as ``judge: null`` and never counted as a wrong answer: the
trial is scored by the primary scorer. When the judge *is* the primary scorer, an unparseable
reply makes the trial an error (:class:`JudgeError`).
"""

from __future__ import annotations

import json
import re

from pytest_longctx import Oracle, Request
from pytest_longctx.errors import LongctxError
from pytest_longctx.experiments.docs.jsonish import json_values

TEMPLATE = "docs-judge@1"
PROMPT = """You are grading an answer to a question about a document.

Question: {question}
Gold answer: {gold}
Answer to grade: {answer}

The answer is correct if it gives the same fact as the gold answer (wording, units and format may \
differ; extra words are fine). It is incorrect if it gives a different fact, several conflicting \
facts, or no answer.
Reply with JSON only: {{"correct": true}} or {{"correct": false}}"""

_KEYS = ("correct", "is_correct", "verdict", "judgement", "judgment")
_TRUE = ("true", "yes", "correct", "1")
_FALSE = ("false", "no", "incorrect", "wrong", "0")
_WORD = re.compile(r"[a-z0-9]+")
_LEAD = re.compile(r"(correct|incorrect|true|false)\s*[.:;,!\n-]")


class JudgeError(LongctxError):
    """The judge's reply had no verdict and the judge is the primary scorer."""


def judge_request(question: str, gold: str, answer: str) -> Request:
    """The judge's prompt (deterministic, cacheable)."""
    return Request.user(PROMPT.format(question=question, gold=gold, answer=answer.strip() or "(no answer)"),
                        max_tokens=32, template=TEMPLATE)


def judge_oracle(verdict: bool) -> Oracle:
    """For fake judges: the right verdict is ``verdict``; the wrong one its opposite."""
    return Oracle(answer=json.dumps({"correct": verdict}), wrong=(json.dumps({"correct": not verdict}),))


def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        return True if word in _TRUE else False if word in _FALSE else None
    return None


def parse_verdict(text: str) -> bool | None:
    """The judge's verdict, or None when the reply has none."""
    values = json_values(text)
    for value in values:
        objects = value if isinstance(value, list) else [value]
        for obj in objects:
            if isinstance(obj, dict):
                lowered = {str(k).lower(): v for k, v in obj.items()}
                for key in _KEYS:
                    if key in lowered and (verdict := _as_bool(lowered[key])) is not None:
                        return verdict
    if values:
        return None
    words = _WORD.findall(text.lower())
    if len(words) == 1:  # a bare "Correct." / "false" / "Yes"
        return _as_bool(words[0])
    lead = _LEAD.match(text.strip().lower())  # "Incorrect. The answer gives ..."
    return _as_bool(lead[1]) if lead else None
