"""Re-runs keep the level: a sequential test is decided once, not once per extension.

Each alarm's level alpha / m is spent partly by its e-process (``EPROCESS_SHARE``) and the rest by one
fixed-design look at the end of the design (:func:`~pytest_longctx.results.eprocess.split`). A re-run over a
cached run with more samples (same model, same compared record) is the same test looked at again:

* after a **final look** it would spend the rest again (three extensions at 0.05: 8% false alarms for unrelated
  models, ``tests/test_sequential_rerun.py``);
* after an alarm **settled by its e-process** (fired or cleared before the end), the extension's e-process is not
  the settled one continued: its design is larger, so its scale (the largest item), its bets and its planned items
  differ from the first run's, and the first run's items are bet on again with other stakes. Its looks are then a
  second e-process over the same items, whose level Ville's inequality does not share with the first.

Both are refused. The record's ``sequential.spent`` says what a run spent (the model, the compared record's sha256,
the final look's level); a sequential run whose report dir (its record or ``history/``) holds the record of one of
the same model and compared record that made its final look, or in which an alarm was settled by its e-process, is
refused before any request (exit 4) with one line naming that record and what to do: a fresh
``--longctx-report-dir`` (a new test, at its own level), or a new baseline to compare with. A sequential run that
ended before settling anything (budget, interruption) may be extended: its e-processes are recomputed over the
same items in the same order from the cache and nothing was decided.
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


def _decided(seq: dict[str, Any]) -> str | None:
    """How a sequential record's test was decided (None: it was not): its final look, or an alarm settled by its
    e-process."""
    if (seq.get("spent") or {}).get("final_look"):
        return "made its final look"
    settled = [a for a in seq.get("alarms") or [] if isinstance(a, dict) and a.get("settled_by") == "e-process"]
    if settled:
        first = settled[0]
        return (f"settled the alarm '{first.get('threshold')}' by its e-process ({first.get('settled')} after "
                f"{first.get('settled_at_item')} items)")
    return None


def earlier_look(report_dir: Path, model: str, compared: str) -> Path | None:
    """The record in ``report_dir`` of a sequential run of ``model`` against the compared record ``compared``
    (sha256) that decided its test (final look, or an alarm settled by its e-process); None when there is none
    (an unreadable record is not one)."""
    found = _earlier(report_dir, model, compared)
    return found[0] if found else None


def _earlier(report_dir: Path, model: str, compared: str) -> tuple[Path, str] | None:
    for path in _records(report_dir):
        try:
            text = path.read_text(encoding="utf-8")
            if compared not in text:  # cheap: most records are of other runs
                continue
            seq = json.loads(text).get("sequential") or {}
        except (OSError, ValueError, AttributeError):
            continue
        mark = seq.get("spent") if isinstance(seq, dict) else None
        if isinstance(mark, dict) and mark.get("model") == model and mark.get("compared_sha256") == compared:
            how = _decided(seq)
            if how is not None:
                return path, how
    return None


def refusal(report_dir: Path, model: str, compare: Path, compared: str) -> str | None:
    """The one-line usage error for a sequential run of a test already decided (None: none was)."""
    found = _earlier(report_dir, model, compared)
    if found is None:
        return None
    path, how = found
    return (f"--longctx-sequential: {path} is a sequential run of {model} against this --longctx-compare record "
            f"({compare}) that already {how}; another run of the same test (a CI retry, more samples) would spend "
            f"its level again and raise the false alarms above --longctx-alpha. To test again, pass a fresh "
            f"--longctx-report-dir (a new test at its own level, e.g. one per CI attempt) or --longctx-compare a "
            f"new baseline record")
