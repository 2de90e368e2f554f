"""Saying plainly when an accuracy is indistinguishable from chance or from zero, and what to run instead.

A cell's (or an experiment's) accuracy is *indistinguishable from chance* when its 95% interval contains the
experiment's guessing rate (``pytest_longctx_chance``), and *from zero* when it contains 0 (no correct answer at
all). The terminal and the HTML report mark such cells next to their number and add one line per such
experiment, with the command that runs the same study on Claude when the model is not a remote one.

An experiment's interval is :func:`experiment_interval`, the one place to change when the pooled interval changes.

Said only where it means something: not for in-process test doubles (``fake/*`` answer from the expected answer;
their accuracy is scripted), and not where the trials are too few for any result to differ from chance (even all
correct, the interval would hold the guessing rate): those experiments get a "too few trials" line instead, and
such cells no mark.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_longctx.util.commands import script_command

Rows = Sequence[Mapping[str, Any]]


def experiment_interval(trials: Rows) -> tuple[int, int, float, float]:
    """Correct answers, scored trials and the 95% interval of an experiment's pooled accuracy: the clustered
    interval of ``results/clustered.py`` (trials that share an item share its fate, so they count once)."""
    from pytest_longctx.results.clustered import pooled_accuracy

    scored = [t for t in trials if t.get("outcome") != "error"]
    pooled = pooled_accuracy([t.get("outcome") == "correct" for t in scored],
                             [str(t.get("cluster") or t.get("nodeid")) for t in scored])
    return pooled.correct, pooled.n, pooled.low, pooled.high


def verdict(n: int, low: float, high: float, chance: float | None) -> str | None:
    """``chance`` when the interval holds the guessing rate, ``zero`` when it holds 0, else None (also for n = 0)."""
    if n <= 0:
        return None
    if chance is not None and low <= chance <= high:
        return "chance"
    return "zero" if low <= 0.0 else None


def mark(cell: Mapping[str, Any], chance: float | None) -> str:
    """``≈ chance`` / ``≈ 0`` for a cell whose interval holds the guessing rate / 0, else ``""`` (also for a cell
    too small for any result to differ from chance: its interval at n of n correct would still hold it)."""
    from pytest_longctx.results.stats import wilson

    n = int(cell.get("n", 0))
    found = verdict(n, float(cell.get("ci_low", 0.0)), float(cell.get("ci_high", 1.0)), chance)
    if found == "chance" and chance is not None and wilson(n, n)[0] <= chance:
        return ""
    return {"chance": "≈ chance", "zero": "≈ 0"}.get(found or "", "")


def cell_mark(cell: Mapping[str, Any], report: Mapping[str, Any]) -> str:
    """:func:`mark` with the guessing rate of the cell's experiment from the record's ``chance`` part (``report``);
    ``""`` for every cell of a test double's run."""
    if report.get("double"):
        return ""
    return mark(cell, (report.get("levels") or {}).get(cell.get("experiment")))


#: What the marks mean, under every table that shows them.
LEGEND = ("≈ chance, ≈ 0: the 95% interval contains the guessing rate (or 0): no evidence that the model "
          "does better than that")


def chance_report(cells: Rows, trials: Rows, levels: Mapping[str, float], *, model: str, hint_model: str | None,
                  rootdir: Path, double: bool = False) -> dict[str, Any]:
    """The record's ``chance`` part: the guessing rates, every experiment indistinguishable from them or 0, and
    (``too_few``) every experiment whose trials are too few for any result to differ from chance.

    ``hint_model``: the model to suggest for the same study (None: no suggestion, e.g. the model is remote).
    ``double``: the model is an in-process test double: nothing to say (and :func:`cell_mark` marks no cell).
    """
    if double:
        return {"model": model, "levels": {}, "experiments": [], "too_few": [], "double": True}
    found, too_few = [], []
    for experiment in dict.fromkeys(str(c.get("experiment")) for c in cells):
        rows = [t for t in trials if t.get("experiment") == experiment]
        correct, n, low, high = experiment_interval(rows)
        level = levels.get(experiment)
        kind = verdict(n, low, high, level)
        if kind is None:
            continue
        if kind == "chance" and level is not None and _best_low(rows) <= level:
            too_few.append({"experiment": experiment, "correct": correct, "n": n, "chance": level})
            continue
        files = dict.fromkeys(str(t.get("nodeid", "")).split("::")[0] for t in trials
                              if t.get("experiment") == experiment and t.get("nodeid"))
        command = None
        if hint_model and files:
            paths = " ".join(_from_here(rootdir / f) for f in files)
            command = f"{script_command('pytest')} {paths} -n 2 --longctx-model {hint_model}"
        found.append({"experiment": experiment, "correct": correct, "n": n, "ci_low": round(low, 4),
                      "ci_high": round(high, 4), "chance": level, "verdict": kind, "command": command})
    return {"model": model, "levels": dict(levels), "experiments": found, "too_few": too_few}


def _best_low(rows: Rows) -> float:
    """The lower bound of an experiment's interval had every scored trial been correct."""
    return experiment_interval([{**t, "outcome": "correct"} for t in rows if t.get("outcome") != "error"])[2]


def chance_lines(report: Mapping[str, Any]) -> list[str]:
    """One plain line per experiment whose accuracy is indistinguishable from chance or 0."""
    lines = []
    for e in report.get("experiments") or []:
        what = (f"chance ({e['chance']:.2g})" if e["verdict"] == "chance" and e["chance"] >= 0.01 else
                "chance (≈ 0)" if e["verdict"] == "chance" else "0")
        line = (f"{e['experiment']}: {e['correct']}/{e['n']} correct, 95% CI [{e['ci_low']:.2f}, {e['ci_high']:.2f}]: "
                f"indistinguishable from {what} on {report.get('model')}")
        if e.get("command"):
            line += f"; the same study on Claude: {e['command']}"
        lines.append(line)
    for e in report.get("too_few") or []:
        lines.append(f"{e['experiment']}: {e['correct']}/{e['n']} correct: too few trials to tell from chance "
                     f"({e['chance']:.2g}): even {e['n']}/{e['n']} correct would not be; add trials "
                     "(--longctx-samples)")
    return lines


def _from_here(path: Path) -> str:
    """``path`` as the user types it from the working folder."""
    try:
        return Path(os.path.relpath(path)).as_posix()
    except ValueError:  # another drive (Windows)
        return str(path)
