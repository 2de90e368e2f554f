"""Generating a question set for any Federal Register issue with a Claude model.

One request per kept section (the few-shot prompt of :mod:`.generate_prompt`, temperature 0,
through :class:`~pytest_longctx.dispatch.client.ModelClient` and the Anthropic backend, so retries, fatal
errors and the response cache behave as in the evals). Every item the reply holds is checked like
the shipped set (:func:`~pytest_longctx.experiments.qa.questions.validate` plus :func:`.generate_parse.item_problems`);
kept items go to the output file in the shipped schema, everything else to ``<out>.rejected.jsonl``
with its reason. A section with a line in either file is done, so an interrupted run resumes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_longctx import ModelClient
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.errors import BackendError, FatalBackendError, UsageError
from pytest_longctx.experiments.qa.federal_register import Issue, Section, load_issue, locate
from pytest_longctx.experiments.qa.generate_parse import Draft, item_problems, parse_reply, verbatim
from pytest_longctx.experiments.qa.generate_prompt import QUESTIONS_PER_SECTION, Example, build_request, pick_examples
from pytest_longctx.experiments.qa.questions import Question, normalize, validate
from pytest_longctx.util.fsutil import atomic_write_text
from pytest_longctx.util.jsonl import read_jsonl

#: Characters of a reply kept in a rejected record when nothing could be read from it.
RAW_CHARS = 4000


def open_issue(date: str, data_dir: str | None, cache_dir: Path) -> Issue:
    """Locate (or download once) and split an issue; problems are one-line UsageErrors."""
    corpora = cache_dir / "corpora"
    try:
        path = locate(date, path=None, data_dir=data_dir, cache_dir=corpora)
    except UsageError as exc:
        raise UsageError(str(exc).replace("--longctx-data-dir", "--data-dir")) from None
    return load_issue(path, date, TiktokenCounter(), corpora)


def question_record(q: Question) -> dict[str, Any]:
    """A question in the shipped JSONL schema (same keys, same order)."""
    return {"id": q.id, "section_id": q.section_id, "kind": q.kind, "question": q.question, "answer": q.answer,
            "distractors": list(q.distractors), "evidence": q.evidence}


def _draft_record(section_id: str, d: Draft) -> dict[str, Any]:
    return {"id": f"{section_id}/q{d.n}", "section_id": section_id, "kind": d.kind, "question": d.question,
            "answer": d.answer, "distractors": d.distractors, "evidence": d.evidence}


@dataclass
class Outcome:
    """What one section's reply gave: kept questions and the records of everything left out."""

    section_id: str
    kept: list[Question] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The model call failed after retries: nothing is written, a rerun tries again.
    error: str | None = None

    def count(self, stage: str) -> int:
        return sum(1 for r in self.rejected if r["stage"] == stage)

    def summary(self) -> str:
        """One line for the terminal: kept / rejected / unparseable (or why it failed)."""
        if self.error is not None:
            return f"{self.section_id}: FAILED ({self.error}); rerun to retry this section"
        kinds = {k: sum(q.kind == k for q in self.kept) for k in QUESTIONS_PER_SECTION}
        shape = " + ".join(f"{n} {k}" for k, n in kinds.items())
        line = (f"{self.section_id}: kept {len(self.kept)} ({shape}), rejected {self.count('rejected')}, "
                f"unparseable {self.count('unparseable')}")
        return line + "".join(f"; {n}" for n in self.notes)


