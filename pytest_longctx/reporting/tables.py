"""Experiment tables in their sources' layouts: built by each experiment, rendered here.

Experiments build their tables in the ``pytest_longctx_tables`` hook (see ``hookspecs.py``) from the
run record's cells and trials (plain dicts), as plain JSON::

    {"experiment": "lrt", "title": "...", "columns": ["lines", "none", "full"],
     "rows": [["500", {"correct": 42, "n": 50}, {"correct": 17, "n": 50}], ...], "note": "..."}

The first entry of a row is its label; every other entry is a string, ``None`` (no such cell), or
``{"correct": k, "n": n}`` (shown as accuracy and k/n). The tables go into the run record under
``tables`` and are rendered in the terminal summary and the HTML report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_longctx.reporting.charts import esc


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
