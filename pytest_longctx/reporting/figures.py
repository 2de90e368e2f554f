"""Chart builders experiments use for their report sections, built from cells (and trials) by param keys.

A chart is drawn only when the keys it needs exist (a builder returns None otherwise), so a new or
renamed condition never breaks the report. Which charts an experiment shows is its own choice, made
in its ``pytest_longctx_report_sections`` hook; see ``reporting/sections.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.reporting.charts import (
    Bar,
    Figure,
    Point,
    Series,
    bar_chart,
    color,
    esc,
    heatmap,
    histogram,
    is_number,
    line_chart,
    natural_key,
)
from pytest_longctx.results.stats import wilson

Cells = Sequence[Mapping[str, Any]]
Trials = Sequence[Mapping[str, Any]]
MAX_BARS = 40
#: Series drawn in one chart; more become small multiples.
MAX_OVERLAID = 4
PANEL_WIDTH, PANEL_HEIGHT = 300, 210
#: Palette index of the compared run's bars (slate grey).
COMPARED_COLOR = 8


def hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def params_text(params: Mapping[str, Any], skip: Sequence[str] = (), empty: str = "all") -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items() if k not in skip) or empty


def series_label(params: Mapping[str, Any], keys: Sequence[str]) -> str:
    return ", ".join(f"{k}={params[k]}" for k in keys if k in params) or "all"


def label_key(label: str) -> list[tuple[int, float, str]]:
    """``context_tokens=4000`` before ``context_tokens=16000``: each ``k=v`` part in natural order."""
    out = []
    for part in label.split(", "):
        value: Any = part.partition("=")[2]
        try:
            value = float(value)
        except ValueError:
            pass
        out.append(natural_key(value))
    return out


def label_colors(cells: Cells, keys: Sequence[str]) -> dict[str, int]:
    """Palette index per series label, the same in every chart of a group (e.g. rag is always red)."""
    labels = sorted({series_label(c.get("params", {}), keys) for c in cells}, key=label_key)
    return {label: i for i, label in enumerate(labels)}


def pooled(cells: Cells, x_key: str, series_keys: Sequence[str], *, compared: bool = False,
           ) -> dict[str, dict[Any, list[int]]]:
    """``{series label: {x value: [correct, n]}}`` over cells that have ``x_key`` (other params pooled);
    ``compared``: the compared run's counts of the same cells (from each cell's ``compare``)."""
    out: dict[str, dict[Any, list[int]]] = {}
    for cell in cells:
        params = cell.get("params", {})
        cmp = cell.get("compare")
        if x_key not in params or (compared and not cmp):
            continue
        acc = out.setdefault(series_label(params, series_keys), {}).setdefault(hashable(params[x_key]), [0, 0])
        if cmp is not None and compared:
            acc[0] += round(float(cmp["baseline_accuracy"]) * int(cmp["baseline_n"]))
            acc[1] += int(cmp["baseline_n"])
        else:
            acc[0] += int(cell.get("correct", 0))
            acc[1] += int(cell.get("n", 0))
    return out


def accuracy_point(x: Any, correct: int, n: int) -> Point:
    low, high = wilson(correct, n)
    acc = correct / n if n else 0.0
    return Point(x, acc, low, high, f"{acc:.3f} ({correct}/{n}), 95% CI [{low:.2f}, {high:.2f}]")


@dataclass(frozen=True)
class Line:
    """One series of a lines figure: this run's points, and the compared run's (or reference model's) beside it."""

    label: str
    points: list[Point]
    before: list[Point] = field(default_factory=list)
    color: int = 0


def _panel(line: Line, others: Sequence[Line], x_label: str, refs: Sequence[tuple[float, str, str]],
           x_log: bool | None) -> str:
    series = [Series(line.label, line.points, color=line.color)]
    if line.before:
        series.append(Series(f"{line.label} (compared run)", line.before, dashed=True, color=line.color))
    context = [Series(o.label, o.points) for o in others if o is not line and o.points]
    svg = line_chart(series, x_label=x_label, y_label="", refs=refs, context=context, width=PANEL_WIDTH,
                     height=PANEL_HEIGHT, intervals="band", x_log=x_log)
    return (f'<div class="panel"><div class="panel-title"><span class="swatch" style="--c:{color(line.color)}">'
            f"</span>{esc(line.label)}</div>{svg}</div>")


def lines_figure(title: str, lines: Sequence[Line], *, x_label: str, refs: Sequence[tuple[float, str, str]] = (),
                 note: str = "", compared_label: str = "compared run", x_log: bool | None = None) -> Figure | None:
    """Accuracy lines with 95% intervals, the same style for every experiment. Up to :data:`MAX_OVERLAID` series
    share one chart (intervals as error bars set apart, a band when there is one series); more become small
    multiples, one panel per series with its band and the others as thin grey lines. ``refs``: dashed horizontal
    lines (y, label, colour), labelled in the legend."""
    lines = [line for line in lines if line.points or line.before]
    if not lines:
        return None
    legend = [(label, colour, True) for _, label, colour in refs]
    compared = any(line.before for line in lines)
    if sum(1 + bool(line.before) for line in lines) > MAX_OVERLAID:
        grid = "".join(_panel(line, lines, x_label, refs, x_log) for line in lines)
        note = (f"{len(lines)} series, one panel each (shaded: its 95% interval; grey: the other series, for "
                "comparison). " + note).strip()
        if compared:
            legend.append((compared_label, "#475569", True))
        return Figure(title, f'<div class="multiples">{grid}</div>', legend, note, wide=True)
    series = []
    for line in lines:
        if line.points:
            series.append(Series(line.label, line.points, color=line.color))
        if line.before:
            series.append(Series(f"{line.label} ({compared_label})" if line.label != "all" else compared_label,
                                 line.before, dashed=True, color=line.color))
    legend = [(s.label, color(s.color or 0), s.dashed) for s in series] + legend
    carrying = sum(1 for s in series if not s.dashed)
    said = "Shaded: 95% interval." if carrying <= 1 else "Bars: 95% intervals (set slightly apart)."
    return Figure(title, line_chart(series, x_label=x_label, refs=refs, x_log=x_log), legend, f"{said} {note}".strip())


def accuracy_lines(cells: Cells, x_key: str, series_keys: Sequence[str], title: str,
                   ref: tuple[float, str] | None = None) -> Figure | None:
    """Accuracy against ``x_key``, one series per combination of ``series_keys``, with 95% intervals; when the
    run was compared, the compared run's line beside each, dashed (see :func:`lines_figure`)."""
    groups = pooled(cells, x_key, series_keys)
    before = pooled(cells, x_key, series_keys, compared=True)
    colors = label_colors(cells, series_keys)
    lines = [Line(label, [accuracy_point(x, c, n) for x, (c, n) in xs.items() if n > 0],
                  [accuracy_point(x, c, n) for x, (c, n) in before.get(label, {}).items() if n > 0],
                  colors.get(label, 0)) for label, xs in sorted(groups.items(), key=lambda g: label_key(g[0]))]
    keys = {k for c in cells if x_key in c.get("params", {}) for k in c["params"]}
    pooled_over = sorted(keys - {x_key, *series_keys})
    note = (f"Pooled over {', '.join(pooled_over)}." if pooled_over else "") + (
        " Dashed: the compared run." if before else "")
    refs = [(ref[0], ref[1], "#6b7280")] if ref else []
    return lines_figure(title, lines, x_label=x_key, refs=refs, note=note.strip())


def accuracy_heatmap(cells: Cells, row_key: str, col_key: str, title: str) -> Figure | None:
    values: dict[tuple[Any, Any], list[int]] = {}
    for cell in cells:
        params = cell.get("params", {})
        if row_key in params and col_key in params:
            acc = values.setdefault((hashable(params[row_key]), hashable(params[col_key])), [0, 0])
            acc[0] += int(cell.get("correct", 0))
            acc[1] += int(cell.get("n", 0))
    if not values:
        return None
    rows = sorted({r for r, _ in values}, key=natural_key)
    cols = sorted({c for _, c in values}, key=natural_key)
    table = {k: ((c / n if n else 0.0), c, n) for k, (c, n) in values.items()}
    pooled_over = sorted({k for c in cells if row_key in c.get("params", {}) and col_key in c["params"]
                          for k in c["params"]} - {row_key, col_key})
    return Figure(title, heatmap(rows, cols, table, row_label=row_key, col_label=col_key),
                  note="Cell colour and value: accuracy." + (f" Pooled over {', '.join(pooled_over)}."
                                                              if pooled_over else ""))


def cell_bars(cells: Cells, title: str, *, color_key: str | None = None, skip_label: Sequence[str] = (),
              ref: tuple[float, str] | None = None) -> Figure | None:
    """Accuracy per cell as horizontal bars with 95% whiskers (first MAX_BARS cells)."""
    shown = [c for c in cells if int(c.get("n", 0)) > 0][:MAX_BARS]
    if not shown:
        return None
    keys: list[str] = []
    bars = []
    compared = any(c.get("compare") for c in shown)
    for cell in shown:
        group = str(cell.get(color_key, "")) if color_key else ""
        if group not in keys:
            keys.append(group)
        label = (f"{group}: " if group and len(keys) > 1 else "") + params_text(cell.get("params", {}), skip_label,
                                                                                 str(cell.get("experiment", "all")))
        bars.append(Bar(label, float(cell.get("accuracy", 0.0)), cell.get("ci_low"), cell.get("ci_high"),
                        keys.index(group), f"{float(cell.get('accuracy', 0)):.3f} (n={cell.get('n')})"))
        cmp = cell.get("compare")
        if compared and cmp:  # the compared run's bar right under this run's
            n, acc = int(cmp["baseline_n"]), float(cmp["baseline_accuracy"])
            low, high = wilson(round(acc * n), n)
            bars.append(Bar("↳ compared run", acc, low, high, COMPARED_COLOR,
                            f"{label}: {acc:.3f} (n={n}), compared run"))
    more = len([c for c in cells if int(c.get("n", 0)) > 0]) - len(shown)
    note = "Whiskers: 95% Wilson interval." + (f" {more} more cells in the table." if more > 0 else "")
    legend = [(k, color(i), False) for i, k in enumerate(keys)] if len(keys) > 1 else []
    if compared:
        legend = [*(legend or [("this run", color(0), False)]), ("compared run", color(COMPARED_COLOR), False)]
    return Figure(title, bar_chart(bars, ref=ref), legend, note)


def miss_histogram(trials: Trials, title: str) -> Figure | None:
    """Distance (in lines) between the asked line and the one the model answered, for wrong answers."""
    misses = [t for t in trials if t.get("outcome") == "incorrect" and "miss_distance" in (t.get("detail") or {})]
    if not misses:
        return None
    values = [t["detail"]["miss_distance"] for t in misses]
    numbers = [int(v) for v in values if is_number(v)]
    absent = len(values) - len(numbers)
    bins: list[tuple[str, int]] = []
    if numbers:
        lo, hi = min(*numbers, -3), max(*numbers, 3)  # keep 0 (the asked line) in view
        if hi - lo <= 24:
            bins = [(str(v), numbers.count(v)) for v in range(lo, hi + 1)]
        else:
            width = -(-(hi - lo + 1) // 20)
            bins = [(f"{start}…{start + width - 1}", sum(start <= v < start + width for v in numbers))
                    for start in range(lo, hi + 1, width)]
    share = absent / len(values)
    svg = histogram(bins, x_label="miss distance (answered line − asked line)", extra=("not in file", absent))
    return Figure(title, svg, note=f"{len(values)} wrong answers; {share:.0%} named a value that is not in the file "
                                   f"({absent}).")


def mean_lines(cells: Cells, trials: Trials, field: str, x_key: str, series_key: str, title: str) -> Figure | None:
    """Mean of a numeric per-cell or per-trial ``field`` (e.g. retrieval_recall) against ``x_key``."""
    sums: dict[str, dict[Any, list[float]]] = {}

    def add(params: Mapping[str, Any], value: Any, weight: float = 1.0) -> None:
        if x_key in params and is_number(value):
            acc = sums.setdefault(series_label(params, [series_key]), {}).setdefault(hashable(params[x_key]), [0, 0])
            acc[0] += float(value) * weight
            acc[1] += weight

    from_cells = [c for c in cells if is_number(c.get(field))]
    for cell in from_cells:
        add(cell.get("params", {}), cell[field], max(1, int(cell.get("n", 1))))
    if not from_cells:
        for t in trials:
            add(t.get("params", {}), (t.get("detail") or {}).get(field))
    colors = label_colors(cells, [series_key])
    series = [Series(label, [Point(x, s / w, note=f"mean {s / w:.3f} over {w:g}") for x, (s, w) in xs.items() if w],
                     color=colors.get(label, 0))
              for label, xs in sorted(sums.items())]
    if not series:
        return None
    return Figure(title, line_chart(series, x_label=x_key, y_label=field.replace("_", " ")),
                  [(s.label, color(s.color or 0), False) for s in series], "Mean over trials.")


def judge_agreement(trials: Trials, group_key: str, title: str) -> Figure | None:
    """Share of trials where the judge agreed with the reference scoring, per ``group_key``."""
    groups: dict[str, list[int]] = {}
    for t in trials:
        agree = (t.get("detail") or {}).get("judge_agree")
        if isinstance(agree, bool):
            acc = groups.setdefault(str(t.get("params", {}).get(group_key, f"(no {group_key})")), [0, 0])
            acc[0] += agree
            acc[1] += 1
    if not groups:
        return None
    bars = []
    for i, (label, (k, n)) in enumerate(sorted(groups.items())):
        low, high = wilson(k, n)
        bars.append(Bar(label, k / n, low, high, i, f"{k}/{n} agree"))
    total = sum(k for k, _ in groups.values()), sum(n for _, n in groups.values())
    return Figure(title, bar_chart(bars, x_label="judge agreement"),
                  note=f"Judge agreed on {total[0]}/{total[1]} trials ({total[0] / total[1]:.0%}).")
