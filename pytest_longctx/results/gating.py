"""Threshold expressions and the gate that turns cell results into an exit code.

Grammar: ``SELECTOR:SPEC[@n=N]``.

* SELECTOR is ``*`` or comma-separated ``key=value`` pairs matched against a cell's experiment
  and condition params (values may use shell globs: ``shuffle=block-*``).
* SPEC is ``0.8`` / ``min=0.8`` (accuracy must reach 0.8), or ``max-drop=0.05`` (accuracy may fall at
  most 0.05 below the compared run), optionally ``max-drop=0.05/sig`` or ``/sig=0.01`` (fail only when
  the drop is also significant under the exact McNemar test at that alpha, default 0.05).
* ``@n=N``: a cell with fewer than N scored trials is reported ``too-few`` instead of pass or fail.

The gate fails closed: a threshold that matches no cell, checks no cell (all ``too-few`` or without a
baseline cell), or needs a baseline that is missing, a compared run that shares no cell with this one,
a baseline cell without scored trials, or a significance test without paired trials is a gate *error*
(status ``error``, one line each in ``errors``, exit code :data:`GATE_ERROR_EXIT_CODE`), never a pass.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_longctx.errors import UsageError

#: Exit status of a run whose tests all ran but whose thresholds were missed. Not 6: pytest 9.2 took
#: 6 for MAX_WARNINGS_ERROR; 10 stays clear of pytest's codes (0-6).
GATE_EXIT_CODE = 10
#: Exit status of a run whose gate could not check what it was asked to (see the module docstring).
GATE_ERROR_EXIT_CODE = 11
VERDICTS = ("pass", "fail", "too-few", "no-baseline", "error")


@dataclass(frozen=True)
class Threshold:
    """One parsed gate expression."""

    text: str
    selector: tuple[tuple[str, str], ...]
    kind: str  # "min" | "max-drop"
    value: float
    alpha: float | None = None
    min_n: int = 1

    def canonical(self) -> str:
        """The expression in its canonical spelling: ``parse_threshold(t.canonical())`` gives ``t`` back."""
        selector = ",".join(f"{k}={v}" for k, v in self.selector) or "*"
        spec = f"min={self.value!r}" if self.kind == "min" else f"max-drop={self.value!r}"
        if self.alpha is not None:
            spec += f"/sig={self.alpha!r}"
        return f"{selector}:{spec}" + (f"@n={self.min_n}" if self.min_n != 1 else "")

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
    if int(baseline["n"]) == 0:
        errored = baseline.get("errors", "all")
        return {**out, "verdict": "error",
                "detail": f"the compared run's cell has no scored trials ({errored} errored): no accuracy to drop from"}
    drop = float(baseline["accuracy"]) - accuracy
    over = drop > threshold.value + 1e-12
    detail = f"drop {drop:+.3f} vs {threshold.value}"
    if over and threshold.alpha is not None:
        p = cell.get("compare", {}).get("p_value")
        if p is None:
            return {**out, "verdict": "error",
                    "detail": detail + "; no paired trials for the significance test (same seed and items needed)"}
        detail += f", McNemar p={p:.3g} (alpha {threshold.alpha})"
        over = p < threshold.alpha
    return {**out, "verdict": "fail" if over else "pass", "detail": detail}


def _cell_name(cell: Mapping[str, Any]) -> str:
    params = " ".join(f"{k}={v}" for k, v in cell["params"].items())
    return f"{cell['experiment']} {params}".strip()


def describe_cells(cells: Sequence[Mapping[str, Any]]) -> str:
    """What selectors can match in ``cells``: their experiments and param names (for error messages)."""
    experiments = ", ".join(sorted({str(c["experiment"]) for c in cells})) or "none"
    keys = ", ".join(sorted({str(k) for c in cells for k in c["params"]})) or "none"
    return f"{len(cells)} cells; experiments: {experiments}; params: {keys}"


def unmatched(thresholds: tuple[Threshold, ...], cells: Sequence[Mapping[str, Any]]) -> list[Threshold]:
    """The thresholds whose selector matches none of ``cells`` (dicts with experiment and params)."""
    return [t for t in thresholds if not any(t.matches(c["experiment"], c["params"]) for c in cells)]


def _threshold_errors(threshold: Threshold, matched: list[dict[str, Any]], verdicts: list[dict[str, Any]],
                      cells: list[dict[str, Any]], has_baseline: bool) -> list[str]:
    """Why one threshold could not be checked (empty when it checked at least one cell cleanly)."""
    quoted = repr(threshold.text)
    if not matched:
        return [f"threshold {quoted} matches no cell of this run ({describe_cells(cells)})"]
    if threshold.kind == "max-drop" and not has_baseline:
        return [f"threshold {quoted} is relative to an earlier run: pass --longctx-compare PATH"]
    failed = [(c, v) for c, v in zip(matched, verdicts, strict=True) if v["verdict"] == "error"]
    errors = []
    if failed:
        more = f" (and {len(failed) - 1} more cells)" if len(failed) > 1 else ""
        errors.append(f"threshold {quoted} cannot check {_cell_name(failed[0][0])}{more}: {failed[0][1]['detail']}")
    if not any(v["verdict"] in ("pass", "fail", "error") for v in verdicts):
        if all(v["verdict"] == "no-baseline" for v in verdicts):
            errors.append(f"threshold {quoted}: the compared run shares none of its {len(matched)} cells")
        else:
            errors.append(f"threshold {quoted} checked no cell: each of its {len(matched)} cells has too few "
                          f"scored trials or no baseline (@n={threshold.min_n})")
    return errors


def evaluate(cells: list[dict[str, Any]], thresholds: tuple[Threshold, ...],
             baselines: Mapping[str, Mapping[str, Any]] | None, *, compared_with: str | None = None) -> dict[str, Any]:
    """Attach ``checks`` to every cell and return the gate summary for the run record.

    ``baselines`` are the compared run's cells by key; ``compared_with`` names that run when one was
    given (``--longctx-compare``), so that a compared run sharing no cell is an error even without a
    relative threshold. The gate fails closed: see the module docstring.
    """
    baselines = baselines or {}
    has_baseline = compared_with is not None or bool(baselines)
    counts = dict.fromkeys(VERDICTS, 0)
    matched: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {t.text: [] for t in thresholds}
    for cell in cells:
        checks = []
        for threshold in thresholds:
            if threshold.matches(cell["experiment"], cell["params"]):
                verdict = check_cell(threshold, cell, baselines.get(cell["key"]))
                counts[verdict["verdict"]] += 1
                checks.append(verdict)
                matched[threshold.text].append((cell, verdict))
        cell["checks"] = checks
    errors: list[str] = []
    for threshold in thresholds:
        pairs = matched[threshold.text]
        for line in _threshold_errors(threshold, [c for c, _ in pairs], [v for _, v in pairs], cells, has_baseline):
            if line not in errors:
                errors.append(line)
    if compared_with is not None and cells and not any(c["key"] in baselines for c in cells):
        errors.append(f"the compared run {compared_with} shares no cell with this run "
                      f"(it has {len(baselines)} cells, this run {len(cells)})")
    if errors:
        status = "error"
    elif not thresholds:
        status = "none"
    else:
        status = "fail" if counts["fail"] else "pass"
    exit_code = {"error": GATE_ERROR_EXIT_CODE, "fail": GATE_EXIT_CODE}.get(status, 0)
    return {"status": status, "counts": counts, "errors": errors, "thresholds": [t.text for t in thresholds],
            "exit_code": exit_code}


def gate_error(reason: str, thresholds: tuple[Threshold, ...]) -> dict[str, Any]:
    """The gate summary of a run whose gate could not be evaluated at all (one reason)."""
    return {"status": "error", "counts": dict.fromkeys(VERDICTS, 0), "errors": [reason],
            "thresholds": [t.text for t in thresholds], "exit_code": GATE_ERROR_EXIT_CODE}


def cell_verdict(cell: Mapping[str, Any]) -> str:
    """The worst verdict among a cell's checks ("" when no threshold applies)."""
    verdicts = [c["verdict"] for c in cell.get("checks", [])]
    for v in ("error", "fail", "too-few", "no-baseline", "pass"):
        if v in verdicts:
            return v
    return ""
