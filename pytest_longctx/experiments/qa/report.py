"""The qa experiment's tables and figures: the study's accuracy table, the size table, charts with chance.

The study (``../shared/seeds/000_4740b4a9b98693a5.txt``) reports, per prompt and examples setting,
how many answers were right with the relevant chunk at the beginning, middle and end of a 70,000 (or
95,000) token collage. :func:`qa_tables` lays the run out the same way, one table per context size, and
adds what an honest reading needs: the tokens each size label actually held, and the baseline filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx.reporting.charts import Figure
from pytest_longctx.reporting.figures import accuracy_lines

Cells = Sequence[Mapping[str, Any]]
Trials = Sequence[Mapping[str, Any]]
CHANCE = 0.25
CHANCE_REF = (CHANCE, "chance 0.25")
POSITIONS = ("beginning", "middle", "end")
#: Rows in the order the study ran them (In [32] .. In [59]), with what each one shows.
VARIANTS = (
    (("plain", "none"), "plain"),
    (("scratchpad", "none"), "scratchpad"),
    (("plain", "general-2"), "plain + 2 general-knowledge examples"),
    (("scratchpad", "general-2"), "scratchpad + 2 general-knowledge examples"),
    (("plain", "context-2"), "plain + 2 examples from the context"),
    (("plain", "context-5"), "plain + 5 examples from the context"),
    (("scratchpad", "context-2"), "scratchpad + 2 examples from the context"),
    (("scratchpad", "context-5"), "scratchpad + 5 examples from the context"),
)


def _detail_values(trials: Trials, key: str) -> list[Any]:
    return [(t.get("detail") or {}).get(key) for t in trials]


def protocol_of(trials: Trials) -> str:
    found = sorted({str(v or "longctx") for v in _detail_values(trials, "protocol")})
    return found[0] if len(found) == 1 else "mixed" if found else "longctx"


def baseline_note(trials: Trials) -> str:
    """Which baseline filtered the questions, and how many it excluded."""
    files = sorted({str(v) for v in _detail_values(trials, "baseline_file") if v})
    excluded = sorted({int(v) for v in _detail_values(trials, "baseline_excluded") if isinstance(v, int)})
    if not files:
        return "no baseline filter (no qa-baseline results stored for this model yet)"
    return f"baseline filter: {', '.join(str(e) for e in excluded)} questions excluded ({', '.join(files)})"


def study_table(cells: Cells, trials: Trials, size: int) -> dict[str, Any] | None:
    """Accuracy per prompt variant (rows, the study's order) × position (columns) at one context size."""
    grid: dict[tuple[str, str, str], dict[str, int]] = {}
    for cell in cells:
        p = cell.get("params", {})
        if p.get("context_tokens") != size or p.get("position") not in POSITIONS:
            continue
        key = (str(p.get("prompt")), str(p.get("examples")), str(p["position"]))
        acc = grid.setdefault(key, {"correct": 0, "n": 0})
        acc["correct"] += int(cell.get("correct", 0))
        acc["n"] += int(cell.get("n", 0))
    if not grid:
        return None
    rows = []
    for (prompt, examples), label in VARIANTS:
        values = [grid.get((prompt, examples, pos)) for pos in POSITIONS]
        if any(v is not None for v in values):
            rows.append([label, *values])
    mine = [t for t in trials if t.get("params", {}).get("context_tokens") == size]
    actual = [int(v) for v in _detail_values(mine, "context_tokens_actual") if isinstance(v, int)]
    held = f"contexts held {min(actual):,}-{max(actual):,} tokens; " if actual else ""
    return {"experiment": "qa", "title": f"QA accuracy by prompt variant and position, {size:,}-token contexts "
                                         f"(protocol {protocol_of(trials)})",
            "columns": ["prompt variant", *POSITIONS], "rows": rows,
            "note": f"Accuracy (correct/n); chance 0.25. {held}{baseline_note(trials)}."}


def size_table(trials: Trials) -> dict[str, Any] | None:
    """Per size label: the tokens its contexts actually held (min / mean / max), and sizes not generated."""
    by_label: dict[int, list[int]] = {}
    for t in trials:
        d = t.get("detail") or {}
        label, actual = t.get("params", {}).get("context_tokens"), d.get("context_tokens_actual")
        if isinstance(label, int) and isinstance(actual, int):
            by_label.setdefault(label, []).append(actual)
    if not by_label:
        return None
    rows = [[f"{label:,}", str(len(v)), f"{min(v):,}", f"{round(sum(v) / len(v)):,}", f"{max(v):,}",
             f"{min(v) / label:.1%}"] for label, v in sorted(by_label.items())]
    notes = sorted({str(n) for n in _detail_values(trials, "size_note") if n})
    tokenizers = sorted({str(n) for n in _detail_values(trials, "tokenizer") if n})
    note = (f"Tokens of the whole context ({', '.join(tokenizers) or 'model tokenizer'}); a context holds its label "
            "less at most 2% (or 250 tokens), never more. " + " ".join(notes))
    return {"experiment": "qa", "title": "QA context sizes: label vs tokens held",
            "columns": ["label", "trials", "min", "mean", "max", "min / label"], "rows": rows, "note": note.strip()}


def qa_tables(cells: Cells, trials: Trials) -> list[dict[str, Any]]:
    """The study's table once per context size, then the size table."""
    sizes = sorted({c["params"]["context_tokens"] for c in cells
                    if isinstance(c.get("params", {}).get("context_tokens"), int) and "position" in c["params"]})
    out = [t for t in (study_table(cells, trials, s) for s in sizes) if t is not None]
    sizes_t = size_table(trials)
    return out + ([sizes_t] if sizes_t else [])


def qa_figures(cells: Cells, trials: Trials) -> list[Figure | None]:
    """Accuracy by position per prompt variant (one chart per size) and by depth per size; chance on each."""
    variant = ("prompt", "examples")
    sizes = sorted({c["params"]["context_tokens"] for c in cells if "position" in c.get("params", {})
                    and isinstance(c["params"].get("context_tokens"), int)})
    figures: list[Figure | None] = []
    unsized = [c for c in cells if "position" in c.get("params", {}) and "context_tokens" not in c["params"]]
    if unsized:
        figures.append(accuracy_lines(unsized, "position", variant, "Accuracy by position, per prompt variant",
                                      ref=CHANCE_REF))
    for size in sizes:
        mine = [{**c, "params": {k: v for k, v in c["params"].items() if k != "context_tokens"}}
                for c in cells if c.get("params", {}).get("context_tokens") == size]  # one size: nothing pooled
        figures.append(accuracy_lines(mine, "position", variant,
                                      f"Accuracy by position, per prompt variant ({size:,} tokens)", ref=CHANCE_REF))
    if any("depth" in c.get("params", {}) and "prompt" in c["params"] for c in cells):
        figures.append(accuracy_lines(cells, "depth", variant, "Accuracy by depth (%), per prompt variant",
                                      ref=CHANCE_REF))
    figures.append(accuracy_lines(cells, "depth", ["context_tokens"], "Accuracy by depth (%), per context size",
                                  ref=CHANCE_REF))
    return figures
