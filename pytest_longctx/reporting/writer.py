"""Writing the run record (with a numbered history of earlier ones) and the HTML report."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from pytest_longctx.fsutil import atomic_write_text

RECORD_NAME = "longctx.json"
HTML_NAME = "longctx.html"
HISTORY_DIR = "history"


def archive_previous(report_dir: Path) -> Path | None:
    """Move an existing longctx.json to history/NNNN.json (next free number)."""
    current = report_dir / RECORD_NAME
    if not current.is_file():
        return None
    history = report_dir / HISTORY_DIR
    history.mkdir(parents=True, exist_ok=True)
    numbers = [int(m.group(1)) for p in history.iterdir() if (m := re.fullmatch(r"(\d+)\.json", p.name))]
    target = history / f"{max(numbers, default=0) + 1:04d}.json"
    os.replace(current, target)
    return target


def write_reports(record: dict[str, Any], report_dir: Path) -> list[str]:
    """Write longctx.json and longctx.html; return the paths written."""
    archive_previous(report_dir)
    json_path = report_dir / RECORD_NAME
    atomic_write_text(json_path, json.dumps(record, indent=1, ensure_ascii=False, sort_keys=False))
    written = [str(json_path)]
    from pytest_longctx.reporting.html import render_html

    html_path = report_dir / HTML_NAME
    atomic_write_text(html_path, render_html(record))
    written.append(str(html_path))
    return written
