"""The paper's figure: accuracy vs position of the relevant information (the U curve), as a standalone SVG.

One line per number of documents (keys), x the 1-based position, y accuracy with Wilson intervals as
whiskers; the closed-book and oracle QA baselines as dashed reference lines. Text is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from pytest_longctx.experiments.litm import KV_EXPERIMENT, QA_EXPERIMENT
from pytest_longctx.experiments.litm.report import AXES, baselines, curves

WIDTH, HEIGHT = 560, 340
LEFT, RIGHT, TOP, BOTTOM = 56, 130, 34, 46
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
BASELINE_COLOURS = {"closed-book": "#7f7f7f", "oracle": "#000000"}
TITLES = {QA_EXPERIMENT: "Multi-document QA", KV_EXPERIMENT: "Key-value retrieval"}


def _accuracy(point: Mapping[str, Any]) -> float | None:
    n = int(point.get("n", 0))
    return int(point.get("correct", 0)) / n if n else None


def u_curve_svg(cells: Sequence[Mapping[str, Any]], experiment: str = QA_EXPERIMENT) -> str | None:
    """The figure for ``experiment``'s cells, or None when the run has no positioned cell of it."""
    grid = curves(cells, experiment)
    if not grid:
        return None
    _, _, noun = AXES[experiment]
    top = max(grid)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(position: int) -> float:
        return LEFT + (position / (top - 1) if top > 1 else 0.5) * plot_w

    def y(value: float) -> float:
        return TOP + (1 - value) * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11" role="img">',
             f"<title>{escape(TITLES[experiment])}: accuracy by position of the relevant {noun[:-1]}</title>",
             f'<text x="{LEFT}" y="18" font-size="13" font-weight="bold">{escape(TITLES[experiment])}</text>',
             f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>'
                     f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
    positions = sorted({p for points in grid.values() for p in points})
    last = -1e9
    for p in positions:
        if x(p) - last < 18:  # a label too close to the previous one would overlap it
            continue
        last = x(p)
        parts.append(f'<text x="{x(p):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{p + 1}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">position of the '
                 f"{escape(noun[:-1])} with the answer (1-based, of {top})</text>")
    parts.append(f'<text transform="translate(14 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
                 "accuracy</text>")
    legend: list[tuple[str, str, bool]] = []
    if experiment == QA_EXPERIMENT:
        for name, point in baselines(cells).items():
            value = _accuracy(point)
            if value is None:
                continue
            colour = BASELINE_COLOURS[name]
            parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                         f'stroke="{colour}" stroke-dasharray="5 4" class="baseline" data-name="{name}"/>')
            legend.append((f"{name} {value:.2f}", colour, True))
    for i, (count, points) in enumerate(grid.items()):
        colour = COLOURS[i % len(COLOURS)]
        xy = [(x(p), y(v), pt) for p, pt in points.items() if (v := _accuracy(pt)) is not None]
        for px, _, pt in xy:
            if pt.get("ci_low") is not None and pt.get("ci_high") is not None:
                parts.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y(float(pt["ci_low"])):.1f}" '
                             f'y2="{y(float(pt["ci_high"])):.1f}" stroke="{colour}" stroke-opacity="0.45"/>')
        if len(xy) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in xy)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" '
                         f'class="curve" data-count="{count}"/>')
        for px, py, pt in xy:
            parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="{colour}">'
                         f"<title>{pt['correct']}/{pt['n']}</title></circle>")
        legend.append((f"{count} {noun}", colour, False))
    for j, (label, colour, dashed) in enumerate(legend):
        ly = TOP + 10 + 18 * j
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        parts.append(f'<line x1="{LEFT + plot_w + 10}" x2="{LEFT + plot_w + 32}" y1="{ly}" y2="{ly}" '
                     f'stroke="{colour}" stroke-width="2"{dash}/>'
                     f'<text x="{LEFT + plot_w + 36}" y="{ly + 4}">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def litm_figures(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every figure the run's cells support: QA first, then key-value retrieval."""
    return [svg for e in (QA_EXPERIMENT, KV_EXPERIMENT) if (svg := u_curve_svg(cells, e)) is not None]
