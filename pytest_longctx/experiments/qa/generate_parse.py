"""Reading a generation reply: tagged questions out of whatever the model wrote, and per-item checks.

The reply format (see :mod:`pytest_longctx.experiments.qa.generate_prompt`)::

    <questions>
    <question kind="text">
    <text>...</text>
    <answer>...</answer>
    <distractor>...</distractor>   (three times)
    <evidence>verbatim quote</evidence>
    </question>
    ...
    </questions>

Parsing is lenient about what surrounds and separates the elements (prose, code fences, CDATA, a
missing ``</question>`` or closing field tag, HTML entities, ``<question>`` wrappers left out) and
strict about what an item must contain: a question without text, answer or evidence is
*unparseable*; everything else becomes a :class:`Draft` that the checks may still reject.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from pytest_longctx.experiments.qa.questions import KINDS, Question, normalize

#: Field -> accepted tag names (first is the documented one).
FIELDS: dict[str, tuple[str, ...]] = {
    "question": ("text", "question_text", "prompt", "q"),
    "answer": ("answer", "correct_answer", "correct"),
    "distractor": ("distractor", "wrong_answer", "incorrect"),
    "evidence": ("evidence", "quote", "support"),
    "kind": ("kind", "type"),
}
_ALL_TAGS = "|".join(t for tags in FIELDS.values() for t in tags)
_OPEN_FIELD = re.compile(rf"<({_ALL_TAGS})(?:\s[^>]*)?>", re.IGNORECASE)
_QUESTION_OPEN = re.compile(r"<question\b([^>]*)>", re.IGNORECASE)
_QUESTION_CLOSE = re.compile(r"</question\s*>|</questions\s*>", re.IGNORECASE)
_KIND_ATTR = re.compile(r"""\b(?:kind|type)\s*=\s*["']?([\w-]+)""", re.IGNORECASE)
_FENCE = re.compile(r"```[\w-]*")
_CDATA = re.compile(r"<!\[CDATA\[(.*?)\]\]>", re.DOTALL)
_ANY_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^>]*)?>")
_KIND_NAMES = {
    "text": "text", "textual": "text", "non-numerical": "text", "nonnumerical": "text", "factual": "text",
    "numerical": "numerical", "numeric": "numerical", "number": "numerical", "num": "numerical",
}
_NUMBER = re.compile(
    r"\d|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
    r"|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred"
    r"|thousand|million|billion|dozen|half|once|twice|single|double|triple)\b",
    re.IGNORECASE,
)
#: Vague references ``validate()`` does not catch ("the passage", "the above notice", ...).
_VAGUE_MORE = re.compile(
    r"\b(?:(?:this|the) (?:text|passage|excerpt|article)"
    r"|(?:the|this) (?:above|following|given|provided|same) "
    r"(?:text|passage|excerpt|article|section|notice|document|rule))\b",
    re.IGNORECASE,
)
MAX_OPTION_CHARS = 300
#: Dashes and quotation marks a model may retype differently; all compare equal when locating a quote.
_CANON = str.maketrans({
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
    "\u00a0": " ",
})


@dataclass
class Draft:
    """One question as read from a reply, before any check (fields None when their tag is missing)."""

    n: int
    kind: str | None
    question: str | None
    answer: str | None
    distractors: list[str] = field(default_factory=list)
    evidence: str | None = None
    raw: str = ""

    def missing(self) -> list[str]:
        """Required tags this draft lacks (non-empty = unparseable)."""
        return [f"<{tag}>" for tag, value in (("text", self.question), ("answer", self.answer),
                                               ("evidence", self.evidence)) if not value]

    def to_question(self, section_id: str) -> Question:
        """The schema item (call only when complete with three distractors)."""
        assert self.question and self.answer and self.evidence and len(self.distractors) == 3
        d = self.distractors
        return Question(f"{section_id}/q{self.n}", section_id, self.kind or "text", self.question, self.answer,
                        (d[0], d[1], d[2]), self.evidence)


def clean(value: str) -> str:
    """Text of one field: CDATA unwrapped, stray tags dropped, entities decoded, whitespace collapsed."""
    value = _CDATA.sub(lambda m: m.group(1), value)
    value = _ANY_TAG.sub(" ", value)
    return normalize(html.unescape(value))


def _field_values(block: str, tags: tuple[str, ...]) -> list[str]:
    """Values of every ``<tag>`` in ``block``; an unclosed one ends at a blank line or the next field tag."""
    values: list[str] = []
    for match in _OPEN_FIELD.finditer(block):
        if match.group(1).lower() not in tags:
            continue
        rest = block[match.end():]
        close = re.search(rf"</{re.escape(match.group(1))}\s*>", rest, re.IGNORECASE)
        if close is not None:
            end = close.start()
        else:
            blank = re.search(r"\n\s*\n", rest)
            end = blank.start() if blank else len(rest)
        following = _OPEN_FIELD.search(rest)
        if following is not None and following.start() < end:
            end = following.start()
        values.append(clean(rest[:end]))
    return values


