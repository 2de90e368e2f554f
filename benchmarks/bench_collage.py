"""Collage building: precomputed per-section token counts vs re-tokenizing every section per context.

    python benchmarks/bench_collage.py [--contexts 20] [--budget 100000]

Prints both timings measured side by side in one run, and their ratio. Needs the shared Federal Register
issue (../shared/corpora/...) or --xml PATH.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from pytest_longctx.context.collage import Piece, build_collage
from pytest_longctx.corpus.federal_register import load_issue
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.qa.experiment import WRAP, QaData
from pytest_longctx.qa.questions import load_questions

ROOT = Path(__file__).resolve().parents[1]
XML = ROOT.parent / "shared" / "corpora" / "federal_register_2024-02-12" / "current" / "FR-2024-02-12.xml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=20)
    parser.add_argument("--budget", type=int, default=100_000)
    parser.add_argument("--xml", type=Path, default=XML)
    args = parser.parse_args()
    counter = TiktokenCounter()
    with tempfile.TemporaryDirectory() as tmp:
        issue = load_issue(args.xml, "2024-02-12", counter, Path(tmp))
        questions = load_questions(ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl")
        qa = QaData.load(issue, questions, counter.count, counter.name, Path(tmp), 0, "bench/none")

        start = time.perf_counter()
        for i in range(args.contexts):
            q = qa.question(i, args.budget)
            qa.render(qa.collage(q, args.budget, 50, random.Random(i)))
        cached = time.perf_counter() - start

        start = time.perf_counter()
        for i in range(args.contexts):  # the naive way: count every section again for every context
            q = qa.question(i, args.budget)
            pieces = {s.id: Piece(s.id, s.text, counter.count(WRAP.format(text=s.text.strip("\n"))) + 1)
                      for s in issue.sections}
            others = [pieces[k] for k in sorted(pieces) if k != q.section_id]
            collage = build_collage(pieces[q.section_id], others, args.budget, 50, random.Random(i))
            qa.render(collage)
        naive = time.perf_counter() - start

    print(f"{args.contexts} contexts of {args.budget:,} tokens from {len(issue.sections)} sections")
    print(f"precomputed counts : {cached * 1000 / args.contexts:8.2f} ms per context")
    print(f"re-tokenizing      : {naive * 1000 / args.contexts:8.2f} ms per context")
    print(f"speed-up           : {naive / cached:8.1f}x")


if __name__ == "__main__":
    main()
