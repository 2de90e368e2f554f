"""Experiment tables in their sources' layouts: built by each experiment, rendered here.

The seam is :data:`TABLE_BUILDERS` (experiment name -> ``"module:function"``, imported lazily). A
builder takes that experiment's cells and trials from the run record (plain dicts) and returns a
list of tables as plain JSON::

    {"experiment": "lrt", "title": "...", "columns": ["lines", "none", "full"],
     "rows": [["500", {"correct": 42, "n": 50}, {"correct": 17, "n": 50}], ...], "note": "..."}

The first entry of a row is its label; every other entry is a string, ``None`` (no such cell), or
``{"correct": k, "n": n}`` (shown as accuracy and k/n). The tables go into the run record under
``tables`` and are rendered in the terminal summary and the HTML report. Issue #13 turns the
mapping into a hook.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_longctx.reporting.charts import esc

#: experiment -> "module:function" building its source tables from (cells, trials).
TABLE_BUILDERS: dict[str, str] = {
    "qa": "pytest_longctx.experiments.qa.report:qa_tables",
    "lrt": "pytest_longctx.experiments.lrt.report:lrt_tables",
    "docs": "pytest_longctx.experiments.docs.report:docs_tables",
}

Builder = Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]], list[dict[str, Any]]]


def _builder(ref: str) -> Builder:
    module, _, name = ref.partition(":")
    fn: Builder = getattr(importlib.import_module(module), name)
    return fn


def experiment_tables(cells: Sequence[Mapping[str, Any]], trials: Sequence[Mapping[str, Any]],
                      notes: list[str] | None = None) -> list[dict[str, Any]]:
    """Every registered experiment's tables for the experiments present in ``cells``.

    A builder that fails adds a note (when ``notes`` is given) instead of losing the run's reports.
    """
    present = {c.get("experiment") for c in cells}
    out: list[dict[str, Any]] = []
    for experiment, ref in TABLE_BUILDERS.items():
        if experiment not in present:
            continue
        mine = [c for c in cells if c.get("experiment") == experiment]
        my_trials = [t for t in trials if t.get("experiment") == experiment]
        try:
            out.extend(_builder(ref)(mine, my_trials))
        except Exception as exc:  # a table must never cost the run its reports
            if notes is not None:
                notes.append(f"{experiment} tables could not be built: {type(exc).__name__}: {exc}")
    return out


def cell_text(value: Any) -> str:
    """``{"correct": 42, "n": 50}`` -> ``0.84 (42/50)``; None -> ``–``; anything else as text."""
    if value is None:
        return "–"
    if isinstance(value, Mapping) and "n" in value:
        n, k = int(value.get("n", 0)), int(value.get("correct", 0))
        return f"{k / n:.2f} ({k}/{n})" if n else "– (0/0)"
    return str(value)


def table_lines(table: Mapping[str, Any]) -> list[str]:
    """The table as aligned plain-text lines: title, header, rows, note."""
    rows = [[str(c) for c in table.get("columns", [])]]
    rows += [[cell_text(v) if i else str(v) for i, v in enumerate(row)] for row in table.get("rows", [])]
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(len(r) for r in rows))]
    lines = [str(table.get("title", ""))]
    for r in rows:
        cols = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False))]
        lines.append(("  " + "  ".join(cols)).rstrip())
    if table.get("note"):
        lines.append("  " + str(table["note"]))
    return lines


def table_html(table: Mapping[str, Any]) -> str:
    """The table as an escaped HTML ``<figure>`` with its title and note."""
    head = "".join(f"<th>{esc(c)}</th>" for c in table.get("columns", []))
    body = "".join("<tr>" + "".join(f"<th>{esc(v)}</th>" if i == 0 else f'<td class="num">{esc(cell_text(v))}</td>'
                                    for i, v in enumerate(row)) + "</tr>" for row in table.get("rows", []))
    note = f'<figcaption class="note">{esc(table["note"])}</figcaption>' if table.get("note") else ""
    return (f'<figure class="source-table"><h4>{esc(table.get("title", ""))}</h4><div class="scroll">'
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{note}</figure>")
