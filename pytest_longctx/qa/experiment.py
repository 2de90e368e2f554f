"""Session-level data of the multiple-choice QA experiment: sections sized for the model, questions, pool.

Sections are selected with cl100k counts (the study's 200-5000 token recipe, stable across
models) and sized for contexts with the model's own tokenizer, counted once per tokenizer and
cached on disk.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_longctx.context.collage import SEPARATOR, Collage, Piece, build_collage, render
from pytest_longctx.corpus.federal_register import Issue
from pytest_longctx.fsutil import atomic_write_text
from pytest_longctx.qa import baseline
from pytest_longctx.qa.mcqa import Shuffled, shuffle_options
from pytest_longctx.qa.questions import Question

WRAP = "<section>\n{text}\n</section>"


def piece_tokens(issue: Issue, count: Callable[[str], int], tokenizer: str, cache_dir: Path) -> dict[str, int]:
    """Tokens of each wrapped section (plus its separator) under ``tokenizer``, cached per issue."""
    key = hashlib.sha256(f"{issue.sha256}|{tokenizer}|{WRAP}".encode()).hexdigest()[:16]
    path = cache_dir / "tokens" / f"{issue.date}-{key}.json"
    try:
        return {str(k): int(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError):
        pass
    sep = count(SEPARATOR)
    counts = {s.id: count(WRAP.format(text=s.text.strip("\n"))) + sep for s in issue.sections}
    atomic_write_text(path, json.dumps(counts))
    return counts


@dataclass
class QaData:
    """Everything a QA trial needs, loaded once per worker."""

    issue: Issue
    questions: list[Question]
    pieces: dict[str, Piece]
    pool: list[Question]
    excluded: int
    baseline_file: str | None
    tokenizer: str
    fixture_sha: str

    @classmethod
    def load(cls, issue: Issue, questions: list[Question], count: Callable[[str], int], tokenizer: str,
             cache_dir: Path, seed: int, model_spec: str, use_baseline: bool = True) -> QaData:
        tokens = piece_tokens(issue, count, tokenizer, cache_dir)
        pieces = {s.id: Piece(s.id, s.text, tokens[s.id]) for s in issue.sections}
        known = {q.id: q for q in questions if q.section_id in pieces}
        order = sorted(known)
        random.Random(f"qa-pool|{seed}").shuffle(order)
        results = baseline.load(cache_dir, model_spec) if use_baseline else {}
        pool = [known[qid] for qid in order if results.get(qid, True)]
        path = baseline.baseline_path(cache_dir, model_spec)
        digest = hashlib.sha256("\n".join(sorted(q.id + q.answer for q in questions)).encode()).hexdigest()
        return cls(issue, questions, pieces, pool, len(order) - len(pool),
                   str(path) if results else None, tokenizer, digest)

    def full_pool(self, seed: int) -> list[Question]:
        """All questions in the seeded pool order, unfiltered (for the baseline and control)."""
        order = sorted(q.id for q in self.questions if q.section_id in self.pieces)
        random.Random(f"qa-pool|{seed}").shuffle(order)
        by_id = {q.id: q for q in self.questions}
        return [by_id[qid] for qid in order]

    def question(self, sample: int, budget: int | None = None) -> Question:
        """Sample i asks the i-th pool question whose section fits in ``budget`` tokens.

        Every cell of one size asks the same questions, so cells are paired; small budgets can
        only hold short sections and so draw from those.
        """
        pool = [q for q in self.pool if budget is None or self.pieces[q.section_id].tokens <= budget]
        if not pool:
            raise LookupError(f"no question left whose section fits in {budget} tokens after the baseline filter")
        return pool[sample % len(pool)]

    def collage(self, question: Question, budget: int, position: str | float, rng: random.Random) -> Collage:
        gold = self.pieces[question.section_id]
        others = [self.pieces[k] for k in sorted(self.pieces) if k != question.section_id]
        return build_collage(gold, others, budget, position, rng)

    def context_examples(self, collage: Collage, question: Question, count: int, rng: random.Random,
                         ) -> list[Shuffled]:
        """``count`` example questions about other sections present in this context (never the test question)."""
        present = set(collage.ids()) - {question.section_id}
        candidates = sorted((q for q in self.questions if q.section_id in present), key=lambda q: q.id)
        chosen = rng.sample(candidates, min(count, len(candidates)))
        return [shuffle_options(q, rng) for q in chosen]

    @staticmethod
    def render(collage: Collage) -> str:
        return render(collage, WRAP)
