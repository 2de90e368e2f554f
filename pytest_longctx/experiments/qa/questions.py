"""Multiple-choice question sets: loading from JSONL and validation against the corpus.

Each JSONL line is one question::

    {"id": "2024-02930/q1", "section_id": "2024-02930", "kind": "text" | "numerical",
     "question": "...", "answer": "...", "distractors": ["...", "...", "..."],
     "evidence": "verbatim quote from the section"}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_longctx.errors import UsageError
from pytest_longctx.util.jsonl import read_jsonl

KINDS = ("text", "numerical")
_WS = re.compile(r"\s+")
_VAGUE = re.compile(r"\b(this|the) (document|notice|rule|section)\b(?! of)", re.IGNORECASE)


@dataclass(frozen=True)
class Question:
    """One 4-option question about one section."""

    id: str
    section_id: str
    kind: str
    question: str
    answer: str
    distractors: tuple[str, str, str]
    evidence: str

    @property
    def options(self) -> tuple[str, ...]:
        """The answer followed by the distractors (shuffle before showing)."""
        return (self.answer, *self.distractors)


def normalize(text: str) -> str:
    """Collapse runs of whitespace, for quote matching."""
    return _WS.sub(" ", text).strip()


def parse_question(obj: object, where: str) -> Question:
    """Build a Question from one decoded JSON object, or raise UsageError naming ``where``."""
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object")
    missing = [k for k in ("id", "section_id", "question", "answer", "distractors", "evidence") if k not in obj]
    if missing:
        raise UsageError(f"{where}: missing field(s) {', '.join(missing)}")
    distractors = obj["distractors"]
    if not isinstance(distractors, list) or len(distractors) != 3 or not all(isinstance(d, str) for d in distractors):
        raise UsageError(f"{where}: 'distractors' must be a list of three strings")
    kind = obj.get("kind", "text")
    if kind not in KINDS:
        raise UsageError(f"{where}: 'kind' must be one of {', '.join(KINDS)}")
    fields = {k: obj[k] for k in ("id", "section_id", "question", "answer", "evidence")}
    for key, value in fields.items():
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"{where}: '{key}' must be a non-empty string")
    return Question(
        id=fields["id"],
        section_id=fields["section_id"],
        kind=kind,
        question=fields["question"],
        answer=fields["answer"],
        distractors=(distractors[0], distractors[1], distractors[2]),
        evidence=fields["evidence"],
    )


def load_questions(path: Path) -> list[Question]:
    """Read a JSONL question file; a malformed line is a one-line UsageError naming file:line."""
    if not path.is_file():
        raise UsageError(f"{path}: question file not found")
    return [parse_question(obj, f"{path}:{lineno}") for lineno, obj in read_jsonl(path)]


def validate(questions: Iterable[Question], sections: Mapping[str, str]) -> list[str]:
    """Return one problem line per violated rule (empty list = valid).

    Rules: known section; evidence occurs verbatim (whitespace-normalized) in its own section and
    in no other section (so no other section's text can support the answer); four distinct
    options; the question names its subject instead of saying "this document"; ids unique.
    """
    normalized = {sid: normalize(text) for sid, text in sections.items()}
    problems: list[str] = []
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            problems.append(f"{q.id}: duplicate id")
        seen.add(q.id)
        own = normalized.get(q.section_id)
        if own is None:
            problems.append(f"{q.id}: unknown section {q.section_id}")
            continue
        quote = normalize(q.evidence)
        if quote not in own:
            problems.append(f"{q.id}: evidence not found in section {q.section_id}")
        others = [sid for sid, text in normalized.items() if sid != q.section_id and quote in text]
        if others:
            problems.append(f"{q.id}: evidence also occurs in section(s) {', '.join(sorted(others))}")
        opts = [normalize(o).lower() for o in q.options]
        if len(set(opts)) != 4:
            problems.append(f"{q.id}: options are not distinct")
        if _VAGUE.search(q.question):
            problems.append(f"{q.id}: question says 'this document'; name the agency or subject")
    return problems


def longest_answer_share(questions: Iterable[Question]) -> float:
    """Fraction of questions whose right answer is strictly the longest option."""
    qs = list(questions)
    if not qs:
        return 0.0
    hits = sum(1 for q in qs if all(len(q.answer) > len(d) for d in q.distractors))
    return hits / len(qs)
