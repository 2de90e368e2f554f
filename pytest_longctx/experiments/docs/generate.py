"""Question generation: a model writes short factoid question/answer pairs for each document.

The prompt asks for a JSON list; :func:`parse_qa_reply` reads it leniently (fences, prose around
it, trailing commas, a single object instead of a list, a truncated list). A reply with no usable
pair gets one repair turn; a document that still fails is reported, never dropped silently.
Requests go through :class:`~pytest_longctx.dispatch.client.ModelClient`, so replies are cached like any other.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_longctx import Message, ModelClient, Oracle, Request, provider_of
from pytest_longctx.errors import BackendError, FatalBackendError, LongctxError
from pytest_longctx.experiments.docs.documents import Document
from pytest_longctx.experiments.docs.jsonish import json_values
from pytest_longctx.experiments.docs.retrieval import sentence_spans

TEMPLATE = "docs-qa-generate@1"
PROMPT = """Write {n} short factoid questions about the document below, each with its answer.

Rules:
- Each question must be answerable from this document alone. It will be asked among many other \
documents, so name its subject (the company, product, person or place); never say "the document" \
or "the text".
- The answer is a short phrase of at most six words copied exactly from the document: a name, \
number, date, place or term.
- Ask about specific details, each about a different fact.

Document {name}:
<document>
{text}
</document>

Reply with a JSON list only, no other text:
[{{"question": "...", "answer": "..."}}]"""
REPAIR = ("Your reply could not be used: {reason}. Reply again with the JSON list only, like "
          '[{{"question": "...", "answer": "..."}}]')
_QUESTION_KEYS = ("question", "q", "query", "prompt")
_ANSWER_KEYS = ("answer", "a", "gold", "gold_answer", "answer_text", "response")
_WRAPPER_KEYS = ("items", "qa", "questions", "pairs", "data", "results", "qa_pairs")
_MAX_ANSWER_WORDS = 12


class QAParseError(LongctxError):
    """A generation reply with no usable question/answer pair."""


@dataclass
class Parsed:
    """The pairs read from one reply, and why any other items were left out."""

    pairs: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _field(obj: dict[str, object], keys: Sequence[str]) -> str | None:
    lowered = {str(k).strip().lower(): v for k, v in obj.items()}
    for key in keys:
        value = lowered.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def _candidates(values: list[object]) -> list[object]:
    """Flatten lists and wrapper objects ({"items": [...]}) into candidate items."""
    out: list[object] = []
    for value in values:
        if isinstance(value, list):
            out.extend(value)
        elif isinstance(value, dict) and _field(value, _QUESTION_KEYS) is None:
            lowered = {str(k).lower(): v for k, v in value.items()}
            inner = next((lowered[k] for k in _WRAPPER_KEYS if isinstance(lowered.get(k), list)), None)
            out.extend(inner if inner is not None else [value])
        else:
            out.append(value)
    return out


def parse_qa_reply(text: str) -> Parsed:
    """Question/answer pairs from a generation reply; QAParseError (with the reason) when none."""
    values = json_values(text)
    if not values:
        raise QAParseError("no JSON found in the reply")
    parsed = Parsed()
    seen: set[str] = set()
    for i, obj in enumerate(_candidates(values), 1):
        if not isinstance(obj, dict):
            parsed.problems.append(f"item {i}: not an object ({type(obj).__name__})")
            continue
        question, answer = _field(obj, _QUESTION_KEYS), _field(obj, _ANSWER_KEYS)
        if question is None or answer is None:
            parsed.problems.append(f"item {i}: missing {'question' if question is None else 'answer'}")
        elif len(answer.split()) > _MAX_ANSWER_WORDS:
            parsed.problems.append(f"item {i}: answer longer than {_MAX_ANSWER_WORDS} words")
        elif question.lower() in seen:
            parsed.problems.append(f"item {i}: repeats an earlier question")
        else:
            seen.add(question.lower())
            parsed.pairs.append((question, answer))
    if not parsed.pairs:
        raise QAParseError("no usable question/answer pair (" + "; ".join(parsed.problems or ["empty list"]) + ")")
    return parsed


def generation_request(doc: Document, n: int, protocol: str = "longctx") -> Request:
    """longctx: ``n`` pairs as a JSON list; source: the write-up's prompt for one pair (``n`` is ignored)."""
    if protocol == "source":
        from pytest_longctx.experiments.docs import source

        return source.generation_request(doc.text)
    return Request.user(PROMPT.format(n=n, name=doc.name, text=doc.text), max_tokens=160 * n + 64,
                        template=TEMPLATE)


