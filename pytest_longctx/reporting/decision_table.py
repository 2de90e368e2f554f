"""The HTML report's opening: the run's verdict with its counts, then ONE decision table.

A row per experiment (per experiment and model when a report holds several); columns: accuracy [interval],
difference vs the compared run or reference [interval], effective length [interval], what the design could
detect, and each threshold's verdict. Failing rows first and red. The rows come from :mod:`.decision`, which the
terminal reads too. Every value is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx.reporting.charts import esc
from pytest_longctx.reporting.decision import (
    BAD,
    Row,
    Status,
    detect_text,
    model_rows,
    ordered,
    pairing_line,
    rows,
    vs_text,
)
from pytest_longctx.util.words import plural

#: Distinct error messages shown under the verdict (the rest are in the drill-downs and the record).
ERRORS_SHOWN = 3


def error_kinds(trials: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """Each distinct error (its first line, cut at 140 characters) with its count, most frequent first."""
    counts: dict[str, int] = {}
    for t in trials:
        if t.get("outcome") == "error":
            line = str(t.get("error") or "error").strip().splitlines()[0] if t.get("error") else "error"
            key = line if len(line) <= 140 else line[:139] + "…"
            counts[key] = counts.get(key, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])


def verdict_box(status: Status, trials: Sequence[Mapping[str, Any]] = ()) -> str:
    """The headline is the verdict: ``FAIL``, ``200 ERRORS``, ``STOPPED``... with its counts, the exit code and
    the most frequent errors."""
    cls = status.gate + ("" if status.kind == status.gate else f" {status.kind}")
    kinds = error_kinds(trials)
    lines = [*status.facts(), *(f"ERROR ×{n:,}: {text}" for text, n in kinds[:ERRORS_SHOWN])]
    if len(kinds) > ERRORS_SHOWN:
        lines.append(f"{len(kinds) - ERRORS_SHOWN} other distinct errors (see each experiment's misses and errors)")
    facts = "".join(f"<li>{esc(f)}</li>" for f in lines)
    return (f'<div class="gate {esc(cls)}"><div class="kicker">verdict</div><div class="verdict">'
            f'{esc(status.headline())}</div><ul class="small">{facts}</ul></div>')


def _two(top: str, bottom: str = "", cls: str = "") -> str:
    """A value over its interval (or a note), so a column stays narrow."""
    return (f'<span class="v {cls}">{top}</span>' + (f'<span class="ci">{bottom}</span>' if bottom else ""))


def _accuracy(row: Row) -> str:
    p = row.pooled
    errors = f'<span class="ci err">{row.errors:,} {plural("error", row.errors)}</span>' if row.errors else ""
    if not p or not p.get("n"):
        return ('<span class="v muted">nothing scored</span>' if row.errors or p else '<span class="muted">–</span>'
                ) + errors
    units = "trials" if row.unit == "trial" else plural(row.unit, int(p["clusters"]))
    return (_two(f"{p['accuracy']:.3f}", f"[{p['low']:.3f},&nbsp;{p['high']:.3f}]")
            + f'<span class="ci">{p["n"]:,} trials · {p["clusters"]:,} {esc(units)}</span>' + errors)


def _vs(row: Row) -> str:
    vs = row.vs
    if not vs:
        return '<span class="muted">–</span>'
    cls = "neg" if vs["high"] < 0 else "pos" if vs["low"] > 0 else ""
    interval = f"[{vs['low']:+.3f},&nbsp;{vs['high']:+.3f}]"
    return (f'<span title="{esc(vs_text(vs))}">' + _two(f"{vs['diff']:+.3f}", interval, cls)
            + f'<span class="ci">{vs["pairs"]:,} pairs</span></span>')


def _tokens(found: Mapping[str, Any]) -> tuple[str, str]:
    if found.get("below_shortest"):
        shortest = found["levels"][0]["tokens"] if found.get("levels") else 0
        return f"&lt; {shortest:,}", "below the shortest tested"
    more = " (all passed)" if found.get("at_least") else ""
    top = ("≥ " if found.get("at_least") else "") + f"{found['tokens']:,}"
    return top, f"[{found['low']:,},&nbsp;{found['high']:,}]{more}"


def _length(row: Row) -> str:
    if not row.length:
        return '<span class="muted">–</span>'
    top, bottom = _tokens(row.length)
    out = _two(top, bottom) + f'<span class="ci">at accuracy ≥ {esc(row.length["threshold"])}</span>'
    if row.length_before:
        before, _ = _tokens(row.length_before)
        out += f'<span class="ci">compared: {before}</span>'
    return out


def _detect(row: Row) -> str:
    d = row.detectable
    if not d:
        return '<span class="muted">–</span>'
    drop = d.get("drop")
    if drop is None:
        return f'<span title="{esc(detect_text(d))}">no drop</span><span class="ci">too few items</span>'
    return f'<span title="{esc(detect_text(d))}">' + _two(f"{drop:.3f}", f"power {esc(d['power'])}") + "</span>"


def _verdicts(row: Row) -> str:
    if not row.verdicts:
        return '<span class="muted">no threshold</span>'
    items = sorted(row.verdicts, key=lambda v: v[0] not in BAD)
    return '<ul class="verdicts">' + "".join(
        f'<li class="{esc(v)}"><span class="badge {esc(v)}">{esc(v)}</span> <code>{esc(t)}:</code>'
        f'<span class="words">{esc(w)}</span></li>' for v, t, w in items) + "</ul>"


def decision_table(table_rows: Sequence[Row], series_label: str = "", versus: str = "vs compared") -> str:
    """The table itself: failing rows first; a ``series_label`` column (e.g. "model") when rows carry one."""
    if not table_rows:
        return ""
    shown = ordered(table_rows)
    with_vs = any(r.vs for r in shown)
    with_length = any(r.length for r in shown)
    head = ["experiment", *([series_label] if series_label else []), "accuracy [95% CI]",
            *([f"{versus} [95% CI]"] if with_vs else []), *(["effective length (tokens)"] if with_length else []),
            "could detect (drop)", "thresholds"]
    body = []
    for r in shown:
        tds = [f'<th scope="row">{esc(r.experiment)}</th>', *([f"<td>{esc(r.series)}</td>"] if series_label else []),
               f'<td class="num">{_accuracy(r)}</td>', *([f'<td class="num">{_vs(r)}</td>'] if with_vs else []),
               *([f'<td class="num">{_length(r)}</td>'] if with_length else []), f'<td class="num">{_detect(r)}</td>',
               f'<td class="thresholds">{_verdicts(r)}</td>']
        body.append(f'<tr class="{r.kind}">{"".join(tds)}</tr>')
    cols = "".join(f'<th scope="col">{esc(h)}</th>' for h in head)
    return (f'<table class="decision"><thead><tr>{cols}</tr></thead><tbody>{"".join(body)}</tbody></table>')


def decision_html(record: Mapping[str, Any]) -> str:
    """The report's opening section: the decision table and how the compared run paired."""
    several = bool(record.get("models"))
    table = (decision_table(model_rows(record), series_label="model", versus="vs reference") if several
             else decision_table(rows(record)))
    if not table:
        return ""
    pairing = pairing_line(record)
    note = f'<p class="muted small">{esc(pairing)}</p>' if pairing else ""
    return f'<section id="decision" aria-label="decision">{table}{note}</section>'
