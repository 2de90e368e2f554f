"""``python -m pytest_longctx.experiments.needle overlap``: question-needle lexical overlap, per pair and variant."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_longctx import UsageError
from pytest_longctx.experiments.needle.overlap import overlap_table, overlaps, summary
from pytest_longctx.experiments.needle.pairs import FIXTURES, load_data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_longctx.experiments.needle",
                                     description="Tools of the needle experiment.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("overlap", help="content words shared by each needle and its question, and BM25")
    cmd.add_argument("--data", type=Path, default=FIXTURES, help="folder of pairs.jsonl, categories.json, names.txt "
                     "(default: fixtures/needle)")
    args = parser.parse_args(argv)
    try:
        data = load_data(args.data)
    except (UsageError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 4
    table = overlap_table(data.pairs)
    columns = [str(c) for c in table["columns"]]
    rows = [columns, *table["rows"]]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(columns))]
    for row in rows:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    for variant, s in summary(overlaps(data.pairs)).items():
        print(f"{variant}: {s['pairs']:.0f} pairs, mean shared content words {s['mean_shared']:.2f}, "
              f"none shared {s['share_none']:.0%}, mean BM25 {s['mean_bm25']:.2f}, max BM25 {s['max_bm25']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