def repair_request(first: Request, reply: str, reason: str) -> Request:
    """The first request, the unusable reply, and a request to answer again as JSON only."""
    messages = (*first.messages, Message("assistant", reply or "(empty)"),
                Message("user", REPAIR.format(reason=reason)))
    return Request(messages=messages, max_tokens=first.max_tokens, template=first.template)


@dataclass
class DocResult:
    """What generation produced for one document."""

    doc: Document
    pairs: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    error: str | None = None
    raw: str = ""


async def generate_for_doc(client: ModelClient, doc: Document, n: int, retries: int = 1,
                           protocol: str = "longctx") -> DocResult:
    """Ask for ``n`` pairs; on an unusable reply, ask again (``retries`` repair turns)."""
    request = first = generation_request(doc, n, protocol)
    oracle = fake_oracle(doc, n) if provider_of(client.backend).in_process else None
    result = DocResult(doc)
    for attempt in range(retries + 1):
        try:
            completion = await client.complete(request, oracle)
        except FatalBackendError:
            raise  # auth, spend limit: no other document can succeed either
        except BackendError as exc:
            result.error = f"model call failed: {exc}"
            return result
        result.raw = completion.text
        try:
            parsed = parse_qa_reply(completion.text)
        except QAParseError as exc:
            result.error = f"{exc} (after {attempt + 1} attempt{'s' if attempt else ''})"
            request = repair_request(first, completion.text, str(exc))
            continue
        result.pairs, result.problems, result.error = parsed.pairs, parsed.problems, None
        return result
    return result


class GenerationStopped(FatalBackendError):
    """A fatal error (auth, spend limit) stopped generation; ``results`` are the documents finished before it."""

    def __init__(self, message: str, results: list[DocResult]) -> None:
        super().__init__(message)
        self.results = results


async def generate_all(client: ModelClient, docs: Sequence[Document], n: int, retries: int = 1,
                       protocol: str = "longctx") -> list[DocResult]:
    """Generate for every document concurrently (the client's limit applies), in document order.

    A fatal backend error cancels every request not yet answered and raises :class:`GenerationStopped`
    with the documents finished before it, so they can be saved.
    """
    tasks = [asyncio.ensure_future(generate_for_doc(client, d, n, retries, protocol)) for d in docs]
    try:
        await asyncio.gather(*tasks)
    except FatalBackendError as exc:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        finished = [t.result() for t in tasks if not t.cancelled() and t.exception() is None]
        raise GenerationStopped(str(exc), finished) from None
    return [t.result() for t in tasks]


# -- fake models ----------------------------------------------------------------------------------

_FACT = re.compile(r"(?<![\w:.\-])\d(?:[\d,.:]*\d)?(?![\w\-])|(?<=[a-z,] )[A-Z][a-z]+(?: [A-Z][a-z]+)+")


def cloze_pairs(doc: Document, n: int) -> list[tuple[str, str]]:
    """Deterministic fill-in-the-blank pairs (for fake models): a number or name blanked in a sentence."""
    pairs: list[tuple[str, str]] = []
    for start, end in sentence_spans(doc.text):
        sentence = doc.text[start:end].strip()
        match = _FACT.search(sentence)
        if sentence.startswith(("#", "|")) or match is None or len(sentence.split()) < 6:
            continue
        blanked = sentence[:match.start()] + "____" + sentence[match.end():]
        pairs.append((f"In {doc.title}, what fills the blank: \"{blanked}\"?", match.group(0)))
        if len(pairs) == n:
            break
    return pairs


def fake_oracle(doc: Document, n: int) -> Oracle:
    """fake/perfect replies clean JSON; fake/random also replies in fences, prose, with trailing
    commas, a single object, or a refusal with no JSON."""
    pairs = [{"question": q, "answer": a} for q, a in cloze_pairs(doc, n)]
    clean = json.dumps(pairs, ensure_ascii=False)
    wrong = (
        f"```json\n{json.dumps(pairs, indent=2, ensure_ascii=False)}\n```",
        f"Sure! Here are the questions:\n{clean}\nLet me know if you need more.",
        clean.replace('"}', '",}')[:-1] + ",]",
        json.dumps(pairs[0], ensure_ascii=False) if pairs else "{}",
        "I'm sorry, I cannot write questions about this document.",
    )
    return Oracle(answer=clean, wrong=wrong)
