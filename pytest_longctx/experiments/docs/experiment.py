"""The docs experiment's session state: documents, reviewed questions, token counts, chunks.

Built once per session (per worker) by ``evals/docs/conftest.py``; every trial then builds its
context from the precomputed per-document token counts, so no trial counts tokens.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_longctx import ModelClient, Request, Trial
from pytest_longctx.context.haystack import Unit
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.docs import haystack, source
from pytest_longctx.experiments.docs.documents import Document, load_documents
from pytest_longctx.experiments.docs.judge import JudgeError, judge_oracle, judge_request, parse_verdict
from pytest_longctx.experiments.docs.overlap import OverlapIndex, sentences
from pytest_longctx.experiments.docs.qa_file import QAItem, load_qa, qa_path, status_counts, usable_items
from pytest_longctx.experiments.docs.retrieval import Chunk, chunk_document, retrieval_detail
from pytest_longctx.experiments.docs.retrievers import Retriever, make_retriever
from pytest_longctx.experiments.docs.scorers import first_line, normalize_answer, score

TEMPLATE = "docs-answer@1"
PROMPT = """Answer the question using the documents below.

{context}

Question: {question}
Answer with a short phrase from the documents, on one line, and nothing else."""
#: Chunks the RAG arm retrieves (about 4 x 200 tokens).
TOP_K = 4
#: Wrong alternatives a fake model may answer (so fake/random is right 1 time in 4).
N_WRONG = 3


class DocsWarning(UserWarning):
    """QA items left out of the run (stale or without their document)."""


@dataclass(frozen=True)
class Graded:
    """The primary scorer's verdict on one answer."""

    correct: bool
    scorer: str


