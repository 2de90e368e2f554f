"""Re-runs keep the level: a sequential run's final look is taken once per test, not once per extension.

Each alarm's level alpha / m is spent a quarter by its e-process and the rest by one fixed-design look at the end
of the design (:func:`~pytest_longctx.results.eprocess.split`). A re-run over a cached run with more samples
(same model, same compared record) is the same test looked at again: its final look would spend the rest again
(three extensions at 0.05: 8% false alarms for unrelated models, ``tests/test_sequential_rerun.py``). So the
record's ``sequential.spent`` says what a run spent (the model, the compared record's sha256, the final look's
level), and a sequential run whose report dir already holds the record of one that made its final look for the
same model and compared record is refused (exit 4) with a line naming that record and how to start fresh.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_longctx.corpus.lookup import sha256_of
from pytest_longctx.reporting.writer import HISTORY_DIR, RECORD_NAME


def fingerprint(path: Path) -> str:
    """The compared record's sha256 (hex): which baseline a sequential run tested against."""
    return sha256_of(path)


def spent(model: str, compared: str, alpha: float, final_level: float, final_look: bool) -> dict[str, Any]:
    """The record's ``sequential.spent``: what this run took from the test's level (the final look's level per
    alarm only when it made its final look; the e-process's share is spent by every look, continued or not)."""
    return {"model": model, "compared_sha256": compared, "alpha": alpha,
            "final_look_level": round(final_level, 8) if final_look else 0.0, "final_look": final_look}


def _records(report_dir: Path) -> list[Path]:
    """The report dir's last record, then its history, newest first."""
    history = report_dir / HISTORY_DIR
    older = sorted(history.glob("*.json"), reverse=True) if history.is_dir() else []
    return [p for p in [report_dir / RECORD_NAME, *older] if p.is_file()]


def earlier_look(report_dir: Path, model: str, compared: str) -> Path | None:
    """The record in ``report_dir`` of a sequential run of ``model`` against the compared record ``compared``
    (sha256) that made its final look; None when there is none (an unreadable record is not one)."""
    for path in _records(report_dir):
        try:
            text = path.read_text(encoding="utf-8")
            if compared not in text:  # cheap: most records are of other runs
                continue
            seq = json.loads(text).get("sequential") or {}
        except (OSError, ValueError, AttributeError):
            continue
        mark = seq.get("spent") if isinstance(seq, dict) else None
        if (isinstance(mark, dict) and mark.get("final_look") and mark.get("model") == model
                and mark.get("compared_sha256") == compared):
            return path
    return None


def refusal(report_dir: Path, model: str, compare: Path, compared: str) -> str | None:
    """The one-line usage error for a sequential run that would take a second final look (None: none taken)."""
    path = earlier_look(report_dir, model, compared)
    if path is None:
        return None
    return (f"--longctx-sequential: {path} is a sequential run of {model} against this --longctx-compare record "
            f"({compare}) that already made its final look; another run (more samples or not) would spend its level "
            f"again and raise the false alarms above --longctx-alpha. To start a fresh test, pass a new "
            f"--longctx-report-dir (or move that record and its history away)")
