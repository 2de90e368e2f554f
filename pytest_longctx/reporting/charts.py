"""Inline SVG charts drawn on the server: no JavaScript, no fonts or scripts fetched.

Every piece of text that reaches the SVG (labels, tooltips) goes through :func:`esc`; colours
come from a fixed palette, never from the data.
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

PALETTE = ("#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d",
           "#475569", "#b45309")
POSITION_ORDER = ("start", "beginning", "begin", "early", "middle", "mid", "late", "end")
WIDTH = 560
FONT = 'font-family="system-ui,-apple-system,Segoe UI,Roboto,sans-serif"'


def esc(value: Any) -> str:
    """HTML/SVG-escape any value (quotes too, so it is safe inside attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


@dataclass(frozen=True)
class Point:
    """One plotted value with an optional interval and a tooltip."""

    x: Any
    y: float
    low: float | None = None
    high: float | None = None
    note: str = ""


@dataclass(frozen=True)
class Series:
    label: str
    points: list[Point]
    dashed: bool = False
    color: int | None = None  # palette index; default: the series' position


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    low: float | None = None
    high: float | None = None
    color: int = 0
    note: str = ""


@dataclass
class Figure:
    """A chart plus its title, HTML legend and a one-line note."""

    title: str
    svg: str
    legend: list[tuple[str, str, bool]] = field(default_factory=list)  # (label, colour, dashed)
    note: str = ""
    #: Spans the whole row of figures (small multiples).
    wide: bool = False


def fmt_value(value: Any) -> str:
    """Compact tick/axis label: 32000 -> 32k, 0.25 -> 0.25, long text cut."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = str(value)
        return text if len(text) <= 16 else text[:15] + "…"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    number = int(value)
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if abs(number) >= size and number % (size // 10) == 0:
            return f"{number / size:g}{suffix}"
    return str(number)


def p_number(p: float) -> str:
    """A p-value's number: three significant digits, '<0.0001' rather than a '0' too small to print."""
    return "<0.0001" if p < 1e-4 else f"{p:.3g}"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def natural_key(value: Any) -> tuple[int, float, str]:
    """Numbers numerically, known position words in reading order, other text alphabetically."""
    if is_number(value):
        return (0, float(value), "")
    text = str(value).lower()
    if text in POSITION_ORDER:
        return (1, POSITION_ORDER.index(text), "")
    return (2, 0.0, text)


class XScale:
    """Numeric (linear, or log for wide positive ranges) or categorical x axis over ``left..right``."""

    def __init__(self, values: Sequence[Any], left: float, right: float, log: bool | None = None) -> None:
        self.values = sorted(set(values), key=natural_key)
        self.left, self.right = left, right
        self.numeric = bool(self.values) and all(is_number(v) for v in self.values)
        self.log = False
        if self.numeric and len(self.values) > 1:
            lo, hi = float(self.values[0]), float(self.values[-1])
            self.log = lo > 0 and (hi / lo >= 20 if log is None else log)
            self.lo, self.hi = (math.log10(lo), math.log10(hi)) if self.log else (lo, hi)

    def __call__(self, value: Any) -> float:
        if len(self.values) <= 1:
            return (self.left + self.right) / 2
        if self.numeric:
            v = math.log10(float(value)) if self.log else float(value)
            frac = (v - self.lo) / (self.hi - self.lo) if self.hi != self.lo else 0.5
        else:
            frac = self.values.index(value) / (len(self.values) - 1)
        return self.left + frac * (self.right - self.left)


def _svg(height: int, body: str, label: str, width: int = WIDTH) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" class="chart" role="img" '
            f'aria-label="{esc(label)}" {FONT} font-size="11">{body}</svg>')


