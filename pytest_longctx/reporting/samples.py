"""Trials per condition cell as the run ran them, for headers: each experiment decides its own count
(``session/defaults.samples_for``: --longctx-samples, else the experiment's default for the model, else the
core's; or a count a test set itself), so the core's ``settings.samples`` alone says nothing true."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def samples_per_cell(cells: Sequence[Mapping[str, Any]]) -> str:
    """``10`` when every cell ran 10 trials (scored or errored), else per experiment: ``lrt 10, qa 6-10``."""
    counts: dict[str, list[int]] = {}
    for cell in cells:
        trials = int(cell.get("n", 0)) + int(cell.get("errors", 0))
        counts.setdefault(str(cell.get("experiment")), []).append(trials)
    ranges = {e: _range(c) for e, c in counts.items()}
    if len(set(ranges.values())) == 1:
        return next(iter(ranges.values()))
    return ", ".join(f"{e} {r}" for e, r in sorted(ranges.items()))


def _range(counts: Sequence[int]) -> str:
    low, high = min(counts), max(counts)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"
