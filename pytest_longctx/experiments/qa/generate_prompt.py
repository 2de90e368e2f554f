"""The few-shot prompt that asks a Claude model for five multiple-choice questions about one section.

Two worked examples come from the team-written 2024-02-12 set and never from the section being
asked about. Each is a user turn with a (trimmed) excerpt of its section and an assistant turn with
its five questions in the reply format; the real request follows as the last user turn, so the
reply continues a pattern the team wrote by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_longctx import Message, Request
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.qa.questions import Question, normalize

TEMPLATE = "fr-qa-generate@1"
#: The issue of the team-written set the examples come from.
EXAMPLE_DATE = "2024-02-12"
EXAMPLES_FILE = Path(__file__).resolve().parents[3] / "fixtures" / "questions" / f"FR-{EXAMPLE_DATE}.jsonl"
#: Example sections in order of preference (short, one rule and one notice, every field well used);
#: the first two that are not the target are used, then any other section of the set.
EXAMPLE_SECTIONS = ("2024-02795", "2024-02758", "2024-02784")
#: Longest excerpt of an example section, in characters (about 1,000 tokens).
EXCERPT_CHARS = 4000
MAX_TOKENS = 2048
QUESTIONS_PER_SECTION = {"text": 4, "numerical": 1}

SYSTEM = """\
You write multiple-choice reading-comprehension questions about one section of the Federal Register, \
the daily journal of the United States government.

The questions will later be asked about this section while it sits among dozens of other sections of \
the same issue, so every question must name its subject: the agency and the specific action, program, \
product, docket, vessel, place or company it is about. Never write "this document", "this notice", \
"the rule", "this section" or "the passage".

Write exactly five questions about different facts of the section:
- four with kind="text" (who, what, why, which, where);
- one with kind="numerical", whose answer is a number, amount, date, time or duration stated in the section.

For each question give:
- <text>: the question, ending with a question mark. It must not contain the answer.
- <answer>: the correct answer, supported by the section alone.
- three <distractor> elements: wrong options that are plausible to someone who has not read the \
section, of the same type, length and style as the answer, and clearly wrong according to the \
section. The answer must not be the longest or most detailed option. For the numerical question, use \
nearby values of the same unit (other figures from the section, transposed digits, neighbouring dates).
- <evidence>: one sentence or phrase copied character for character from the section (same words, \
punctuation, dashes and quotation marks) that proves the answer. Quote it exactly; do not shorten it \
with "...". Prefer a quote specific enough not to occur in other sections.

All four options of a question must differ. Reply with the <questions> element only, in this format:

<questions>
<question kind="text">
<text>...</text>
<answer>...</answer>
<distractor>...</distractor>
<distractor>...</distractor>
<distractor>...</distractor>
<evidence>...</evidence>
</question>
...
</questions>"""

REQUEST = """\
Federal Register of {date}, section {section_id}{trimmed}:
<section>
{text}
</section>

Write the five questions (four text, one numerical) about this section."""


@dataclass(frozen=True)
class Example:
    """One worked example: a section of the example issue, its excerpt and its five questions."""

    section_id: str
    excerpt: str
    trimmed: bool
    questions: tuple[Question, ...]


def compact(text: str) -> str:
    """The section as shown to the model: lines stripped, blank lines dropped (quotes still match)."""
    return "\n".join(normalize(line) for line in text.splitlines() if line.strip())


def excerpt(text: str, quotes: Sequence[str], limit: int = EXCERPT_CHARS) -> tuple[str, bool]:
    """The section's heading lines and every line holding one of ``quotes`` (with a line of context
    before it while the ``limit`` allows), gaps marked ``[...]``; the whole text when it fits."""
    lines = [normalize(line) for line in text.splitlines() if line.strip()]
    if sum(len(line) + 1 for line in lines) <= limit:
        return "\n".join(lines), False
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    flat = " ".join(lines)  # same offsets as "\n".join(lines)
    needed: set[int] = set()
    for quote in quotes:
        at = flat.find(normalize(quote))
        if at >= 0:
            end = at + len(normalize(quote))
            needed.update(i for i, s in enumerate(starts) if s < end and s + len(lines[i]) > at)
    heading, size = set(), 0
    for i, line in enumerate(lines):
        if size > limit // 8:
            break
        heading.add(i)
        size += len(line) + 1
    keep = heading | needed
    for i in sorted(needed):
        context = i - 1
        if context >= 0 and context not in keep and _size(lines, keep | {context}) <= limit:
            keep.add(context)
    out, last = [], -1
    for i in sorted(keep):
        if i != last + 1:
            out.append("[...]")
        out.append(lines[i])
        last = i
    if last != len(lines) - 1:
        out.append("[...]")
    return "\n".join(out), True


def _size(lines: Sequence[str], keep: set[int]) -> int:
    return sum(len(lines[i]) + 1 for i in keep)


def render_questions(questions: Sequence[Question]) -> str:
    """Questions in the reply format (what an example's assistant turn says)."""
    parts = ["<questions>"]
    for q in questions:
        parts.append(f'<question kind="{q.kind}">')
        parts.append(f"<text>{q.question}</text>")
        parts.append(f"<answer>{q.answer}</answer>")
        parts.extend(f"<distractor>{d}</distractor>" for d in q.distractors)
        parts.append(f"<evidence>{q.evidence}</evidence>")
        parts.append("</question>")
    parts.append("</questions>")
    return "\n".join(parts)


def load_examples(questions: Sequence[Question], sections: Mapping[str, str],
                  preferred: Sequence[str] = EXAMPLE_SECTIONS) -> list[Example]:
    """Candidate examples, preferred sections first: every section of the example set that has four
    text and one numerical question and is in ``sections`` (the example issue's text)."""
    by_section: dict[str, list[Question]] = {}
    for q in questions:
        by_section.setdefault(q.section_id, []).append(q)
    order = [s for s in preferred if s in by_section] + [s for s in by_section if s not in preferred]
    examples = []
    for sid in order:
        qs = by_section[sid]
        kinds = sorted(q.kind for q in qs)
        if sid not in sections or kinds != ["numerical", "text", "text", "text", "text"]:
            continue
        qs = sorted(qs, key=lambda q: q.kind == "numerical")  # the numerical question last, as asked
        text, trimmed = excerpt(sections[sid], [q.evidence for q in qs])
        examples.append(Example(sid, text, trimmed, tuple(qs)))
    if len(examples) < 3:
        raise UsageError(f"{EXAMPLES_FILE}: needs at least three sections with four text and one numerical "
                         "question (the few-shot examples); restore it from the repository")
    return examples


def pick_examples(examples: Sequence[Example], target_id: str, n: int = 2) -> list[Example]:
    """The first ``n`` examples about another section than ``target_id``."""
    return [e for e in examples if e.section_id != target_id][:n]


def build_request(section_id: str, text: str, date: str, examples: Sequence[Example]) -> Request:
    """The generation request for one section (temperature 0)."""
    messages: list[Message] = []
    for ex in examples:
        messages.append(Message("user", REQUEST.format(date=EXAMPLE_DATE, section_id=ex.section_id,
                                                       trimmed=" (excerpt)" if ex.trimmed else "",
                                                       text=ex.excerpt)))
        messages.append(Message("assistant", render_questions(ex.questions)))
    messages.append(Message("user", REQUEST.format(date=date, section_id=section_id, trimmed="", text=compact(text))))
    return Request(messages=tuple(messages), system=SYSTEM, max_tokens=MAX_TOKENS, temperature=0.0,
                   template=TEMPLATE)