def _y_axis(top: float, bottom: float, left: float, right: float, y_max: float, label: str, pct: bool) -> str:
    parts = []
    for i in range(5):
        value = y_max * i / 4
        y = bottom - (bottom - top) * i / 4
        text = f"{value:.0%}" if pct else fmt_value(round(value, 2) if value % 1 else int(value))
        parts.append(f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>'
                     f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#6b7280">{esc(text)}</text>')
    mid = (top + bottom) / 2
    if label:
        parts.append(f'<text x="12" y="{mid:.1f}" transform="rotate(-90 12 {mid:.1f})" text-anchor="middle" '
                     f'fill="#374151">{esc(label)}</text>')
    return "".join(parts)


def _x_ticks(scale: XScale, bottom: float, label: str) -> str:
    parts, last = [], -1e9
    for value in scale.values:
        x = scale(value)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 4}" stroke="#9ca3af"/>')
        text = fmt_value(value)
        if x - last >= 6.5 * max(len(text), 4):
            parts.append(f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle" fill="#6b7280">{esc(text)}</text>')
            last = x
    parts.append(f'<text x="{(scale.left + scale.right) / 2:.1f}" y="{bottom + 34}" text-anchor="middle" '
                 f'fill="#374151">{esc(label)}{" (log scale)" if scale.log else ""}</text>')
    return "".join(parts)


def _ref_line(y: float, left: float, right: float, label: str, colour: str = "#6b7280") -> str:
    """A dashed horizontal reference; its label goes in the legend, never on the data."""
    return (f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-dasharray="5 4" '
            f'class="ref"><title>{esc(label)}</title></line>')


def line_chart(series: Sequence[Series], *, x_label: str, y_label: str = "accuracy", y_max: float = 1.0,
               ref: tuple[float, str] | None = None, pct: bool = True, refs: Sequence[tuple[float, str, str]] = (),
               context: Sequence[Series] = (), width: int = WIDTH, height: int = 300, intervals: str = "auto",
               x_log: bool | None = None) -> str:
    """Lines with markers and their 95% intervals: a light band when one series carries intervals, error bars set
    slightly apart when several do (``intervals``: auto, band, bars or none). ``context``: thin grey lines without
    markers (the other series of a small multiple). ``ref``/``refs``: dashed horizontal lines ((y, label[, colour])),
    labelled in the figure's legend, not on the plot."""
    top, bottom, left, right = 14, height - 50, 54 if y_label else 40, width - 16
    scale = XScale([p.x for s in (*series, *context) for p in s.points], left + 12, right - 12, x_log)

    def y_of(value: float) -> float:
        return bottom - (bottom - top) * max(0.0, min(value, y_max)) / y_max

    parts = [_y_axis(top, bottom, left, right, y_max, y_label, pct), _x_ticks(scale, bottom, x_label)]
    for value, label, colour in [*([(ref[0], ref[1], "#6b7280")] if ref else []), *refs]:
        parts.append(_ref_line(y_of(value), left, right, label, colour))
    for s in context:
        path = " ".join(f"{scale(p.x):.1f},{y_of(p.y):.1f}" for p in sorted(s.points, key=lambda p: natural_key(p.x)))
        parts.append(f'<polyline points="{path}" fill="none" stroke="#cbd5e1" stroke-width="1.2" class="context">'
                     f"<title>{esc(s.label)}</title></polyline>")
    carrying = [s for s in series if any(p.low is not None and p.high is not None for p in s.points) and not s.dashed]
    mode = intervals if intervals != "auto" else "band" if len(carrying) <= 1 else "bars"
    step = min(5.0, (right - left) / max(1, len(scale.values)) / (len(carrying) + 1)) if mode == "bars" else 0.0
    for n, s in enumerate(series):
        i = n if s.color is None else s.color
        points = sorted(s.points, key=lambda p: natural_key(p.x))
        shift = (carrying.index(s) - (len(carrying) - 1) / 2) * step if s in carrying else 0.0
        banded = [p for p in points if p.low is not None and p.high is not None] if s in carrying else []
        if mode == "band" and len(banded) > 1:
            upper = " ".join(f"{scale(p.x):.1f},{y_of(p.high or 0):.1f}" for p in banded)
            lower = " ".join(f"{scale(p.x):.1f},{y_of(p.low or 0):.1f}" for p in reversed(banded))
            parts.append(f'<polygon points="{upper} {lower}" fill="{color(i)}" fill-opacity="0.12" stroke="none"/>')
        elif mode != "none":
            for p in banded:
                x = scale(p.x) + shift
                y1, y2 = y_of(p.low or 0), y_of(p.high or 0)
                parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y1:.1f}" y2="{y2:.1f}" '
                             f'stroke="{color(i)}" stroke-opacity="0.55" stroke-width="1.5" class="ci"/>')
        path = " ".join(f"{scale(p.x) + shift:.1f},{y_of(p.y):.1f}" for p in points)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<polyline points="{path}" fill="none" stroke="{color(i)}" stroke-width="2"{dash} '
                     f'class="curve" data-series="{esc(s.label)}"/>')
        for p in points:
            parts.append(f'<circle cx="{scale(p.x) + shift:.1f}" cy="{y_of(p.y):.1f}" r="{2.5 if s.dashed else 3.5}" '
                         f'fill="{"#fff" if s.dashed else color(i)}" stroke="{color(i)}">'
                         f'<title>{esc(s.label)} · {esc(x_label)}={esc(p.x)}: {esc(p.note)}</title></circle>')
    parts.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#9ca3af"/>')
    return _svg(height, "".join(parts), f"{y_label or 'accuracy'} by {x_label}", width)


