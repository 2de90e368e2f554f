"""The low-overlap question step: a model rewrites each question to share few words with its answer passage.

``longctx-docs generate DIR --model SPEC --paraphrase`` asks, for every approved or pending item without a
paraphrase (every one with ``--all``), for a rewrite that asks for the same answer while avoiding the answer
sentence's content words. The rewrite's overlap is measured (:mod:`.overlap`) and stored with it as a pending
paraphrase; one above :data:`~.overlap.FLAG_ABOVE` is flagged. ``longctx-docs review DIR --approve-paraphrase ID``
(or ``--reject-paraphrase``) reviews it like the items themselves. Requests go through
:class:`~pytest_longctx.ModelClient`, so replies are cached like any other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_longctx import ModelClient, Oracle, Request, provider_of
from pytest_longctx.errors import BackendError, FatalBackendError
from pytest_longctx.experiments.docs.documents import Document
from pytest_longctx.experiments.docs.jsonish import json_values
from pytest_longctx.experiments.docs.overlap import OverlapIndex, answer_passage, flagged, sentences
from pytest_longctx.experiments.docs.qa_file import Paraphrase, QAItem
from pytest_longctx.experiments.docs.retrieval import terms

TEMPLATE = "docs-paraphrase@1"
PROMPT = """Rewrite the question below so that it asks for the same answer but shares as few words as possible \
with the passage that answers it.

Rules:
- It must still be answerable from the document among many others: refer to the subject by a description, a \
synonym or a related fact, not by the passage's own words.
- Avoid these words of the passage: {avoid}.
- Do not give the answer away.

Document: {name}
Passage: {passage}
Question: {question}
Answer: {answer}

Reply with JSON only: {{"paraphrase": "..."}}"""


def index_of(docs: Mapping[str, Document]) -> OverlapIndex:
    """The overlap index over every sentence of the folder."""
    return OverlapIndex([s for name, doc in sorted(docs.items()) for s in sentences(name, doc.text)])


def paraphrase_request(item: QAItem, passage: str) -> Request:
    avoid = ", ".join(sorted(set(terms(passage)))) or "(none)"
    return Request.user(PROMPT.format(avoid=avoid, name=item.doc, passage=passage, question=item.question,
                                      answer=item.answer), max_tokens=160, template=TEMPLATE)


def parse_paraphrase(text: str) -> str | None:
    """The rewrite from a reply: ``{"paraphrase": ...}``, else its first non-empty line ending in ``?``."""
    for value in json_values(text):
        if isinstance(value, dict):
            found = value.get("paraphrase") or value.get("question")
            if isinstance(found, str) and found.strip():
                return " ".join(found.split())
    line = next((ln.strip() for ln in text.splitlines() if ln.strip().endswith("?")), "")
    return line or None


@dataclass
class Rewrite:
    """One item's paraphrase as generated, or why there is none."""

    item: QAItem
    question: str | None = None
    error: str | None = None


def fake_oracle(item: QAItem) -> Oracle:
    """fake/perfect echoes the question (overlap as the literal's: flagged unless it was low already)."""
    return Oracle(answer=f'{{"paraphrase": "In other words: {item.question}"}}', wrong=("I cannot rewrite it.",))


async def rewrite(client: ModelClient, item: QAItem, passage: str) -> Rewrite:
    oracle = fake_oracle(item) if provider_of(client.backend).in_process else None
    try:
        completion = await client.complete(paraphrase_request(item, passage), oracle)
    except FatalBackendError:
        raise
    except BackendError as exc:
        return Rewrite(item, error=f"model call failed: {exc}")
    found = parse_paraphrase(completion.text)
    if found is None:
        return Rewrite(item, error=f"no paraphrase in the reply: {' '.join(completion.text.split())[:100]!r}")
    return Rewrite(item, found)


async def rewrite_all(client: ModelClient, items: Sequence[QAItem], docs: Mapping[str, Document]) -> list[Rewrite]:
    """Ask for every item's paraphrase concurrently (the client's limit applies), in item order."""
    passages = index_of(docs).chunks
    asked = []
    for item in items:
        passage = answer_passage(passages, item.doc, item.golds)
        asked.append(rewrite(client, item, passage.text if passage else docs[item.doc].text[:2000]))
    return list(await asyncio.gather(*asked))


def attach(found: Sequence[Rewrite], docs: Mapping[str, Document], generated_by: str) -> list[str]:
    """Store each rewrite on its item as a pending paraphrase with its measured overlap; one line per item."""
    index = index_of(docs)
    lines = []
    for result in found:
        if result.question is None:
            lines.append(f"FAILED {result.item.id}: {result.error}")
            continue
        measured = index.measure(result.question, result.item.doc, result.item.golds)
        flag = flagged(measured["content_overlap"])
        note = (f"check: shares {measured['content_overlap']:.2f} of its content words with the answer passage"
                if flag else "")
        result.item.paraphrase = Paraphrase(result.question, "pending", measured["content_overlap"], measured["bm25"],
                                            flag, note, generated_by)
        lines.append(f"{result.item.id}: pending paraphrase, content overlap {measured['content_overlap']}, "
                     f"BM25 {measured['bm25']}{' FLAGGED' if flag else ''}")
    return lines
