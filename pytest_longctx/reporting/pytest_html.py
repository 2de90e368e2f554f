"""pytest-html integration: each eval test's row shows its condition, expected and given answer."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest

from pytest_longctx.aggregate import records_of

COLUMNS = ("Condition", "Expected", "Answer", "Outcome")


class HtmlColumns:
    """Registered only when pytest-html is active."""

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        for i, name in enumerate(COLUMNS):
            cells.insert(2 + i, f"<th>{name}</th>")

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        records = records_of(getattr(report, "user_properties", []))
        rec: dict[str, Any] = records[0] if records else {}
        values = (
            f"{rec.get('experiment', '')} " + json.dumps(rec.get("params", {}), sort_keys=True) if rec else "",
            "" if rec.get("expected") is None else str(rec["expected"]),
            "" if rec.get("answer") is None else str(rec["answer"]),
            str(rec.get("outcome", "")),
        )
        for i, value in enumerate(values):
            cells.insert(2 + i, f"<td>{html.escape(value)}</td>")