def heat_color(value: float) -> str:
    """Red (0) → amber (0.5) → green (1)."""
    stops = ((0.0, (215, 48, 39)), (0.5, (254, 224, 139)), (1.0, (26, 152, 80)))
    value = max(0.0, min(1.0, value))
    for (a, ca), (b, cb) in itertools.pairwise(stops):
        if value <= b:
            t = (value - a) / (b - a)
            rgb = [round(x + (y - x) * t) for x, y in zip(ca, cb, strict=True)]
            return "#{:02x}{:02x}{:02x}".format(*rgb)
    return "#1a9850"


def heatmap(rows: Sequence[Any], cols: Sequence[Any], values: dict[tuple[Any, Any], tuple[float, int, int]], *,
            row_label: str, col_label: str) -> str:
    """Grid of cells coloured by accuracy with the value printed; ``values[(row, col)] = (acc, k, n)``."""
    left, top, right = 70, 12, WIDTH - 16
    cell_h = 30
    bottom = top + cell_h * len(rows)
    height = bottom + 74
    cell_w = (right - left) / max(1, len(cols))
    parts = []
    for r, row in enumerate(rows):
        y = top + r * cell_h
        parts.append(f'<text x="{left - 6}" y="{y + cell_h / 2 + 4:.1f}" text-anchor="end" fill="#6b7280">'
                     f'{esc(fmt_value(row))}</text>')
        for c, col in enumerate(cols):
            x = left + c * cell_w
            got = values.get((row, col))
            if got is None or got[2] == 0:
                fill, text, tip = "#f3f4f6", "—", "no scored trials"
            else:
                fill, text = heat_color(got[0]), f"{got[0]:.2f}"
                tip = f"{got[0]:.3f} ({got[1]}/{got[2]})"
            ink = "#111827" if got is None or got[2] == 0 or 0.25 < got[0] < 0.85 else "#ffffff"
            parts.append(f'<rect x="{x + 1:.1f}" y="{y + 1}" width="{cell_w - 2:.1f}" height="{cell_h - 2}" rx="3" '
                         f'fill="{fill}"><title>{esc(row_label)}={esc(row)}, {esc(col_label)}={esc(col)}: '
                         f'{esc(tip)}</title></rect>'
                         f'<text x="{x + cell_w / 2:.1f}" y="{y + cell_h / 2 + 4:.1f}" text-anchor="middle" '
                         f'fill="{ink}" pointer-events="none">{esc(text)}</text>')
    for c, col in enumerate(cols):
        x = left + (c + 0.5) * cell_w
        parts.append(f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle" fill="#6b7280">'
                     f'{esc(fmt_value(col))}</text>')
    parts.append(f'<text x="{(left + right) / 2:.1f}" y="{bottom + 32}" text-anchor="middle" fill="#374151">'
                 f'{esc(col_label)}</text>')
    mid = (top + bottom) / 2
    parts.append(f'<text x="12" y="{mid:.1f}" transform="rotate(-90 12 {mid:.1f})" text-anchor="middle" '
                 f'fill="#374151">{esc(row_label)}</text>')
    scale_y, scale_x = bottom + 46, right - 200
    for i in range(20):
        parts.append(f'<rect x="{scale_x + i * 9}" y="{scale_y}" width="9" height="9" fill="{heat_color(i / 19)}"/>')
    parts.append(f'<text x="{scale_x - 6}" y="{scale_y + 8}" text-anchor="end" fill="#6b7280">accuracy 0</text>'
                 f'<text x="{scale_x + 186}" y="{scale_y + 8}" fill="#6b7280">1</text>')
    return _svg(height, "".join(parts), f"accuracy by {row_label} and {col_label}")


