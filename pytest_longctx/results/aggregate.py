"""Controller-side collection of trial records into condition cells.

Workers attach one plain-JSON record per trial to their test reports; the controller feeds every
report to :meth:`Aggregator.add_report` (xdist replays worker reports through the same hook), so
``-n 0`` and ``-n 8`` run exactly this code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_longctx.backends.prompt_cache import billed_input
from pytest_longctx.results.stats import wilson

#: Name of the user property that carries a trial record on a test report.
RECORD_KEY = "longctx"
OUTCOMES = ("correct", "incorrect", "error")


def cell_key(experiment: str, params: Mapping[str, Any]) -> str:
    """Stable identity of a condition cell: experiment plus canonical params JSON."""
    return experiment + json.dumps(dict(params), sort_keys=True, separators=(",", ":"))


class CellKeys:
    """:func:`cell_key`, remembered for params already seen in one pass over many trials (thousands of trials share
    a few hundred cells; the canonical JSON is the costly part)."""

    def __init__(self) -> None:
        self._known: dict[tuple[Any, ...], str] = {}

    def __call__(self, experiment: str, params: Mapping[str, Any]) -> str:
        try:
            frozen = (experiment, *sorted(params.items()))
            key = self._known.get(frozen)
        except TypeError:  # an unhashable value (a list): no memo
            return cell_key(experiment, params)
        if key is None:
            key = self._known[frozen] = cell_key(experiment, params)
        return key


def trial_key(record: Mapping[str, Any]) -> str:
    """Identity of one trial across runs: its cell and sample index."""
    return cell_key(record["experiment"], record["params"]) + f"#{record['sample']}"


def records_of(user_properties: Iterable[tuple[str, object]]) -> list[dict[str, Any]]:
    return [value for name, value in user_properties if name == RECORD_KEY and isinstance(value, dict)]


class Aggregator:
    """Trial records by nodeid (a re-run test replaces its earlier record)."""

    def __init__(self) -> None:
        self._trials: dict[str, dict[str, Any]] = {}

    def add(self, record: dict[str, Any]) -> None:
        self._trials[record["nodeid"]] = record

    def add_report(self, user_properties: Iterable[tuple[str, object]]) -> None:
        for record in records_of(user_properties):
            self.add(record)

    @property
    def trials(self) -> list[dict[str, Any]]:
        """All records, in a stable order independent of worker timing."""
        return sorted(self._trials.values(),
                      key=lambda r: (r["experiment"], _sort_params(r["params"]), r["sample"], r["nodeid"]))

    def cells(self) -> list[dict[str, Any]]:
        """Per-cell counts, accuracy over scored trials, and the 95% Wilson interval."""
        grouped: dict[str, dict[str, Any]] = {}
        keys = CellKeys()
        for rec in self.trials:
            key = keys(rec["experiment"], rec["params"])
            cell = grouped.setdefault(key, {
                "key": key, "experiment": rec["experiment"], "params": rec["params"],
                "correct": 0, "incorrect": 0, "errors": 0,
                "input_tokens": 0, "output_tokens": 0,
            })
            outcome = rec["outcome"]
            cell["errors" if outcome == "error" else outcome] += 1
            cell["input_tokens"] += int(rec.get("input_tokens", 0))
            cell["output_tokens"] += int(rec.get("output_tokens", 0))
        out = []
        for key in sorted(grouped, key=lambda k: (grouped[k]["experiment"], _sort_params(grouped[k]["params"]))):
            cell = grouped[key]
            n = cell["correct"] + cell["incorrect"]
            low, high = wilson(cell["correct"], n)
            cell.update(n=n, accuracy=(cell["correct"] / n) if n else 0.0, ci_low=low, ci_high=high)
            out.append(cell)
        return out

    def usage(self) -> dict[str, Any]:
        """Totals over the trials. ``paid_*``: of requests sent in this run (not response-cache hits); of
        ``paid_input_tokens``, ``cache_*_input_tokens`` were prompt-cache writes / reads, and
        ``billed_input_tokens`` is what they cost in plain-input tokens (writes 1.25x, reads 0.1x)."""
        trials = self._trials.values()
        written = sum(int(r.get("cache_creation_input_tokens", 0)) for r in trials)
        read = sum(int(r.get("cache_read_input_tokens", 0)) for r in trials)
        paid_input = sum(int(r.get("paid_input_tokens", 0)) for r in trials)
        return {
            "trials": len(self._trials),
            "calls": sum(int(r.get("calls", 0)) for r in trials),
            "cache_hits": sum(int(r.get("cache_hits", 0)) for r in trials),
            "input_tokens": sum(int(r.get("input_tokens", 0)) for r in trials),
            "output_tokens": sum(int(r.get("output_tokens", 0)) for r in trials),
            "paid_input_tokens": paid_input,
            "paid_output_tokens": sum(int(r.get("paid_output_tokens", 0)) for r in trials),
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "billed_input_tokens": round(billed_input(paid_input - written - read, written, read)),
        }


def _sort_params(params: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Order params naturally: numbers numerically, everything else as text."""
    return [(k, (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v)))
            for k, v in sorted(params.items())]
