"""Collage building: precomputed per-section token counts vs re-tokenizing every section per context.

    python benchmarks/bench_collage.py [--contexts 20] [--budget 100000]

Prints both timings measured side by side in one run, and their ratio. Finds the Federal Register issue
as a run does (--data-dir, $LONGCTX_DATA_DIR, the cache, a download) or takes --xml PATH.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from pytest_longctx.context.haystack import Unit
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.qa.collage import build_collage
from pytest_longctx.experiments.qa.experiment import WRAP, QaData
from pytest_longctx.experiments.qa.federal_register import load_issue, locate
from pytest_longctx.experiments.qa.questions import load_questions

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, default=20)
    parser.add_argument("--budget", type=int, default=100_000)
    parser.add_argument("--xml", type=Path, default=None)
    parser.add_argument("--data-dir", default=None, help="a corpus folder or folder of corpora (../shared/corpora)")
    args = parser.parse_args()
    counter = TiktokenCounter()
    try:
        xml = args.xml or locate("2024-02-12", path=None, data_dir=args.data_dir,
                                 cache_dir=ROOT / ".longctx-cache" / "corpora")
    except UsageError as exc:
        raise SystemExit("error: " + str(exc).replace("--longctx-data-dir", "--data-dir")) from None
    with tempfile.TemporaryDirectory() as tmp:
        issue = load_issue(xml, "2024-02-12", counter, Path(tmp))
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
            pieces = {s.id: Unit(s.id, s.text, counter.count(WRAP.format(text=s.text.strip("\n"))) + 1)
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