def histogram(bins: Sequence[tuple[str, int]], *, x_label: str, extra: tuple[str, int] | None = None) -> str:
    """Vertical count bars; ``extra`` is a separate, grey bar at the right (e.g. "not in file")."""
    height, top, bottom, left, right = 300, 14, 250, 54, WIDTH - 16
    all_bins = list(bins) + ([extra] if extra else [])
    peak = max([count for _, count in all_bins] + [1])
    y_max = float(max(4, math.ceil(peak / 4) * 4))
    slots = len(all_bins) + (0.6 if extra else 0)
    slot_w = (right - left) / max(slots, 1)
    parts = [_y_axis(top, bottom, left, right, y_max, "answers", pct=False)]
    last = -1e9
    for i, (label, count) in enumerate(all_bins):
        is_extra = extra is not None and i == len(all_bins) - 1
        x = left + (i + (0.6 if is_extra else 0)) * slot_w
        h = (bottom - top) * count / y_max
        fill = "#9ca3af" if is_extra else color(1)
        bar_w = min(max(slot_w - 3, 1), 64)
        parts.append(f'<rect x="{x + (slot_w - bar_w) / 2:.1f}" y="{bottom - h:.1f}" width="{bar_w:.1f}" '
                     f'height="{h:.1f}" fill="{fill}"><title>{esc(label)}: {count}</title></rect>')
        cx = x + slot_w / 2
        if cx - last >= 6.5 * max(len(label), 3) or is_extra:
            parts.append(f'<text x="{cx:.1f}" y="{bottom + 16}" text-anchor="middle" fill="#6b7280">'
                         f"{esc(label)}</text>")
            last = cx
    parts.append(f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#9ca3af"/>'
                 f'<text x="{(left + right) / 2:.1f}" y="{bottom + 34}" text-anchor="middle" fill="#374151">'
                 f'{esc(x_label)}</text>')
    return _svg(height, "".join(parts), f"histogram of {x_label}")


def bar_chart(bars: Sequence[Bar], *, x_label: str = "accuracy", ref: tuple[float, str] | None = None,
              x_max: float = 1.0) -> str:
    """Horizontal bars (labels on the left, readable for long condition names) with interval whiskers."""
    row_h, top, left, right = 22, 24 if ref else 10, 190, WIDTH - 20
    bottom = top + row_h * len(bars)
    height = bottom + 44

    def x_of(value: float) -> float:
        return left + (right - left) * max(0.0, min(value, x_max)) / x_max

    parts = []
    for i in range(5):
        x = left + (right - left) * i / 4
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{bottom}" stroke="#e5e7eb"/>'
                     f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" fill="#6b7280">'
                     f'{x_max * i / 4:.0%}</text>')
    for i, bar in enumerate(bars):
        y = top + i * row_h
        label = bar.label if len(bar.label) <= 30 else bar.label[:29] + "…"
        parts.append(f'<text x="{left - 6}" y="{y + row_h / 2 + 4:.1f}" text-anchor="end" fill="#374151">'
                     f'{esc(label)}<title>{esc(bar.label)}</title></text>'
                     f'<rect x="{left}" y="{y + 4}" width="{x_of(bar.value) - left:.1f}" height="{row_h - 8}" rx="2" '
                     f'fill="{color(bar.color)}" fill-opacity="0.85"><title>{esc(bar.label)}: {esc(bar.note)}</title>'
                     f'</rect>')
        if bar.low is not None and bar.high is not None:
            cy = y + row_h / 2
            parts.append(f'<path d="M{x_of(bar.low):.1f} {cy:.1f}H{x_of(bar.high):.1f}M{x_of(bar.low):.1f} {cy - 4:.1f}'
                         f'V{cy + 4:.1f}M{x_of(bar.high):.1f} {cy - 4:.1f}V{cy + 4:.1f}" stroke="#111827" '
                         f'stroke-width="1.2" fill="none"/>')
    if ref is not None:
        x = x_of(ref[0])
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 8}" y2="{bottom}" stroke="#111827" '
                     f'stroke-dasharray="5 4"/><text x="{x + 4:.1f}" y="{top - 10}" fill="#111827">'
                     f'{esc(ref[1])}</text>')
    parts.append(f'<text x="{(left + right) / 2:.1f}" y="{bottom + 40}" text-anchor="middle" fill="#374151">'
                 f'{esc(x_label)}</text>')
    return _svg(height, "".join(parts), f"{x_label} per condition")


def render_figure(fig: Figure) -> str:
    """A chart card: title, the SVG, legend and note (all text escaped)."""
    legend = "".join(f'<li><span class="swatch{" dashed" if dashed else ""}" style="--c:{c}"></span>{esc(label)}</li>'
                     for label, c, dashed in fig.legend)
    return (f'<figure class="card{" wide" if fig.wide else ""}"><figcaption>{esc(fig.title)}</figcaption>{fig.svg}'
            + (f'<ul class="legend">{legend}</ul>' if legend else "")
            + (f'<p class="note">{esc(fig.note)}</p>' if fig.note else "") + "</figure>")
