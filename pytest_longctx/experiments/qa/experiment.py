"""Session-level data of the multiple-choice QA experiment: sections sized for the model, questions, pool.

Sections are selected with cl100k counts (the study's 200-5000 token recipe, stable across
models) and sized for contexts with the model's own tokenizer, counted once per tokenizer and
cached on disk. Further issues (``--longctx-fr-date A,B``) add distractor sections only. Each built
context is counted as a whole (by the model's counter; tiktoken sums remembered paragraphs, exactly): its
label is what it holds (see :mod:`.sizing`).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_longctx.context.haystack import Haystack, Unit, at_depth
from pytest_longctx.experiments.qa import baseline, source
from pytest_longctx.experiments.qa.collage import SEPARATOR, WRAP, depth_of, render
from pytest_longctx.experiments.qa.design import BlockDesign, Cell, block_design
from pytest_longctx.experiments.qa.federal_register import Issue
from pytest_longctx.experiments.qa.mcqa import Shuffled, shuffle_options
from pytest_longctx.experiments.qa.questions import Question
from pytest_longctx.experiments.qa.sizing import fill_close, tolerance
from pytest_longctx.util.fsutil import atomic_write_text


@dataclass(frozen=True)
class Format:
    """How sections are written into a context: wrapper, separator, and whether edge newlines are stripped."""

    wrap: str
    separator: str
    strip: bool

    def text(self, section_text: str) -> str:
        return self.wrap.format(text=section_text.strip("\n") if self.strip else section_text)


#: This suite's format, and the source's (raw chunks joined by four newlines, In [28]).
FORMATS = {"longctx": Format(WRAP, SEPARATOR, True), "source": Format("{text}", source.SEPARATOR, False)}


def piece_tokens(issue: Issue, count: Callable[[str], int], tokenizer: str, cache_dir: Path,
                 fmt: Format = FORMATS["longctx"]) -> dict[str, int]:
    """Tokens of each written section (plus its separator) under ``tokenizer``, cached per issue."""
    key = hashlib.sha256(f"{issue.sha256}|{tokenizer}|{fmt.wrap}|{fmt.separator!r}|{fmt.strip}".encode()
                         ).hexdigest()[:16]
    path = cache_dir / "tokens" / f"{issue.date}-{key}.json"
    try:
        return {str(k): int(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError):
        pass
    sep = count(fmt.separator)
    counts = {s.id: count(fmt.text(s.text)) + sep for s in issue.sections}
    atomic_write_text(path, json.dumps(counts))
    return counts


@dataclass(frozen=True)
class Built:
    """One context: the collage, its text, and its tokens counted as a whole."""

    collage: Haystack
    text: str
    tokens: int


@dataclass
class QaData:
    """Everything a QA trial needs, loaded once per worker."""

    issue: Issue
    questions: list[Question]
    pieces: dict[str, Unit]
    pool: list[Question]
    excluded: int
    baseline_file: str | None
    tokenizer: str
    fixture_sha: str
    protocol: str = "longctx"
    #: Distractor sections from further issues (``--longctx-fr-date A,B``), ids prefixed ``<date>:``.
    extra: dict[str, Unit] = field(default_factory=dict)
    count: Callable[[str], int] | None = None
    #: Questions with a stored baseline result (answered right or not).
    baseline_known: int = 0
    #: Built contexts of this process: their collage and whole-text count (see :meth:`build`).
    _built: dict[str, tuple[Haystack, int]] = field(default_factory=dict)
    _fits: dict[str, bool] = field(default_factory=dict)
    _eligible: dict[int | None, list[Question]] = field(default_factory=dict)

    @classmethod
    def load(cls, issue: Issue, questions: list[Question], count: Callable[[str], int], tokenizer: str,
             cache_dir: Path, seed: int, model_spec: str, use_baseline: bool = True, *,
             protocol: str = "longctx", extra: Sequence[Issue] = ()) -> QaData:
        fmt = FORMATS[protocol]
        tokens = piece_tokens(issue, count, tokenizer, cache_dir, fmt)
        pieces = {s.id: Unit(s.id, s.text, tokens[s.id]) for s in issue.sections}
        more: dict[str, Unit] = {}
        for other in extra:
            counts = piece_tokens(other, count, tokenizer, cache_dir, fmt)
            more.update({f"{other.date}:{s.id}": Unit(f"{other.date}:{s.id}", s.text, counts[s.id])
                         for s in other.sections})
        known = {q.id: q for q in questions if q.section_id in pieces}
        order = sorted(known)
        random.Random(f"qa-pool|{seed}").shuffle(order)
        results = baseline.load(cache_dir, model_spec, protocol) if use_baseline else {}
        pool = [known[qid] for qid in order if results.get(qid, True)]
        path = baseline.baseline_path(cache_dir, model_spec, protocol)
        digest = hashlib.sha256("\n".join(sorted(q.id + q.answer for q in questions)).encode()).hexdigest()
        return cls(issue, questions, pieces, pool, len(order) - len(pool),
                   str(path) if results else None, tokenizer, digest, protocol, more, count,
                   sum(1 for qid in order if qid in results))

    @property
    def fmt(self) -> Format:
        return FORMATS[self.protocol]

    def capacity(self) -> int:
        """Tokens of every section this run can draw on (the question's issue and any further ones)."""
        return sum(p.tokens for p in self.pieces.values()) + sum(p.tokens for p in self.extra.values())

    def full_pool(self, seed: int) -> list[Question]:
        """All questions in the seeded pool order, unfiltered (for the baseline and control)."""
        order = sorted(q.id for q in self.questions if q.section_id in self.pieces)
        random.Random(f"qa-pool|{seed}").shuffle(order)
        by_id = {q.id: q for q in self.questions}
        return [by_id[qid] for qid in order]

    def question(self, sample: int, budget: int | None = None) -> Question:
        """Sample i asks the i-th pool question whose section fits in ``budget`` tokens (see :meth:`draw`)."""
        return self.draw(sample, budget)[0]

    def draw(self, sample: int, budget: int | None = None) -> tuple[Question, str]:
        """Sample i asks the i-th pool question whose section fits in ``budget`` tokens, and the draw's key.

        Every cell of one size asks the same questions, so cells are paired; small budgets can only hold short
        sections and so draw from those. The pool's order is the same for every model (seeded by the run seed),
        so a model's own baseline filter removes questions without reordering the rest. The key is the question
        id (``id#k`` on the k-th pass when there are more samples than questions): contexts and option orders
        are drawn from it, not from the sample index, so two models asking one question see the same prompt.
        """
        if budget not in self._eligible:  # once per size, not once per trial
            self._eligible[budget] = [q for q in self.pool if budget is None or self.fits(q, budget)]
        pool = self._eligible[budget]
        if not pool:
            raise LookupError(f"no question left whose section fits in {budget} tokens after the baseline filter")
        question, repeat = pool[sample % len(pool)], sample // len(pool)
        return question, question.id + (f"#{repeat}" if repeat else "")

    def fits(self, question: Question, budget: int) -> bool:
        """Whether a context of ``budget`` tokens around this question's section can be filled within tolerance
        (its section must fit, and the other sections must be able to make up the rest)."""
        key = f"{question.section_id}|{budget}"
        if key not in self._fits:
            gold = self.pieces[question.section_id]
            ok = gold.tokens <= budget
            if ok:
                others = [self.pieces[k] for k in sorted(self.pieces) if k != gold.id]
                others += [self.extra[k] for k in sorted(self.extra)]
                used = gold.tokens + sum(p.tokens for p in fill_close(gold, others, budget, random.Random(key)))
                ok = used >= budget - tolerance(budget)
            self._fits[key] = ok
        return self._fits[key]

    def design(self, seed: int, variants: Sequence[str], sizes: Sequence[int], depth_sizes: Sequence[int],
               per_cell: int) -> BlockDesign:
        """The incomplete block design of this run (:mod:`.design`), over every question in the seeded pool order
        before the baseline filter (so models whose baselines differ ask the same questions in the same cells,
        less the ones each filters out); a question goes only to sizes whose contexts can be filled around it."""
        by_id = {q.id: q for q in self.questions}
        order = [q.id for q in self.full_pool(seed)]
        return block_design(order, lambda qid, size: self.fits(by_id[qid], size), variants, sizes, depth_sizes,
                            per_cell, section_of=lambda qid: by_id[qid].section_id)

    def design_draw(self, design: BlockDesign, cell: Cell, sample: int) -> Question | str:
        """Sample i of a design cell asks the cell's i-th question; a reason instead when the cell has fewer
        questions than samples, or the model's own baseline filter excludes the question."""
        ids = design.questions(cell)
        if sample >= len(ids):
            return (f"the qa block design has {len(ids)} question(s) for this cell (too few sections fit "
                    f"{cell[2]:,} tokens), not {sample + 1}")
        wanted = ids[sample]
        kept = {q.id: q for q in self.pool}
        if wanted not in kept:
            return f"{wanted} is excluded by this model's qa-baseline ({self.baseline_file})"
        return kept[wanted]

    def question_at(self, sample: int) -> Question | None:
        """``--longctx-samples all``: the sample-th eligible question, None past the end."""
        return self.pool[sample] if sample < len(self.pool) else None

    def collage(self, question: Question, budget: int, position: str | float, rng: random.Random) -> Haystack:
        """The relevant section among shuffled others filling ``budget`` (by per-section counts, each with its
        separator: the core builder with ``separator=0``)."""
        gold = self.pieces[question.section_id]
        others = [self.pieces[k] for k in sorted(self.pieces) if k != question.section_id]
        others += [self.extra[k] for k in sorted(self.extra)]
        fillers = fill_close(gold, others, budget, rng)
        if self.protocol == "source":
            return source.place(gold, fillers, str(position))
        return at_depth(gold, fillers, depth_of(position))

    def build(self, question: Question, budget: int, position: str | float, seed: str) -> Built:
        """A context whose whole-text token count is within tolerance of ``budget`` and never above it.

        Per-section counts add up slightly differently from the joined text's count; when the text comes
        out over the budget, the collage is rebuilt (same seed) against a budget lowered by the excess.
        The collage and its count are kept per process (every prompt variant of a cell position builds the same
        context), so each context is assembled and counted once; its text is rendered again each time.
        """
        memo = f"{question.id}|{budget}|{position}|{seed}"
        if memo in self._built:
            collage, tokens = self._built[memo]
            return Built(collage, self.render(collage), tokens)
        if self.count is None:
            raise ValueError("QaData was loaded without a token counter")
        target, short = budget, 0
        for attempt in range(6):
            collage = self.collage(question, target, position, random.Random(f"{seed}|{attempt}" if attempt else seed))
            text = self.render(collage)
            tokens = self.count(text)
            if tokens > budget:
                target -= tokens - budget + 8
                continue
            if tokens >= budget - tolerance(budget):
                self._built[memo] = (collage, tokens)
                return Built(collage, text, tokens)
            short = tokens  # another shuffle may fill it; the label must hold
        if short:
            raise ValueError(f"context for {question.id} holds {short:,} tokens, more than "
                             f"{tolerance(budget):,} short of its {budget:,}-token label")
        raise ValueError(f"context for {question.id} stays above its {budget:,}-token label")

    def context_examples(self, collage: Haystack, question: Question, count: int, rng: random.Random,
                         ) -> list[Shuffled]:
        """``count`` example questions about other sections present in this context (never the test question).

        Under the source protocol they come from the baseline-filtered questions, as the study drew them
        from its filtered table (In [56]).
        """
        present = set(collage.ids()) - {question.section_id}
        source_set = self.pool if self.protocol == "source" else self.questions
        candidates = sorted((q for q in source_set if q.section_id in present), key=lambda q: q.id)
        chosen = rng.sample(candidates, min(count, len(candidates)))
        return [shuffle_options(q, rng) for q in chosen]

    def render(self, collage: Haystack) -> str:
        if self.protocol == "source":
            return source.render(collage)
        return render(collage, WRAP)
