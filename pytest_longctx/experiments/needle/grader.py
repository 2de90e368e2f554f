"""The needle experiment's grader for the local test server (``pytest_longctx_graders``): which pair a prompt asks,
the right reply and a wrong one, read from the prompt and the experiment's own data, never from the run.

Right: the name the needle states, or, the needle removed, the abstention phrase. Wrong: a distractor's name when
the context holds distractors, else another name of the pool (the needle removed: a name, i.e. a hallucination).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_longctx.experiments.needle.pairs import NAME_SLOT, VARIANTS, Pair, load_data
from pytest_longctx.experiments.needle.prompts import ABSTAIN, OPENING

Grade = Callable[[str], "Mapping[str, Any] | None"]
_QUESTION = re.compile(r"\nQuestion: (.*)\n")
_NAME = r"(?P<name>[A-Z][a-z]+)"


def _pattern(sentence: str) -> re.Pattern[str]:
    return re.compile(re.escape(sentence.replace(NAME_SLOT, "\x00")).replace("\x00", _NAME))


def _pick(prompt: str, choices: list[str]) -> str:
    digest = hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).digest()
    return choices[int.from_bytes(digest[:8], "big") % len(choices)]


def make_grader() -> Grade:
    """The grader the server loads by name (``pytest_longctx.experiments.needle.grader:make_grader``)."""
    data = load_data()
    by_question = data.by_question()
    needles = {p.id: [_pattern(p.needle if v == "nonliteral" else p.literal) for v in VARIANTS] for p in data.pairs}

    def distractors(pair: Pair, text: str) -> list[str]:
        found = []
        for template in pair.distractors:
            found += [m.group("name") for m in _pattern(template.replace("{key}", pair.key)).finditer(text)]
        return found

    def grade(prompt: str) -> Mapping[str, Any] | None:
        if not prompt.startswith(OPENING):
            return None
        asked = _QUESTION.findall(prompt)
        pair = by_question.get(asked[-1]) if asked else None
        if pair is None:
            raise ValueError(f"graded: a needle prompt whose question is no pair's: {asked[-1:]!r}")
        text = prompt[prompt.find("<text>"):prompt.rfind("</text>")]
        target = next((m.group("name") for p in needles[pair.id] for m in [p.search(text)] if m), None)
        lures = distractors(pair, text)
        others = [n for n in data.names if n != target and n not in lures]
        wrong = _pick(prompt, lures) if lures else _pick(prompt, others)
        return {"experiment": "needle", "item": pair.id, "right": target or ABSTAIN, "wrong": wrong}

    return grade
