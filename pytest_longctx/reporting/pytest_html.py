"""pytest-html integration: each eval test's row shows its condition, expected and given answer."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest

from pytest_longctx.results.aggregate import records_of

COLUMNS = ("Condition", "Expected", "Answer", "Outcome")
#: Characters of an expected/given answer shown in a pytest-html row.
CELL_LIMIT = 300


def _text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= CELL_LIMIT else text[:CELL_LIMIT - 1] + "…"


def condition_text(record: dict[str, Any]) -> str:
    """``experiment: key=value, ...`` (empty for tests that are not evals)."""
    if not record:
        return ""
    params = ", ".join(f"{k}={_text(v)}" for k, v in record.get("params", {}).items())
    return f"{record.get('experiment', '')}: {params}" if params else str(record.get("experiment", ""))


class HtmlColumns:
    """Registered only when pytest-html is active."""

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        for i, name in enumerate(COLUMNS):
            cells.insert(2 + i, f'<th class="col-longctx{name}">{name}</th>')

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        records = records_of(getattr(report, "user_properties", []))
        rec: dict[str, Any] = records[0] if records else {}
        values = (condition_text(rec), _text(rec.get("expected")), _text(rec.get("answer")),
                  str(rec.get("outcome", "")))
        for i, (name, value) in enumerate(zip(COLUMNS, values, strict=True)):
            cells.insert(2 + i, f'<td class="col-longctx{name}">{html.escape(value)}</td>')
