"""Whether a compared run can serve as this run's baseline: what would make a comparison with it partial or empty.

A baseline is *unusable* when it is a plan (nothing was answered). It is *partial* when it was stopped (Ctrl-C,
``-x``, a fatal error, an internal error), ran with another seed or protocol (its items and conditions differ, so
few or no trials pair), or lacks some of this run's cells (or has no scored trial in them). The run refuses such a
baseline at start-up, before any request (``session/preflight.py``), and so does ``longctx-gate``; with
``--longctx-compare-partial`` a partial one is accepted and every verdict says it was partial.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_longctx.results.aggregate import cell_key

#: The option that accepts a partial baseline (named in refusals and in the verdicts).
PARTIAL_FLAG = "--longctx-compare-partial"


@dataclass(frozen=True)
class Problem:
    """One reason a baseline is partial (``partial=True``: the user may accept it) or unusable."""

    kind: str  # "plan" | "stopped" | "seed" | "protocol" | "cells"
    said: str  # what is wrong, for "PATH {said}"
    fix: str  # what to do instead
    partial: bool = True


def _cell_name(cell: Mapping[str, Any]) -> str:
    params = " ".join(f"{k}={v}" for k, v in cell["params"].items())
    return f"{cell['experiment']} {params}".strip()


def baseline_problems(baseline: Mapping[str, Any], *, seed: int | None, protocol: str | None,
                      cells: Sequence[Mapping[str, Any]] | None = None) -> list[Problem]:
    """Every reason ``baseline`` cannot serve as a full baseline of a run with ``seed``, ``protocol`` and ``cells``
    (dicts with experiment and params; None: not known yet, e.g. before collection)."""
    settings = baseline.get("settings") or {}
    if settings.get("plan") or baseline.get("plan") is not None:
        return [Problem("plan", "is a plan record (--longctx-plan: nothing was answered)",
                        "pass the longctx.json of a completed run", partial=False)]
    out = []
    stopped = baseline.get("stopped") or baseline.get("finish_error")
    if stopped:
        scored = sum(1 for t in baseline.get("trials", []) if t.get("outcome") != "error")
        out.append(Problem("stopped", f"is the record of a stopped run ({stopped}; {scored} scored trials)",
                           "compare with a completed run's longctx.json (re-run the baseline to the end)"))
    if seed is not None and settings.get("seed") is not None and settings.get("seed") != seed:
        out.append(Problem("seed", f"ran with --longctx-seed {settings.get('seed')}, this run with {seed}: its "
                           "items and contexts differ", f"run with --longctx-seed {settings.get('seed')}"))
    if protocol is not None and settings.get("protocol") not in (None, protocol):
        theirs = settings.get("protocol")
        out.append(Problem("protocol", f"ran with --longctx-protocol {theirs}, this run with {protocol}: its "
                           "conditions differ", f"run with --longctx-protocol {theirs}"))
    if cells:
        scored_cells = {str(c["key"]) for c in baseline.get("cells", []) if c.get("n")}
        missing = [c for c in cells if cell_key(str(c["experiment"]), c["params"]) not in scored_cells]
        if missing:
            out.append(Problem("cells", f"has no scored trial in {len(missing)} of this run's {len(cells)} cells "
                               f"(e.g. {_cell_name(missing[0])})",
                               "compare with a run of the same experiments and conditions, or select only the "
                               "tests it ran"))
    return out


def refusal(path: object, problems: Sequence[Problem], *, partial_ok: bool,
            flag: str = "--longctx-compare") -> str | None:
    """The one-line usage error refusing the baseline at ``path`` (None when it may be used)."""
    blocking = [p for p in problems if not (p.partial and partial_ok)]
    if not blocking:
        return None
    first = blocking[0]
    more = f" (and {len(blocking) - 1} more: {', '.join(p.kind for p in blocking[1:])})" if len(blocking) > 1 else ""
    accept = f", or pass {PARTIAL_FLAG} to compare with what it has" if first.partial else ""
    return f"{flag}: {path} {first.said}{more}; {first.fix}{accept}"


def partial_note(problems: Sequence[Problem]) -> str | None:
    """What every verdict says when a partial baseline was accepted (None: the baseline is complete)."""
    if not problems:
        return None
    return "partial baseline: the compared run " + "; ".join(p.said for p in problems)
