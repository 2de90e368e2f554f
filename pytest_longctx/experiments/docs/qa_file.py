"""The reviewed question/answer file kept beside the documents (``longctx-qa.jsonl``).

One JSON object per line, meant to be read and edited by a person::

    {"id": "menu/1", "doc": "menu.md", "doc_sha": "3f2a...", "status": "approved",
     "question": "...", "answer": "...", "note": "", "generated_by": "anthropic/claude-..."}

``status`` is pending, approved, rejected or stale. An item is pinned to its document's content
hash; when the document changes, approved and pending items become stale (never used) until a
person approves them again. Regenerating adds new pending items and never overwrites existing
ones, so approvals and hand edits survive. Optional fields: ``aliases`` (other accepted answers);
``distractors`` (sentences that share the question's words and answer a near question, each
``{"text", "answer"}``, inserted into the haystack by the distractor condition); ``paraphrase`` (the
low-overlap question: ``{"question", "status", "content_overlap", "bm25", "flagged", "note", "generated_by"}``,
reviewed on its own, see :mod:`.overlap`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.docs.documents import QA_FILENAME, Document
from pytest_longctx.util.fsutil import atomic_write_text

STATUSES = ("pending", "approved", "rejected", "stale")
REVIEW_MODES = ("required", "optional")
#: Status an item is used under, per review mode.
USABLE = {"required": ("approved",), "optional": ("approved", "pending")}
STALE_NOTE = "stale: {doc} changed since this item was written (was {status}); check it, then --approve or --reject"
NOT_VERBATIM_NOTE = "check: answer not found verbatim in the document"
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Distractor:
    """A sentence that shares the question's words and answers a near question, and the answer it gives."""

    text: str
    answer: str

    def to_json(self) -> dict[str, str]:
        return {"text": self.text, "answer": self.answer}


@dataclass
class Paraphrase:
    """The low-overlap form of an item's question, its measured overlap with the answer passage, its review."""

    question: str
    status: str = "pending"
    #: share of the paraphrase's content words found in the answer passage, and its BM25 score there
    content_overlap: float | None = None
    bm25: float | None = None
    #: overlap above :data:`~.overlap.FLAG_ABOVE`: a person should rewrite or reject it
    flagged: bool = False
    note: str = ""
    generated_by: str = "human"

    def to_json(self) -> dict[str, object]:
        return {"question": self.question, "status": self.status, "content_overlap": self.content_overlap,
                "bm25": self.bm25, "flagged": self.flagged, "note": self.note, "generated_by": self.generated_by}


@dataclass
class QAItem:
    """One question about one document, with its review state."""

    id: str
    doc: str
    question: str
    answer: str
    doc_sha: str = ""
    status: str = "pending"
    note: str = ""
    generated_by: str = "human"
    aliases: tuple[str, ...] = field(default=())
    distractors: tuple[Distractor, ...] = field(default=())
    paraphrase: Paraphrase | None = None

    @property
    def golds(self) -> tuple[str, ...]:
        """Every accepted answer: the answer first, then its aliases."""
        return (self.answer, *self.aliases)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "doc": self.doc, "doc_sha": self.doc_sha, "status": self.status,
                                  "question": self.question, "answer": self.answer}
        if self.aliases:
            out["aliases"] = list(self.aliases)
        if self.distractors:
            out["distractors"] = [d.to_json() for d in self.distractors]
        if self.paraphrase is not None:
            out["paraphrase"] = self.paraphrase.to_json()
        out.update(note=self.note, generated_by=self.generated_by)
        return out


def qa_path(folder: Path) -> Path:
    return folder / QA_FILENAME


def squash(text: str) -> str:
    """Lower-case with whitespace collapsed, for duplicate and verbatim checks."""
    return _WS.sub(" ", text).strip().lower()


