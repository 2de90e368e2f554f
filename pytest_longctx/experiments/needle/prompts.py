"""The needle experiment's prompt, its fixed abstention phrase, and how an answer is scored.

One prompt for every condition (the abstention instruction included where the needle is present), so a context
with and without its needle differ in the needle only. An answer is read in this order: the first name of the
pool it mentions (answered: that name), else the abstention phrase or a close paraphrase (abstained), else
answered with no name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pytest_longctx import Request, Template

ABSTAIN = "NOT IN THE TEXT"
OPENING = "Read the text below. It tells small facts about some characters among other things."
QUESTION = Template("needle-question", 1, OPENING + "\n\n<text>\n{haystack}\n</text>\n\n"
                    "Question: {question}\n"
                    "Answer with the character's name only. If the text does not tell you, answer exactly: "
                    + ABSTAIN)
MAX_TOKENS = 16
#: Readings of an abstention beside the instructed phrase (lower case, punctuation removed).
ABSTAINING = ("not in the text", "not in text", "the text does not", "does not say", "not mentioned", "no character",
              "none of the characters", "cannot be determined", "unknown", "i dont know", "i do not know")


def needle_request(haystack: str, question: str) -> Request:
    return Request.user(QUESTION.render(haystack=haystack, question=question), max_tokens=MAX_TOKENS,
                        template=QUESTION.ref)


def overhead(count: Any, question: str) -> int:
    """The prompt's tokens beside its haystack."""
    return int(count(QUESTION.render(haystack="", question=question)))


def named(answer: str, names: Sequence[str]) -> str | None:
    """The pool's name mentioned first in ``answer`` (whole words), or None."""
    found = [(m.start(), n) for n in names for m in [re.search(rf"(?<!\w){re.escape(n)}(?!\w)", answer)] if m]
    return min(found)[1] if found else None


def abstained(answer: str) -> bool:
    text = " ".join(re.sub(r"[^\w\s]", "", answer.lower().replace("n't", " not")).split())
    return any(phrase in text for phrase in ABSTAINING)


def score(answer: str, names: Sequence[str], target: str, distractors: Sequence[str], answerable: bool,
          ) -> dict[str, Any]:
    """``correct`` and what the answer was: ``target``, ``distractor`` (a distractor's name), ``other-name``,
    ``abstained`` or ``no-name``; ``distractor_index`` says which distractor was answered."""
    name = named(answer, names)
    if name is not None:
        kind = "target" if name == target else "distractor" if name in distractors else "other-name"
    else:
        kind = "abstained" if abstained(answer) else "no-name"
    out: dict[str, Any] = {"answer_name": name, "answer_kind": kind,
                           "correct": kind == "target" if answerable else kind == "abstained"}
    if kind == "distractor":
        out["distractor_index"] = list(distractors).index(str(name))
    return out
