"""Threshold expressions held against a run's cells: which cells a threshold selects, a cell's own verdict, and the
exit codes of a gate that missed or could not check its thresholds.

The grammar of an expression and its parsing are :mod:`pytest_longctx.gate_spec`; the gate that decides on them is
``gate.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx.gate_spec import Threshold

#: Exit status of a run whose tests all ran but whose thresholds were missed. Not 6: pytest 9.2 took
#: 6 for MAX_WARNINGS_ERROR; 10 stays clear of pytest's codes (0-6).
GATE_EXIT_CODE = 10
#: Exit status of a run whose gate could not check what it was asked to (see ``gate_spec``'s docstring).
GATE_ERROR_EXIT_CODE = 11
VERDICTS = ("pass", "fail", "too-few", "error")


def _cell_name(cell: Mapping[str, Any]) -> str:
    params = " ".join(f"{k}={v}" for k, v in cell["params"].items())
    return f"{cell['experiment']} {params}".strip()


def describe_cells(cells: Sequence[Mapping[str, Any]]) -> str:
    """What selectors can match in ``cells``: their experiments and param names (for error messages)."""
    experiments = ", ".join(sorted({str(c["experiment"]) for c in cells})) or "none"
    keys = ", ".join(sorted({str(k) for c in cells for k in c["params"]})) or "none"
    from pytest_longctx.util.words import plural

    return f"{len(cells)} {plural('cell', len(cells))}; experiments: {experiments}; params: {keys}"


def unmatched(thresholds: tuple[Threshold, ...], cells: Sequence[Mapping[str, Any]]) -> list[Threshold]:
    """The thresholds whose selector matches none of ``cells`` (dicts with experiment and params)."""
    return [t for t in thresholds if not any(t.matches(c["experiment"], c["params"]) for c in cells)]


def cell_verdict(cell: Mapping[str, Any]) -> str:
    """The worst verdict among a cell's own (``/each``) checks ("" when none applies)."""
    verdicts = [c["verdict"] for c in cell.get("checks", [])]
    for v in ("error", "fail", "too-few", "pass"):
        if v in verdicts:
            return v
    return ""