def parse_item(obj: object, where: str) -> QAItem:
    """One decoded line → QAItem (``id`` may be empty: assigned by :func:`load_qa`)."""
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object with doc, question, answer")
    missing = [k for k in ("doc", "question", "answer") if k not in obj]
    if missing:
        raise UsageError(f"{where}: missing field(s) {', '.join(missing)}; every item needs doc, question, answer")
    answer = obj["answer"]
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(answer)
    values = {"doc": obj["doc"], "question": obj["question"], "answer": answer}
    for key, value in values.items():
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"{where}: '{key}' must be a non-empty string")
    status = obj.get("status") or "pending"
    if status not in STATUSES:
        raise UsageError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}")
    aliases = obj.get("aliases") or []
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise UsageError(f"{where}: 'aliases' must be a list of non-empty strings")
    text = {k: obj.get(k) or "" for k in ("id", "doc_sha", "note")}
    for key, value in text.items():
        if not isinstance(value, str):
            raise UsageError(f"{where}: '{key}' must be a string")
    return QAItem(id=text["id"].strip(), doc=values["doc"].strip(), question=values["question"].strip(),
                  answer=values["answer"].strip(), doc_sha=text["doc_sha"].strip(), status=status,
                  note=text["note"], generated_by=str(obj.get("generated_by") or "human"),
                  aliases=tuple(a.strip() for a in aliases), distractors=_distractors(obj, where),
                  paraphrase=_paraphrase(obj, where))


def _distractors(obj: dict[str, object], where: str) -> tuple[Distractor, ...]:
    given = obj.get("distractors") or []
    if not isinstance(given, list) or not all(
            isinstance(d, dict) and all(isinstance(d.get(k), str) and str(d[k]).strip() for k in ("text", "answer"))
            for d in given):
        raise UsageError(f"{where}: 'distractors' must be a list of {{\"text\": ..., \"answer\": ...}} "
                         "with non-empty strings")
    return tuple(Distractor(str(d["text"]).strip(), str(d["answer"]).strip()) for d in given)


def _paraphrase(obj: dict[str, object], where: str) -> Paraphrase | None:
    given = obj.get("paraphrase")
    if given is None:
        return None
    if not isinstance(given, dict) or not isinstance(given.get("question"), str) or not given["question"].strip():
        raise UsageError(f"{where}: 'paraphrase' must be an object with a non-empty 'question'")
    status = given.get("status") or "pending"
    if status not in STATUSES:
        raise UsageError(f"{where}: paraphrase status {status!r} is not one of {', '.join(STATUSES)}")
    numbers = {k: given.get(k) for k in ("content_overlap", "bm25")}
    if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in numbers.values()):
        raise UsageError(f"{where}: paraphrase content_overlap and bm25 must be numbers (or absent)")
    return Paraphrase(question=given["question"].strip(), status=status,
                      content_overlap=None if numbers["content_overlap"] is None else float(numbers["content_overlap"]),
                      bm25=None if numbers["bm25"] is None else float(numbers["bm25"]),
                      flagged=bool(given.get("flagged")), note=str(given.get("note") or ""),
                      generated_by=str(given.get("generated_by") or "human"))


def load_qa(path: Path) -> list[QAItem]:
    """Read a QA file (missing file → empty list); bad lines are one-line UsageErrors naming file:line."""
    if not path.exists():
        return []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the QA file ({exc}); it must be UTF-8 JSON lines") from None
    items: list[QAItem] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{lineno}: invalid JSON ({exc.msg}); fix the line (one item per line)") from None
        item = parse_item(obj, f"{path}:{lineno}")
        if item.id:
            if item.id in seen:
                raise UsageError(f"{path}:{lineno}: duplicate id {item.id!r} (also line {seen[item.id]}); "
                                 "give each item its own id")
            seen[item.id] = lineno
        items.append(item)
    for item in items:
        if not item.id:
            item.id = next_id(items, item.doc)
    return items


def save_qa(path: Path, items: Iterable[QAItem]) -> None:
    """Write items one per line, grouped by document (atomic: a crash never leaves half a file)."""
    ordered = sorted(items, key=lambda it: (it.doc, _id_number(it.id), it.id))
    text = "".join(json.dumps(it.to_json(), ensure_ascii=False) + "\n" for it in ordered)
    try:
        atomic_write_text(path, text)
    except OSError as exc:  # named by the file the user chose, never by the temporary one
        raise UsageError(f"{path}: cannot write the QA file ({exc.strerror or type(exc).__name__})") from None


