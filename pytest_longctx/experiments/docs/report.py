"""The docs experiment's tables and figures in the write-up's layout: accuracy by answer depth, and
long context vs RAG by context size, with paired (McNemar) comparisons.

Cells are paired (sample i asks the same item in every cell), so each comparison counts the items
right in one cell and wrong in the other. No chance line is drawn: answers are free text, so a
guess has no fixed success rate (the figures' notes say so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx import mcnemar_exact
from pytest_longctx.reporting.charts import Figure
from pytest_longctx.reporting.figures import accuracy_lines, judge_agreement, mean_lines

Cells = Sequence[Mapping[str, Any]]
Trials = Sequence[Mapping[str, Any]]
NO_CHANCE = "No chance line: answers are free text, so a guess has no fixed success rate."


def _outcomes(trials: Trials, key: str, value: Any, **where: Any) -> dict[int, bool]:
    """Sample index -> correct, for scored trials whose params have ``key == value`` (and ``where``)."""
    out: dict[int, bool] = {}
    for t in trials:
        params = t.get("params", {})
        if params.get(key) == value and all(params.get(k) == v for k, v in where.items()) \
                and t.get("outcome") in ("correct", "incorrect"):
            out[int(t.get("sample", 0))] = t["outcome"] == "correct"
    return out


def paired_p(a: Mapping[int, bool], b: Mapping[int, bool]) -> str:
    """Exact McNemar p-value of two paired cells, with the discordant counts (``–`` when nothing pairs)."""
    both = sorted(set(a) & set(b))
    if not both:
        return "–"
    only_a = sum(1 for i in both if a[i] and not b[i])
    only_b = sum(1 for i in both if b[i] and not a[i])
    return f"{mcnemar_exact(only_a, only_b):.2f} ({only_a}/{only_b})"


def _cell(trials: Trials, **params: Any) -> dict[str, int] | None:
    scored = [t for t in trials if all(t.get("params", {}).get(k) == v for k, v in params.items())
              and t.get("outcome") in ("correct", "incorrect")]
    return {"correct": sum(t["outcome"] == "correct" for t in scored), "n": len(scored)} if scored else None


def _described(trials: Trials) -> str:
    details = [t.get("detail") or {} for t in trials]
    scorers = sorted({str(d["scorer"]) for d in details if d.get("scorer")})
    protocols = sorted({str(d.get("protocol", "longctx")) for d in details if d.get("scorer")})
    return f"scorer {', '.join(scorers) or '–'}; protocol {', '.join(protocols) or 'longctx'}"


def docs_tables(cells: Cells, trials: Trials) -> list[dict[str, Any]]:
    """Accuracy by depth (paired with depth 0) and long context vs RAG per context fraction (paired)."""
    out: list[dict[str, Any]] = []
    what = _described(trials)
    depth_trials = [t for t in trials if "depth" in t.get("params", {})]
    depths = sorted({t["params"]["depth"] for t in depth_trials})
    if depths:
        first = _outcomes(depth_trials, "depth", depths[0])
        rows = [[f"{d}%", _cell(depth_trials, depth=d),
                 paired_p(first, _outcomes(depth_trials, "depth", d)) if d != depths[0] else "–"] for d in depths]
        out.append({"experiment": "docs",
                    "title": "docs accuracy by answer depth (answer document at d% of the context)",
                    "columns": ["depth", "accuracy", f"McNemar p vs {depths[0]}% (only there/only here)"],
                    "rows": rows, "note": f"Paired: sample i asks the same item at every depth. {what}. {NO_CHANCE}"})
    size_trials = [t for t in trials if "context_fraction" in t.get("params", {})]
    fractions = sorted({t["params"]["context_fraction"] for t in size_trials})
    if fractions:
        rows = []
        for f in fractions:
            recall = [float(t["detail"]["retrieval_recall"]) for t in size_trials
                      if t["params"]["context_fraction"] == f and "retrieval_recall" in (t.get("detail") or {})]
            rows.append([f"{f}%", _cell(size_trials, context_fraction=f, arm="long-context"),
                         _cell(size_trials, context_fraction=f, arm="rag"),
                         paired_p(_outcomes(size_trials, "context_fraction", f, arm="long-context"),
                                  _outcomes(size_trials, "context_fraction", f, arm="rag")),
                         f"{sum(recall) / len(recall):.2f}" if recall else "–"])
        out.append({"experiment": "docs", "title": "docs long context vs RAG by context size (% of the budget filled)",
                    "columns": ["context", "long-context", "rag", "McNemar p (only long-context/only rag)",
                                "rag recall"],
                    "rows": rows, "note": f"Paired: both arms see the same documents for sample i. {what}. "
                                          f"{NO_CHANCE}"})
    return out


def _noted(fig: Figure | None) -> Figure | None:
    if fig is not None:
        fig.note = f"{fig.note} {NO_CHANCE}".strip()
    return fig


def docs_figures(cells: Cells, trials: Trials) -> list[Figure | None]:
    return [_noted(accuracy_lines(cells, "depth", ["arm"], "Accuracy by answer depth (%)")),
            _noted(accuracy_lines(cells, "context_fraction", ["arm"], "Accuracy by context size (% of the budget), "
                                  "long context vs RAG")),
            mean_lines(cells, trials, "retrieval_recall", "context_fraction", "arm", "Retrieval recall (RAG)")
            or mean_lines(cells, trials, "retrieval_recall", "depth", "arm", "Retrieval recall (RAG)"),
            judge_agreement(trials, "arm", "Judge agreement")]