def review(section_id: str, reply: str, sections: Mapping[str, str]) -> Outcome:
    """Parse and check one reply (pure). At most four text and one numerical question are kept."""
    out = Outcome(section_id)
    drafts = parse_reply(reply)
    if not drafts:
        out.notes.append("no <question> element in the reply")
        out.rejected.append({"section_id": section_id, "stage": "unparseable",
                             "reason": "no <question> element in the reply", "raw": reply[:RAW_CHARS]})
        return out
    text = sections[section_id]
    seen: dict[str, int] = {}
    candidates: list[Question] = []
    for d in drafts:
        missing = d.missing()
        if missing:
            out.rejected.append({**_draft_record(section_id, d), "stage": "unparseable",
                                 "reason": f"missing {', '.join(missing)}", "raw": d.raw})
            continue
        problems = []
        if len(d.distractors) != 3:
            problems.append(f"{len(d.distractors)} distractors (exactly 3 needed)")
        assert d.question is not None and d.evidence is not None
        d.evidence = verbatim(d.evidence, text) or d.evidence
        key = normalize(d.question).lower()
        if key in seen:
            problems.append(f"repeats the question of q{seen[key]}")
        seen.setdefault(key, d.n)
        if problems:
            out.rejected.append({**_draft_record(section_id, d), "stage": "rejected", "reason": "; ".join(problems)})
        else:
            candidates.append(d.to_question(section_id))
    issues = {q.id: item_problems(q) for q in candidates}
    for line in validate(candidates, sections):
        qid, _, problem = line.partition(": ")
        issues[qid].append(problem)
    quota = dict(QUESTIONS_PER_SECTION)
    for q in candidates:
        if not issues[q.id] and quota.get(q.kind, 0) <= 0:
            per = " + ".join(f"{n} {k}" for k, n in QUESTIONS_PER_SECTION.items())
            issues[q.id].append(f"one {q.kind} question too many (a section gets {per})")
        if issues[q.id]:
            out.rejected.append({**question_record(q), "stage": "rejected", "reason": "; ".join(issues[q.id])})
        else:
            quota[q.kind] -= 1
            out.kept.append(q)
    out.rejected.sort(key=_qnum)
    if len(drafts) != 5:
        out.notes.append(f"the reply had {len(drafts)} questions, not 5")
    return out


async def generate_section(client: ModelClient, section: Section, date: str, examples: Sequence[Example],
                           sections: Mapping[str, str]) -> Outcome:
    """Ask for one section's questions and review the reply; a failed call is an Outcome with ``error``."""
    request = build_request(section.id, section.text, date, pick_examples(examples, section.id))
    try:
        completion = await client.complete(request)
    except FatalBackendError:
        raise
    except BackendError as exc:
        return Outcome(section.id, error=str(exc))
    out = review(section.id, completion.text, sections)
    if completion.stop_reason == "max_tokens":
        out.notes.append("reply cut at max_tokens")
    return out


@dataclass(frozen=True)
class OutputFiles:
    """The kept-questions file and its ``.rejected.jsonl`` sibling."""

    out: Path

    @property
    def rejected(self) -> Path:
        name = self.out.name.removesuffix(".jsonl")
        return self.out.with_name(f"{name}.rejected.jsonl")

    def done(self) -> set[str]:
        """Sections with a line in either file (written by an earlier run)."""
        return {str(r.get("section_id")) for path in (self.out, self.rejected) for r in read_records(path)}

    def append(self, outcome: Outcome) -> None:
        """Write one section's lines (one write per file, so an interrupted run leaves whole lines)."""
        for path, records in ((self.out, [question_record(q) for q in outcome.kept]),
                              (self.rejected, outcome.rejected)):
            if records:
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a", encoding="utf-8") as fh:
                    fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))

    def sort(self, order: Mapping[str, int]) -> None:
        """Rewrite both files in issue order (then question number), atomically."""
        for path in (self.out, self.rejected):
            if not path.is_file():
                continue
            records = read_records(path)
            records.sort(key=lambda r: (order.get(str(r.get("section_id")), len(order)), _qnum(r)))
            try:
                atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
            except OSError as exc:  # named by the user's file, never by the temporary one
                raise UsageError(f"{path}: cannot rewrite it in issue order ({exc.strerror or exc}); "
                                 "its lines are complete, in generation order") from None


def _qnum(record: Mapping[str, Any]) -> int:
    tail = str(record.get("id") or "").rpartition("/q")[2]
    return int(tail) if tail.isdigit() else 0


def read_records(path: Path) -> list[dict[str, Any]]:
    """JSON objects of a JSONL file ([] when absent); a bad line is a UsageError naming file:line."""
    return [obj for _, obj in read_jsonl(path)] if path.is_file() else []


async def generate_all(client: ModelClient, targets: Sequence[Section], date: str, examples: Sequence[Example],
                       sections: Mapping[str, str], files: OutputFiles,
                       report: Callable[[Outcome], None]) -> list[Outcome]:
    """Generate for ``targets`` concurrently; each section is written and reported as it finishes.

    A fatal backend error (auth, spend limit) cancels what is still running and propagates; the
    sections finished before it stay written.
    """
    tasks = [asyncio.ensure_future(generate_section(client, s, date, examples, sections)) for s in targets]
    outcomes = []
    try:
        for next_done in asyncio.as_completed(tasks):
            outcome = await next_done
            if outcome.error is None:
                files.append(outcome)
            report(outcome)
            outcomes.append(outcome)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return outcomes
