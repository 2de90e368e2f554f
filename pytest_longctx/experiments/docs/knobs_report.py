"""The knob conditions in the summary and the tables: the hallucination rate beside accuracy on answerable items,
the distractor miss table, literal vs low-overlap questions with their overlap.

Intervals are the run record's cell intervals, which the core clusters by item (a hallucination rate is one minus
the removed cell's accuracy, its interval the removed cell's interval turned over).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx.experiments.docs.knobs import DISTRACTOR_COUNTS
from pytest_longctx.experiments.docs.report import paired_p

Rows = Sequence[Mapping[str, Any]]


def _cell(cells: Rows, key: str, value: Any) -> Mapping[str, Any] | None:
    return next((c for c in cells if c.get("experiment") == "docs" and c.get("params", {}).get(key) == value
                 and c.get("n")), None)


def _scored(trials: Rows, key: str) -> list[Mapping[str, Any]]:
    return [t for t in trials if t.get("experiment") == "docs" and key in t.get("params", {})
            and t.get("outcome") in ("correct", "incorrect")]


def _by_sample(trials: Rows, key: str, value: Any) -> dict[int, bool]:
    return {int(t.get("sample", 0)): t["outcome"] == "correct" for t in trials if t["params"].get(key) == value}


def _mean(values: Sequence[Any]) -> str:
    numbers = [float(v) for v in values if v is not None]
    return f"{sum(numbers) / len(numbers):.2f}" if numbers else "–"


def unanswerable_line(cells: Rows) -> list[str]:
    removed, present = _cell(cells, "answer_doc", "removed"), _cell(cells, "answer_doc", "present")
    if removed is None:
        return []
    rate = 1 - float(removed["accuracy"])
    line = (f"docs unanswerable: hallucination rate {rate:.3f} [{1 - removed['ci_high']:.3f}, "
            f"{1 - removed['ci_low']:.3f}] (answered with the answer document removed; {removed['n']} trials, "
            f"{removed.get('clusters', removed['n'])} items)")
    if present is not None:
        line += (f"; accuracy on answerable {present['accuracy']:.3f} [{present['ci_low']:.3f}, "
                 f"{present['ci_high']:.3f}]")
    return [line + "; gate with experiment=docs,answer_doc=removed:min=A (abstention rate)"]


def distractor_misses(trials: Rows) -> list[list[Any]]:
    """Rows of the miss table: distractors, accuracy, misses, misses answering distractor #1..#4."""
    scored = _scored(trials, "distractors")
    rows = []
    for count in sorted({t["params"]["distractors"] for t in scored}):
        here = [t for t in scored if t["params"]["distractors"] == count]
        missed = [t for t in here if t["outcome"] == "incorrect"]
        which = [(t.get("detail") or {}).get("distractor_answered") for t in missed]
        rows.append([str(count), {"correct": len(here) - len(missed), "n": len(here)}, str(len(missed)),
                     *(str(sum(1 for w in which if w == j)) for j in range(max(DISTRACTOR_COUNTS)))])
    return rows


def overlap_rows(trials: Rows) -> list[list[Any]]:
    scored = _scored(trials, "question_form")
    literal = _by_sample(scored, "question_form", "literal")
    rows = []
    for form in ("literal", "low-overlap"):
        here = [t for t in scored if t["params"]["question_form"] == form]
        if not here:
            continue
        details = [t.get("detail") or {} for t in here]
        rows.append([form, {"correct": sum(t["outcome"] == "correct" for t in here), "n": len(here)},
                     _mean([d.get("content_overlap") for d in details]), _mean([d.get("bm25") for d in details]),
                     paired_p(literal, _by_sample(scored, "question_form", form)) if form != "literal" else "–"])
    return rows


def unanswerable_table(cells: Rows) -> list[dict[str, Any]]:
    removed, present = _cell(cells, "answer_doc", "removed"), _cell(cells, "answer_doc", "present")
    if removed is None:
        return []
    rows: list[list[Any]] = []
    if present is not None:
        rows.append(["answerable: accuracy", f"{present['correct']}/{present['n']} right",
                     f"{present['accuracy']:.3f} [{present['ci_low']:.3f}, {present['ci_high']:.3f}]"])
    rows.append(["answer document removed: hallucination rate",
                 f"{removed['n'] - removed['correct']}/{removed['n']} answered",
                 f"{1 - removed['accuracy']:.3f} [{1 - removed['ci_high']:.3f}, {1 - removed['ci_low']:.3f}]"])
    return [{"experiment": "docs", "title": "docs unanswerable items: hallucination rate beside accuracy",
             "columns": ["cell", "count", "rate [95% CI, clustered by item]"], "rows": rows,
             "note": "Paired: the same items and contexts, the answer document removed; right there is saying it is "
                     "not there. Gate the removed cell: experiment=docs,answer_doc=removed:min=A."}]


def knob_tables(cells: Rows, trials: Rows) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = unanswerable_table(cells)
    misses = distractor_misses(trials)
    if misses:
        out.append({"experiment": "docs", "title": "docs distractors: accuracy and which distractor a miss answered",
                    "columns": ["distractors", "accuracy", "misses",
                                *(f"answered #{j + 1}" for j in range(max(DISTRACTOR_COUNTS)))],
                    "rows": misses, "note": "Paired: sample i asks the same item in one context, with 0, 1 or 4 of "
                                            "its distractor sentences inserted into other documents."})
    overlap = overlap_rows(trials)
    if overlap:
        out.append({"experiment": "docs", "title": "docs literal vs low-overlap question",
                    "columns": ["question", "accuracy", "content-word overlap", "BM25",
                                "McNemar p vs literal (only literal/only low-overlap)"],
                    "rows": overlap, "note": "Overlap of the asked question with its answer passage (mean over "
                                             "trials). Paired: the same item and context in both forms."})
    return out


def knob_lines(record: Mapping[str, Any]) -> list[str]:
    """Summary lines: the hallucination rate, the distractor misses, the overlap comparison."""
    cells, trials = record.get("cells") or [], record.get("trials") or []
    lines = unanswerable_line(cells)
    misses = distractor_misses(trials)
    if misses:
        parts = [f"{r[0]}: {r[1]['correct']}/{r[1]['n']} right, {r[2]} missed"
                 + (f" ({', '.join(f'#{j + 1} {n}' for j, n in enumerate(r[3:]) if n != '0')} answered a distractor)"
                    if any(n != "0" for n in r[3:]) else "") for r in misses]
        lines.append("docs distractors " + "; ".join(parts))
    overlap = overlap_rows(trials)
    if overlap:
        lines.append("docs question forms " + "; ".join(
            f"{r[0]}: {r[1]['correct']}/{r[1]['n']} right (content overlap {r[2]}, BM25 {r[3]})" for r in overlap))
    return lines