def next_id(items: Iterable[QAItem], doc: str) -> str:
    """``<doc without suffix>/<n>`` with n one past the highest used for that document."""
    stem = doc.rsplit(".", 1)[0] if "." in doc.rsplit("/", 1)[-1] else doc
    used = [_id_number(it.id) for it in items if it.id.rsplit("/", 1)[0] == stem]
    return f"{stem}/{max(used, default=0) + 1}"


def _id_number(item_id: str) -> int:
    tail = item_id.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def effective_status(item: QAItem, docs: Mapping[str, Document]) -> str:
    """The status to act on now: ``missing`` without its document, ``stale`` if the document changed."""
    doc = docs.get(item.doc)
    if doc is None:
        return "missing"
    if item.status in ("approved", "pending") and item.doc_sha and item.doc_sha != doc.sha:
        return "stale"
    return item.status


def refresh(items: list[QAItem], docs: Mapping[str, Document]) -> list[str]:
    """Pin unpinned items, mark items of changed documents stale; one line per change."""
    changes: list[str] = []
    for item in items:
        doc = docs.get(item.doc)
        if doc is None:
            continue
        if not item.doc_sha:
            item.doc_sha = doc.sha
        elif effective_status(item, docs) == "stale":
            item.note = STALE_NOTE.format(doc=item.doc, status=item.status)
            changes.append(f"{item.id}: {item.doc} changed since it was {item.status}; now stale")
            item.status = "stale"
    return changes


def usable_items(items: Iterable[QAItem], docs: Mapping[str, Document], review: str) -> list[QAItem]:
    """Items an experiment may use under ``review`` mode (never stale, rejected or orphaned), sorted by id."""
    return sorted((it for it in items if effective_status(it, docs) in USABLE[review]), key=lambda it: it.id)


def needs_generation(items: Iterable[QAItem], doc: Document) -> bool:
    """True when ``doc`` has no pending or approved item for its current content."""
    return not any(it.doc == doc.name and it.doc_sha == doc.sha and it.status in ("pending", "approved")
                   for it in items)


def add_generated(items: list[QAItem], doc: Document, pairs: Iterable[tuple[str, str]],
                  generated_by: str) -> tuple[list[QAItem], int]:
    """Append new pending items for ``doc``, skipping questions it already has for its current text
    or that a person rejected (a stale item's question may come back, pinned to the new text).

    Returns the items added and how many duplicates were skipped.
    """
    known = {squash(it.question) for it in items
             if it.doc == doc.name and (it.doc_sha == doc.sha or it.status == "rejected")}
    added: list[QAItem] = []
    duplicates = 0
    for question, answer in pairs:
        if squash(question) in known:
            duplicates += 1
            continue
        known.add(squash(question))
        note = "" if squash(answer) in squash(doc.text) else NOT_VERBATIM_NOTE
        item = QAItem(id=next_id(items, doc.name), doc=doc.name, question=question, answer=answer,
                      doc_sha=doc.sha, status="pending", note=note, generated_by=generated_by)
        items.append(item)
        added.append(item)
    return added, duplicates


def set_status(items: list[QAItem], ids: Iterable[str], status: str, docs: Mapping[str, Document]) -> list[QAItem]:
    """Set ``status`` on the named items (unknown ids are a UsageError); approving re-pins to the current text."""
    by_id = {it.id: it for it in items}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise UsageError(f"unknown item id(s) {', '.join(unknown)}; `review DIR` lists the ids")
    changed = []
    for item_id in ids:
        item = by_id[item_id]
        item.status = status
        doc = docs.get(item.doc)
        if status == "approved" and doc is not None:
            item.doc_sha = doc.sha
        if item.note.startswith("stale:"):
            item.note = ""
        if status == "approved" and doc is not None and squash(item.answer) not in squash(doc.text):
            item.note = NOT_VERBATIM_NOTE
        changed.append(item)
    return changed


def status_counts(items: Iterable[QAItem], docs: Mapping[str, Document]) -> dict[str, int]:
    """Items per effective status, in a fixed order (statuses with no items omitted)."""
    counts: dict[str, int] = {}
    for item in items:
        status = effective_status(item, docs)
        counts[status] = counts.get(status, 0) + 1
    return {s: counts[s] for s in (*STATUSES, "missing") if s in counts}