def _kind(attrs: str, block: str) -> str | None:
    match = _KIND_ATTR.search(attrs)
    name = match.group(1) if match else next(iter(_field_values(block, FIELDS["kind"])), None)
    return _KIND_NAMES.get(name.strip().lower()) if name else None


def _blocks(text: str) -> list[tuple[str, str]]:
    """``(attributes, body)`` of every question element (or of every ``<text>`` run without them)."""
    opens = list(_QUESTION_OPEN.finditer(text))
    if not opens:
        starts = [m for m in _OPEN_FIELD.finditer(text) if m.group(1).lower() in FIELDS["question"]]
        if not starts:
            return []
        return [("", text[m.start(): nxt.start() if nxt else len(text)])
                for m, nxt in zip(starts, [*starts[1:], None], strict=True)]
    blocks = []
    for m, nxt in zip(opens, [*opens[1:], None], strict=True):
        body = text[m.end(): nxt.start() if nxt else len(text)]
        close = _QUESTION_CLOSE.search(body)
        blocks.append((m.group(1), body[: close.start()] if close else body))
    return blocks


def parse_reply(text: str) -> list[Draft]:
    """Every question the reply contains, in reply order (an empty list when it has none)."""
    text = _FENCE.sub("", text)
    drafts = []
    for n, (attrs, body) in enumerate(_blocks(text), 1):
        first = {name: next(iter(_field_values(body, FIELDS[name])), None)
                 for name in ("question", "answer", "evidence")}
        distractors = [d for d in _field_values(body, FIELDS["distractor"]) if d]
        draft = Draft(n, _kind(attrs, body), first["question"] or None, first["answer"] or None, distractors,
                      strip_quotes(first["evidence"]) if first["evidence"] else None, body.strip()[:2000])
        if draft.kind is None and draft.answer:
            draft.kind = "numerical" if has_number(draft.answer) and all(map(has_number, distractors)) else "text"
        drafts.append(draft)
    return drafts


def strip_quotes(text: str) -> str:
    """Evidence without the quotation marks or ellipses a model may wrap it in."""
    text = text.strip()
    for _ in range(2):
        text = re.sub(r'^(?:\.\.\.|…|["\'\u201c\u201d\u2018\u2019])\s*', "", text)
        text = re.sub(r'\s*(?:\.\.\.|…|["\'\u201c\u201d\u2018\u2019])$', "", text)
    return text.strip()


def has_number(text: str) -> bool:
    """Whether ``text`` states a number (digits or a number word such as "three" or "twice")."""
    return bool(_NUMBER.search(text))


def _canonical(text: str) -> tuple[str, list[int]]:
    """Text with whitespace runs folded and dashes/quotes unified, and each kept character's index."""
    chars: list[str] = []
    where: list[int] = []
    space = True
    for i, ch in enumerate(text.translate(_CANON)):
        if ch.isspace():
            if not space:
                chars.append(" ")
                where.append(i)
            space = True
            continue
        chars.append(ch)
        where.append(i)
        space = False
    if chars and chars[-1] == " ":
        chars.pop()
        where.pop()
    return "".join(chars), where


def verbatim(quote: str, section_text: str) -> str | None:
    """The section's own text for ``quote`` (whitespace folded), matching up to whitespace, dash and
    quotation-mark variants; None when the section does not contain it."""
    canon_quote = _canonical(quote)[0]
    if not canon_quote:
        return None
    canon_text, where = _canonical(section_text)
    start = canon_text.find(canon_quote)
    if start < 0:
        return None
    end = start + len(canon_quote) - 1
    return normalize(section_text[where[start]: where[end] + 1])


def item_problems(q: Question) -> list[str]:
    """Checks beyond :func:`~pytest_longctx.experiments.qa.questions.validate` (which covers evidence, distinct
    options, section ids and "this document"): kind, a real question, sane options, no give-away, numbers."""
    problems = []
    if q.kind not in KINDS:
        problems.append(f"kind {q.kind!r} is not one of {', '.join(KINDS)}")
    if not q.question.rstrip().endswith("?"):
        problems.append("question does not end with '?'")
    if _VAGUE_MORE.search(q.question):
        problems.append("question refers to 'the passage/text'; name the agency or subject")
    for option in q.options:
        if not option.strip():
            problems.append("an option is empty")
        elif len(option) > MAX_OPTION_CHARS:
            problems.append(f"an option is longer than {MAX_OPTION_CHARS} characters")
    if len(q.answer) >= 4 and normalize(q.answer).lower() in normalize(q.question).lower():
        problems.append("the question gives the answer away (it contains it)")
    if q.kind == "numerical" and not has_number(q.answer):
        problems.append("numerical question whose answer states no number")
    return problems
