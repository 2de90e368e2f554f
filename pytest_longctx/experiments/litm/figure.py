"""The paper's figure: accuracy vs position of the relevant information (the U curve), drawn with the report's
shared figure API (``reporting.figures.lines_figure``), so it looks like every other experiment's charts.

One series per number of documents (keys), x the 1-based position, y accuracy with its 95% interval; the closed-book
and oracle QA baselines as dashed reference lines; against a compared run, its curve beside each, dashed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx import wilson
from pytest_longctx.experiments.litm import KV_EXPERIMENT, QA_EXPERIMENT
from pytest_longctx.experiments.litm.report import AXES, baselines, curves
from pytest_longctx.reporting.charts import Figure, Point
from pytest_longctx.reporting.figures import Line, lines_figure

BASELINE_COLOURS = {"closed-book": "#7f7f7f", "oracle": "#111827"}
TITLES = {QA_EXPERIMENT: "Multi-document QA", KV_EXPERIMENT: "Key-value retrieval"}


def _accuracy(point: Mapping[str, Any]) -> float | None:
    n = int(point.get("n", 0))
    return int(point.get("correct", 0)) / n if n else None


def _point(position: int, correct: int, n: int, low: Any = None, high: Any = None) -> Point:
    if low is None or high is None:
        low, high = wilson(correct, n)
    return Point(position + 1, correct / n, float(low), float(high), f"{correct}/{n}, 95% CI [{low:.2f}, {high:.2f}]")


def _compared(cells: Sequence[Mapping[str, Any]], experiment: str) -> dict[int, dict[int, tuple[int, int]]]:
    """count -> 0-based position -> the compared run's (correct, n), from each cell's ``compare``."""
    count_key, position_key, _ = AXES[experiment]
    out: dict[int, dict[int, tuple[int, int]]] = {}
    for cell in cells:
        params, cmp = cell.get("params") or {}, cell.get("compare")
        if cell.get("experiment") != experiment or params.get(position_key) is None or not cmp:
            continue
        n = int(cmp.get("baseline_n") or 0)
        if n:
            correct = round(float(cmp["baseline_accuracy"]) * n)
            out.setdefault(int(params.get(count_key, 0)), {})[int(params[position_key])] = (correct, n)
    return out


def u_curve(cells: Sequence[Mapping[str, Any]], experiment: str = QA_EXPERIMENT) -> Figure | None:
    """The figure for ``experiment``'s cells, or None when the run has no positioned cell of it."""
    grid = curves(cells, experiment)
    if not grid:
        return None
    _, _, noun = AXES[experiment]
    before = _compared(cells, experiment)
    lines = []
    for i, (count, points) in enumerate(grid.items()):
        now = [_point(p, pt["correct"], pt["n"], pt.get("ci_low"), pt.get("ci_high"))
               for p, pt in points.items() if pt["n"]]
        old = [_point(p, c, n) for p, (c, n) in sorted(before.get(count, {}).items())]
        lines.append(Line(f"{count} {noun}", now, old, i))
    refs = []
    if experiment == QA_EXPERIMENT:
        for name, point in baselines(cells).items():
            if (value := _accuracy(point)) is not None:
                refs.append((value, f"{name} {value:.2f}", BASELINE_COLOURS[name]))
    note = "Dashed horizontal: the closed-book and oracle baselines." if refs else ""
    return lines_figure(f"{TITLES[experiment]}: accuracy vs position of the relevant information", lines,
                        x_label=f"position of the {noun[:-1]} with the answer (1-based, of {max(grid)})", refs=refs,
                        note=note, x_log=False)


def u_curve_svg(cells: Sequence[Mapping[str, Any]], experiment: str = QA_EXPERIMENT) -> str | None:
    """The figure's drawing alone (SVG, or a grid of SVG panels when it holds many series)."""
    figure = u_curve(cells, experiment)
    return figure.svg if figure is not None else None


def litm_figures(cells: Sequence[Mapping[str, Any]]) -> list[Figure]:
    """Every figure the run's cells support: QA first, then key-value retrieval."""
    return [f for e in (QA_EXPERIMENT, KV_EXPERIMENT) if (f := u_curve(cells, e)) is not None]