@dataclass
class DocsExperiment:
    """Everything trials share; see :meth:`load`."""

    folder: Path
    docs: dict[str, Document]
    items: list[QAItem]
    blocks: dict[str, str]
    counts: dict[str, int]
    sep_tokens: int
    chunks: dict[str, list[Chunk]]
    budget: int
    scorer: str = "subspan"
    use_judge: bool = True
    fixtures: dict[str, str] = field(default_factory=dict)
    #: ``longctx`` or ``source`` (Snorkel's write-up: its prompts, one pair per document, the judge scores)
    protocol: str = "longctx"
    #: Run seed: which item sample i asks and every context's distractors flow from it (never from the cell)
    seed: int = 0
    #: The RAG arm's retriever (--longctx-docs-retriever; :mod:`.retrievers`)
    retriever: Retriever = field(default_factory=lambda: make_retriever("hybrid"))
    #: Tokens of each distractor sentence of the items (counted once, at load)
    distractor_tokens: dict[str, int] = field(default_factory=dict)
    #: --longctx-docs-review, for which paraphrases are usable
    review: str = "required"
    _overlap: OverlapIndex | None = field(default=None, repr=False)

    @classmethod
    def load(cls, folder: Path, *, count_tokens: Callable[[str], int], budget: int, review: str = "required",
             scorer: str = "subspan", use_judge: bool = True, label: str | None = None, protocol: str = "longctx",
             seed: int = 0, retriever: Retriever | None = None) -> DocsExperiment:
        """Read the folder and its QA file, count tokens once; bad input is a one-line UsageError."""
        docs = {d.name: d for d in load_documents(folder)}
        all_items, items, path = read_items(folder, docs, review, protocol)
        counts = status_counts(all_items, docs)
        summary = ", ".join(f"{n} {s}" for s, n in counts.items()) or "empty"
        if not items:
            wanted = "approved" if review == "required" else "approved or pending"
            raise UsageError(f"{path}: no {wanted} QA items ({summary}); approve some with "
                             f"`longctx-docs review {folder} --approve-all` "
                             "or set longctx_docs_review = optional")
        left_out = {s: n for s, n in counts.items() if s in ("stale", "missing")}
        if left_out:
            warnings.warn(DocsWarning(f"{path}: {', '.join(f'{n} {s}' for s, n in left_out.items())} QA item(s) "
                                      f"left out (document changed or gone); `longctx-docs review "
                                      f"{folder}` shows them"), stacklevel=2)
        if len(docs) < 2:
            raise UsageError(f"{folder}: one document only; the docs experiment needs others as distractors")
        render = haystack.render_block if protocol != "source" else _plain
        blocks = {name: render(name, d.text) for name, d in docs.items()}
        tokens = {name: count_tokens(block) for name, block in blocks.items()}
        too_big = sorted({it.doc for it in items if tokens[it.doc] > budget})
        if too_big:
            raise UsageError(f"{folder / too_big[0]}: {tokens[too_big[0]]:,} tokens, more than the docs context "
                             f"budget of {budget:,} (--longctx-docs-context); split the document or raise the budget")
        sep = count_tokens(haystack.SEPARATOR)
        whole = sum(tokens.values()) + sep * (len(tokens) - 1)
        label = label or str(folder)
        digest = hashlib.sha256("\n".join(f"{n} {d.sha}" for n, d in sorted(docs.items())).encode()).hexdigest()
        return cls(folder=folder, docs=docs, items=items, blocks=blocks, counts=tokens, sep_tokens=sep,
                   chunks={name: chunk_document(name, d.text, count_tokens) for name, d in docs.items()},
                   budget=min(budget, whole), scorer="judge" if protocol == "source" else scorer,
                   use_judge=use_judge or protocol == "source", protocol=protocol, seed=seed,
                   retriever=retriever or make_retriever("hybrid"), review=review,
                   distractor_tokens={d.text: count_tokens(d.text) for it in items for d in it.distractors},
                   fixtures={f"docs:{label}": digest,
                             f"docs-qa:{label}/{path.name}": hashlib.sha256(path.read_bytes()).hexdigest()})

    # -- contexts ---------------------------------------------------------------------------------

    # -- paired cells: sample i asks item i in every cell ------------------------------------------

    def item_for(self, sample: int) -> QAItem:
        """The item sample ``sample`` asks in every depth and size cell (a seeded order of the items)."""
        order = sorted(range(len(self.items)), key=lambda i: self.items[i].id)
        random.Random(f"docs-items|{self.seed}").shuffle(order)
        return self.items[order[sample % len(order)]]

    def rng_for(self, item: QAItem, *parts: object) -> random.Random:
        """A generator that depends on the run seed, the item and ``parts`` only (never on the cell's arm)."""
        return random.Random("|".join(map(str, ("docs", self.seed, item.id, *parts))))

    def _pool(self, item: QAItem, rng: random.Random) -> list[Unit]:
        """The other documents, shuffled."""
        pool = sorted(name for name in self.docs if name != item.doc)
        rng.shuffle(pool)
        return [self.unit(name) for name in pool]

    def unit(self, name: str) -> Unit:
        """A document as the haystack builder takes it: its block and the block's token count."""
        return Unit(name, self.blocks[name], self.counts[name])

    def at_depth(self, item: QAItem, depth: float) -> haystack.Stack:
        """Answer document at ``depth`` % of a context filled to the budget.

        The distractors are the same for every depth of an item; the source protocol shuffles their
        order per depth ("Shuffle and add distractor docs" inside its loop over positions).
        """
        pool = self._pool(item, self.rng_for(item, "pool"))
        reorder = self.rng_for(item, "depth", depth) if self.protocol == "source" else None
        return haystack.at_depth(self.unit(item.doc), pool, self.sep_tokens, self.budget, depth, reorder)

    def of_size(self, item: QAItem, fraction: float) -> haystack.Stack:
        """Answer document plus distractors up to ``fraction`` % of the budget; the same stack in both arms.

        longctx: one distractor order per item, so a smaller context is part of a larger one; source:
        a fresh random set per size ("Create randomly ordered set of distractor docs D" per noise level).
        """
        target = round(fraction / 100 * self.budget)
        rng = self.rng_for(item, "size", fraction)
        pool = self._pool(item, rng if self.protocol == "source" else self.rng_for(item, "pool"))
        return haystack.of_size(self.unit(item.doc), pool, self.sep_tokens, target, rng)

    def render(self, stack: haystack.Stack) -> str:
        return haystack.render(stack)

    def retrieve(self, stack: haystack.Stack, item: QAItem, k: int = TOP_K) -> tuple[str, dict[str, Any]]:
        """The RAG arm: the retriever's top-``k`` chunks of the same documents, and its recall detail."""
        found = self.retriever.rank(item.question, [c for name in stack.docs for c in self.chunks[name]], k)
        context = haystack.SEPARATOR.join(c.text if self.protocol == "source" else
                                          haystack.render_block(f"{c.doc}, part {c.index + 1}", c.text) for c in found)
        return context, {**retrieval_detail(found, item.doc, item.golds), "top_k": k, "retriever": self.retriever.name}

    def whole(self, item: QAItem, room: int = 0) -> haystack.Stack:
        """The knob conditions' context: the answer document among others up to the budget less ``room`` tokens,
        at a boundary drawn from the item (the same for every cell of a condition)."""
        target = max(self.budget - room, 0)
        rng = self.rng_for(item, "whole")
        pool = self._pool(item, self.rng_for(item, "pool"))
        return haystack.of_size(self.unit(item.doc), pool, self.sep_tokens, target, rng)

    # -- the low-overlap condition -----------------------------------------------------------------------

    def paraphrased(self, item: QAItem) -> QAItem:
        """The item asked by its paraphrase (the low-overlap question)."""
        if item.paraphrase is None:
            raise UsageError(f"{item.id}: no paraphrase in the QA file")
        return dataclasses.replace(item, question=item.paraphrase.question)

    def overlap_of(self, item: QAItem, form: str) -> dict[str, Any]:
        """The asked question's overlap with its answer passage (content words, BM25), and the form asked."""
        if self._overlap is None:
            passages = [s for name, doc in sorted(self.docs.items()) for s in sentences(name, doc.text)]
            self._overlap = OverlapIndex(passages)
        question = item.question if form == "literal" else self.paraphrased(item).question
        return {"question_form": form, **self._overlap.measure(question, item.doc, item.golds)}

    # -- asking and scoring -----------------------------------------------------------------------

    def question(self, item: QAItem, context: str) -> Request:
        if self.protocol == "source":
            return source.answer_request(item.question, context)
        return Request.user(PROMPT.format(context=context, question=item.question), max_tokens=48,
                            template=TEMPLATE)

    def wrong_answers(self, item: QAItem, rng: random.Random) -> tuple[str, ...]:
        """For fake models (``Trial.expect``): other documents' answers as plausible wrong ones."""
        gold = f" {normalize_answer(item.answer)} "
        others = sorted({it.answer for it in self.items
                         if it.doc != item.doc and gold not in f" {normalize_answer(it.answer)} "})
        wrong = rng.sample(others, min(N_WRONG, len(others))) if others else ["I don't know."]
        return tuple(wrong)

    async def grade(self, trial: Trial, judge: ModelClient, item: QAItem, answer: str) -> Graded:
        """Score ``answer`` with every scorer, record them all, and return the primary scorer's verdict.

        Records em, f1, subspan, judge (None when off or unreadable), judge_agree (judge == subspan).
        """
        scores = score(answer, item.golds)
        verdict: bool | None = None
        detail: dict[str, Any] = {}
        if self.use_judge:
            raw = trial.raw
            request = (source.judge_request(item.question, item.answer, answer.strip()) if self.protocol == "source"
                       else judge_request(item.question, " / ".join(item.golds), first_line(answer)))
            reply = await trial.ask(request, oracle=judge_oracle(scores.subspan), client=judge)
            trial.raw = raw  # the judge may share the model's client; keep the model's answer as raw
            verdict = parse_verdict(reply)
            if verdict is None:
                detail["judge_reply"] = reply[:300]
        trial.record(scorer=self.scorer, protocol=self.protocol, em=scores.em, f1=scores.f1, subspan=scores.subspan,
                     judge=verdict,
                     judge_agree=None if verdict is None else verdict == scores.subspan, budget=self.budget,
                     fixtures=self.fixtures, **detail)
        if self.scorer == "judge":
            if verdict is None:
                raise JudgeError(f"judge reply has no verdict: {detail['judge_reply'][:120]!r}")
            return Graded(verdict, "judge")
        return Graded(scores.correct(self.scorer), self.scorer)


def _plain(name: str, text: str) -> str:
    """A document in a source-protocol context: its text alone."""
    return text


def read_items(folder: Path, docs: dict[str, Document], review: str,
               protocol: str = "longctx") -> tuple[list[QAItem], list[QAItem], Path]:
    """All items of the folder's QA file and the usable ones (source protocol: the first per document)."""
    path = qa_path(folder)
    if not path.exists():
        raise UsageError(f"{path}: no QA file; run `longctx-docs generate {folder} --model SPEC` "
                         "and review it, or write it by hand (one JSON item per line)")
    all_items = load_qa(path)
    items = usable_items(all_items, docs, review)
    if protocol == "source":
        first: dict[str, QAItem] = {}
        for it in items:
            first.setdefault(it.doc, it)
        items = list(first.values())
    return all_items, items, path
