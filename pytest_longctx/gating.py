"""Threshold expressions and the gate that turns cell results into an exit code.

Grammar: ``SELECTOR:SPEC[@n=N]``.

* SELECTOR is ``*`` or comma-separated ``key=value`` pairs matched against a cell's experiment
  and condition params (values may use shell globs: ``shuffle=block-*``).
* SPEC is ``0.8`` / ``min=0.8`` (accuracy must reach 0.8), or ``max-drop=0.05`` (accuracy may fall at
  most 0.05 below the compared run), optionally ``max-drop=0.05/sig`` or ``/sig=0.01`` (fail only when
  the drop is also significant under the exact McNemar test at that alpha, default 0.05).
* ``@n=N``: a cell with fewer than N scored trials is reported ``too-few`` instead of pass or fail.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_longctx.errors import UsageError

#: Exit status of a run whose tests all ran but whose thresholds were missed. Not 6: pytest 9.2 took
#: 6 for MAX_WARNINGS_ERROR; 10 stays clear of pytest's codes (0-6).
GATE_EXIT_CODE = 10
VERDICTS = ("pass", "fail", "too-few", "no-baseline")


@dataclass(frozen=True)
class Threshold:
    """One parsed gate expression."""

    text: str
    selector: tuple[tuple[str, str], ...]
    kind: str  # "min" | "max-drop"
    value: float
    alpha: float | None = None
    min_n: int = 1

    def matches(self, experiment: str, params: Mapping[str, Any]) -> bool:
        for key, pattern in self.selector:
            if key == "experiment":
                actual = experiment
            elif key in params:
                value = params[key]
                actual = value if isinstance(value, str) else json.dumps(value)
            else:
                return False
            if not fnmatch.fnmatchcase(actual, pattern):
                return False
        return True


def parse_threshold(text: str, *, flag: str = "--longctx-threshold") -> Threshold:
    """Parse one expression; a malformed one raises a one-line UsageError quoting it."""
    def bad(why: str) -> UsageError:
        return UsageError(f"{flag}: {why} in {text!r} (expected e.g. '*:0.8' or 'experiment=lrt:max-drop=0.05/sig')")

    body, _, min_n_part = text.strip().partition("@")
    selector_text, sep, spec = body.rpartition(":")
    if not sep or not selector_text.strip() or not spec.strip():
        raise bad("missing SELECTOR:SPEC")
    selector: list[tuple[str, str]] = []
    if selector_text.strip() != "*":
        for part in selector_text.split(","):
            key, eq, pattern = part.partition("=")
            if not eq or not key.strip() or not pattern.strip():
                raise bad(f"selector part {part!r} is not key=value")
            selector.append((key.strip(), pattern.strip()))
    spec = spec.strip()
    alpha: float | None = None
    if spec.startswith("max-drop="):
        kind = "max-drop"
        number, slash, sig = spec[len("max-drop="):].partition("/")
        if slash:
            if sig == "sig":
                alpha = 0.05
            elif sig.startswith("sig="):
                alpha = _float(sig[4:], bad)
            else:
                raise bad(f"unknown suffix {sig!r}")
            if not 0 < alpha < 1:
                raise bad("significance level must be between 0 and 1")
    else:
        kind = "min"
        number = spec[len("min="):] if spec.startswith("min=") else spec
    value = _float(number, bad)
    if not 0 <= value <= 1:
        raise bad("accuracy must be between 0 and 1")
    min_n = 1
    if min_n_part:
        if not min_n_part.startswith("n="):
            raise bad("expected @n=N")
        try:
            min_n = int(min_n_part[2:])
        except ValueError:
            raise bad("expected @n=N with a whole number") from None
    return Threshold(text.strip(), tuple(selector), kind, value, alpha, max(1, min_n))


def _float(text: str, bad: Any) -> float:
    try:
        return float(text)
    except ValueError:
        raise bad(f"{text!r} is not a number") from None


def check_cell(threshold: Threshold, cell: Mapping[str, Any], baseline: Mapping[str, Any] | None) -> dict[str, Any]:
    """Verdict of one threshold on one cell (a run-record cell dict, optionally with its baseline cell)."""
    n = int(cell["n"])
    out: dict[str, Any] = {"threshold": threshold.text, "kind": threshold.kind, "value": threshold.value}
    if n < threshold.min_n:
        return {**out, "verdict": "too-few", "detail": f"n={n} < {threshold.min_n}"}
    accuracy = float(cell["accuracy"])
    if threshold.kind == "min":
        ok = accuracy >= threshold.value
        detail = f"{accuracy:.3f} {'>=' if ok else '<'} {threshold.value}"
        return {**out, "verdict": "pass" if ok else "fail", "detail": detail}
    if baseline is None:
        return {**out, "verdict": "no-baseline", "detail": "no matching cell in the compared run"}
    drop = float(baseline["accuracy"]) - accuracy
    over = drop > threshold.value + 1e-12
    detail = f"drop {drop:+.3f} vs {threshold.value}"
    if over and threshold.alpha is not None:
        p = cell.get("compare", {}).get("p_value")
        if p is None:
            return {**out, "verdict": "too-few", "detail": detail + "; no paired trials for a significance test"}
        detail += f", McNemar p={p:.3g} (alpha {threshold.alpha})"
        over = p < threshold.alpha
    return {**out, "verdict": "fail" if over else "pass", "detail": detail}


def evaluate(cells: list[dict[str, Any]], thresholds: tuple[Threshold, ...],
             baselines: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Attach ``checks`` to every cell and return the gate summary for the run record."""
    counts = dict.fromkeys(VERDICTS, 0)
    for cell in cells:
        checks = []
        for threshold in thresholds:
            if threshold.matches(cell["experiment"], cell["params"]):
                verdict = check_cell(threshold, cell, baselines.get(cell["key"]))
                counts[verdict["verdict"]] += 1
                checks.append(verdict)
        cell["checks"] = checks
    status = "none" if not thresholds else ("fail" if counts["fail"] else "pass")
    return {"status": status, "counts": counts, "thresholds": [t.text for t in thresholds],
            "exit_code": GATE_EXIT_CODE if status == "fail" else 0}


def cell_verdict(cell: Mapping[str, Any]) -> str:
    """The worst verdict among a cell's checks ("" when no threshold applies)."""
    verdicts = [c["verdict"] for c in cell.get("checks", [])]
    for v in ("fail", "too-few", "no-baseline", "pass"):
        if v in verdicts:
            return v
    return ""
