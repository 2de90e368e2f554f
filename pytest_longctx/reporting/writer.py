"""Writing the run record (with a numbered history of earlier ones) and the HTML report; a plan's own record."""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_longctx.util.fsutil import atomic_write_text

if TYPE_CHECKING:
    from pytest_longctx.reporting.sections import Section

RECORD_NAME = "longctx.json"
#: A plan's (dry run's) record: beside the last run's, which a plan never replaces or moves to the history.
PLAN_RECORD_NAME = "longctx-plan.json"
HTML_NAME = "longctx.html"
#: A stopped (interrupted) run's record and report: beside the last complete run's, which they never replace.
PARTIAL_RECORD_NAME = "longctx.partial.json"
PARTIAL_HTML_NAME = "longctx.partial.html"
HISTORY_DIR = "history"
#: Under the cache dir: where reports go when the report dir cannot take them (the summary names the folder).
FALLBACK_DIR = "reports-fallback"


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


def write_record(record: dict[str, Any], report_dir: Path) -> Path:
    """Archive the previous record and write longctx.json; return its path."""
    archive_previous(report_dir)
    json_path = report_dir / RECORD_NAME
    atomic_write_text(json_path, json.dumps(record, indent=1, ensure_ascii=False, sort_keys=False))
    return json_path


def write_plan_record(record: dict[str, Any], report_dir: Path) -> Path:
    """Write a plan's record to longctx-plan.json (replacing the previous plan's); the run record, its HTML report
    and the history are left as they are."""
    path = report_dir / PLAN_RECORD_NAME
    atomic_write_text(path, json.dumps(record, indent=1, ensure_ascii=False, sort_keys=False))
    return path


def write_reports(record: dict[str, Any], report_dir: Path, sections: Sequence[Section] | None = None) -> list[str]:
    """Write longctx.json and longctx.html; return the paths written (and a line if the HTML failed).

    The record is written first; a bug in HTML rendering costs the HTML report, never the record.
    """
    written = [str(write_record(record, report_dir))]
    return written + _write_html(record, report_dir / HTML_NAME, sections)


def write_partial_reports(record: dict[str, Any], report_dir: Path,
                          sections: Sequence[Section] | None = None) -> list[str]:
    """A stopped run: longctx.partial.json and longctx.partial.html (replacing the previous stopped run's); the
    last complete run's longctx.json, its HTML report and the history are left as they are."""
    path = report_dir / PARTIAL_RECORD_NAME
    atomic_write_text(path, json.dumps(record, indent=1, ensure_ascii=False, sort_keys=False))
    return [str(path), *_write_html(record, report_dir / PARTIAL_HTML_NAME, sections)]


def _write_html(record: dict[str, Any], html_path: Path, sections: Sequence[Section] | None) -> list[str]:
    """The HTML report of ``record`` at ``html_path``; a line saying why instead if it cannot be rendered."""
    from pytest_longctx.reporting.html import render_html

    try:
        html = render_html(record, sections)
    except Exception as exc:  # the record is already safe; say what is missing
        html_path.unlink(missing_ok=True)  # an earlier run's HTML must not pass for this run's
        return [f"could not render the HTML report: {type(exc).__name__}: {exc}"]
    atomic_write_text(html_path, html)
    return [str(html_path)]


def fallback_dir(cache_dir: Path) -> Path:
    """A fresh folder for reports that could not go to the report dir: under the cache dir, else the temp dir."""
    for parent in (cache_dir / FALLBACK_DIR, None):
        try:
            if parent is not None:
                parent.mkdir(parents=True, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=parent))
        except OSError:
            continue
    raise OSError("no writable fallback folder (cache dir and temp dir both failed)")

