"""The LRT's tables and figures in the README's layout: accuracy vs number of lines, ordered vs
shuffled, and per block size; plus where wrong answers point (the source's miss analysis).

Chance is about 0: a guessed value is right 1 time in 10,000 (source values) or 90,000 (longctx
values); it is drawn on every chart.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx.experiments.lrt.conditions import VALUE_RANGES
from pytest_longctx.reporting.charts import Figure
from pytest_longctx.reporting.figures import accuracy_lines, miss_histogram

Cells = Sequence[Mapping[str, Any]]
Trials = Sequence[Mapping[str, Any]]
UNBLOCKED = ("none", "full")


def protocol_of(trials: Trials) -> str:
    """The protocol the trials were run under (``mixed`` if several)."""
    found = sorted({str((t.get("detail") or {}).get("protocol", "longctx")) for t in trials})
    return found[0] if len(found) == 1 else "mixed" if found else "longctx"


def chance(protocol: str) -> float:
    """Probability that a guessed value is right: 1 in the size of the value range."""
    low, high = VALUE_RANGES["source" if protocol == "source" else "longctx"]
    return 1 / (high - low + 1)


def chance_ref(protocol: str) -> tuple[float, str]:
    return chance(protocol), f"chance ≈ 0 (1 in {round(1 / chance(protocol)):,})"


def block_size(mode: str) -> int:
    return int(mode.removeprefix("block-")) if mode.startswith("block-") else 0


def _grid(cells: Cells) -> tuple[list[int], list[str], dict[tuple[int, str], dict[str, int]]]:
    grid: dict[tuple[int, str], dict[str, int]] = {}
    for cell in cells:
        params = cell.get("params", {})
        if "lines" not in params or "shuffle" not in params:
            continue
        acc = grid.setdefault((int(params["lines"]), str(params["shuffle"])), {"correct": 0, "n": 0})
        acc["correct"] += int(cell.get("correct", 0))
        acc["n"] += int(cell.get("n", 0))
    lines = sorted({k[0] for k in grid})
    modes = sorted({k[1] for k in grid}, key=lambda m: (m not in UNBLOCKED, UNBLOCKED.index(m) if m in UNBLOCKED
                                                         else block_size(m)))
    return lines, modes, grid


def _table(title: str, lines: list[int], modes: list[str], grid: Mapping[tuple[int, str], Any], note: str,
           ) -> dict[str, Any]:
    return {"experiment": "lrt", "title": title, "columns": ["lines", *modes],
            "rows": [[f"{n:,}", *(grid.get((n, m)) for m in modes)] for n in lines], "note": note}


def miss_table(trials: Trials) -> dict[str, Any] | None:
    """Per shuffle mode: wrong answers, and whether they named no number, a value not in the file, or another line."""
    by_mode: dict[str, list[Mapping[str, Any]]] = {}
    for t in trials:
        if t.get("outcome") == "incorrect":
            by_mode.setdefault(str(t.get("params", {}).get("shuffle", "-")), []).append(t.get("detail") or {})
    if not by_mode:
        return None
    rows = []
    for mode in sorted(by_mode, key=lambda m: (m not in UNBLOCKED, UNBLOCKED.index(m) if m in UNBLOCKED
                                               else block_size(m), m)):
        misses = by_mode[mode]
        distances = [abs(int(d["miss_distance"])) for d in misses if isinstance(d.get("miss_distance"), int)]
        rows.append([mode, str(len(misses)), str(sum(1 for d in misses if d.get("no_number"))),
                     str(sum(1 for d in misses if d.get("not_in_file"))), str(len(distances)),
                     f"{statistics.median(distances):g}" if distances else "–"])
    return {"experiment": "lrt", "title": "LRT misses: what the wrong answers named",
            "columns": ["shuffle", "wrong", "no number", "value not in file", "another line's value",
                        "median |line distance|"], "rows": rows,
            "note": "Another line's value: the first line in file order holding the answered value (as the source "
                    "reports it); distance in line numbers from the asked line."}


def lrt_tables(cells: Cells, trials: Trials) -> list[dict[str, Any]]:
    """Accuracy vs lines, ordered vs shuffled; accuracy vs lines per block size; the miss analysis."""
    lines, modes, grid = _grid(cells)
    protocol = protocol_of(trials)
    ref = f"protocol {protocol}; chance ≈ 0 (a guessed value is right 1 time in {round(1 / chance(protocol)):,})."
    skipped = sorted({str((t.get("detail") or {}).get("size_note")) for t in trials
                      if (t.get("detail") or {}).get("size_note")})
    ref += "".join(f" {note}." for note in skipped)
    out = []
    unblocked = [m for m in modes if m in UNBLOCKED]
    blocked = [m for m in modes if m not in UNBLOCKED]
    if lines and unblocked:
        out.append(_table("LRT accuracy vs number of lines, ordered (none) vs shuffled (full)", lines, unblocked,
                          grid, "Accuracy (correct/n) per cell; " + ref))
    if lines and blocked:
        out.append(_table("LRT accuracy vs number of lines, per block size (blocks of B lines shuffled)", lines,
                          blocked, grid, "Accuracy (correct/n) per cell; " + ref))
    misses = miss_table(trials)
    if misses is not None:
        out.append(misses)
    return out


def lrt_figures(cells: Cells, trials: Trials) -> list[Figure | None]:
    """The README's two figures (ordered vs shuffled; block shuffles) and the miss histogram, chance marked."""
    ref = chance_ref(protocol_of(trials))
    has_lines = any("lines" in c.get("params", {}) for c in cells)
    if not has_lines:
        size = "context_tokens" if any("context_tokens" in c.get("params", {}) for c in cells) else None
        return [accuracy_lines(cells, size, ["shuffle"], f"Accuracy by {size}, per shuffle mode", ref=ref)
                if size else None, miss_histogram(trials, "Where wrong answers point")]
    unblocked = [c for c in cells if c.get("params", {}).get("shuffle") in UNBLOCKED]
    blocked = [c for c in cells if str(c.get("params", {}).get("shuffle", "")).startswith("block-")]
    return [accuracy_lines(unblocked, "lines", ["shuffle"], "Accuracy vs number of lines: ordered vs shuffled",
                           ref=ref),
            accuracy_lines(blocked, "lines", ["shuffle"], "Accuracy vs number of lines, per block size", ref=ref),
            miss_histogram(trials, "Where wrong answers point")]
