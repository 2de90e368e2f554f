"""The "Models side by side" part of a run of several models (``record["models"]``, ``session/model_gates.py``).

Per experiment: a table (pooled accuracy, paired difference from the reference, effective length, place in the
ranking, errors), the pairs the ranking rests on (simultaneous intervals), a chart with a line per model; then
the cost and the gate of each model. The same tables print in the terminal (:func:`models_lines`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx.reporting.charts import Figure, esc, render_figure
from pytest_longctx.reporting.figures import Line, accuracy_point, hashable, lines_figure
from pytest_longctx.reporting.tables import table_html, table_lines


def _interval(low: Any, high: Any, digits: int = 2, signed: bool = False) -> str:
    if low is None or high is None:
        return ""
    form = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    return f"[{form.format(low)}, {form.format(high)}]"


def _length(entry: Mapping[str, Any] | None) -> str:
    if not entry:
        return "–"
    more = "+" if entry.get("at_least") else ""
    return f"{int(entry['tokens']):,}{more} [{int(entry['low']):,}, {int(entry['high']):,}]"


def experiment_table(experiment: str, summary: Mapping[str, Any], reference: str) -> dict[str, Any]:
    """One experiment's models as a table (the report's table schema: title, columns, rows, note)."""
    ranking = summary.get("ranking") or {}
    places = ranking.get("places") or {}
    rows = []
    for spec, entry in (summary.get("models") or {}).items():
        pooled = entry.get("pooled") or {}
        vs = entry.get("vs_reference")
        rows.append([
            spec + (" (reference)" if spec == reference else ""),
            f"{pooled['accuracy']:.3f} {_interval(pooled.get('low'), pooled.get('high'))}" if pooled else "–",
            f"{vs['diff']:+.3f} {_interval(vs.get('low'), vs.get('high'), signed=True)}" if vs else "–",
            _length(entry.get("effective_length")),
            (places.get(spec) or {}).get("text", "–"),
            str(entry.get("errors", 0)),
        ])
    level = float(ranking.get("level", 0.95))
    note = (f"Intervals 95%, counting independent items; differences paired on items. Places: models share a "
            f"place unless their paired interval at {level:.2%} (Bonferroni over the pairs, all together 95%) "
            "excludes 0.")
    return {"title": f"{experiment}: models side by side", "experiment": experiment,
            "columns": ["model", "accuracy [95%]", "vs reference [95%]", "effective length [95%]", "place", "errors"],
            "rows": rows, "note": note}


def pairs_table(experiment: str, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The pairs the ranking rests on: each difference with its simultaneous interval."""
    ranking = summary.get("ranking") or {}
    rows = [[f"{p['a']} - {p['b']}", f"{p['diff']:+.3f} {_interval(p['low'], p['high'], signed=True)}",
             str(p["pairs"]), str(p["clusters"]), p["better"] or "not separated"]
            for p in ranking.get("pairs") or []]
    return {"title": f"{experiment}: pairs (simultaneous intervals, {float(ranking.get('level', 0.95)):.2%} each)",
            "experiment": experiment, "columns": ["pair", "difference", "paired trials", "items", "shown better"],
            "rows": rows}


def cost_table(models: Mapping[str, Any]) -> dict[str, Any]:
    """Each model's requests, tokens and dollars (the run's ledger: what was sent, at that model's price; a plan's
    rows: what would be sent) beside its gate."""
    cost, gate = models.get("cost") or {}, models.get("gate") or {}
    planned = any(c.get("planned") for c in cost.values())
    rows = [[spec, f"{int(c.get('calls', 0)):,}", f"{int(c.get('billed_input_tokens', 0)):,}",
             f"{int(c.get('paid_output_tokens', 0)):,}",
             "price unknown" if c.get("usd", 0.0) is None else f"${float(c.get('usd', 0.0)):,.4f}",
             str(gate.get(spec))] for spec, c in cost.items()]
    total = sum(float(c["usd"]) for c in cost.values() if c.get("usd") is not None)
    if len(rows) > 1:
        rows.append(["all models", f"{sum(int(c.get('calls', 0)) for c in cost.values()):,}", "", "",
                     f"${total:,.4f}", ""])
    title = "Planned cost per model (at most: every output to its cap)" if planned else "Cost and gate per model"
    return {"title": title, "columns": ["model", "requests", "billed input tokens", "output tokens", "cost", "gate"],
            "rows": rows}


def model_lines(summary: Mapping[str, Any], x_key: str) -> list[Line]:
    """A line per model: accuracy against ``x_key`` (other params pooled), with 95% Wilson intervals."""
    out = []
    for i, (spec, entry) in enumerate((summary.get("models") or {}).items()):
        points: dict[Any, list[int]] = {}
        for cell in entry.get("series") or []:
            if x_key not in cell["params"]:
                continue
            acc = points.setdefault(hashable(cell["params"][x_key]), [0, 0])
            acc[0] += round(float(cell["accuracy"]) * int(cell["n"]))
            acc[1] += int(cell["n"])
        made = [accuracy_point(x, k, n) for x, (k, n) in points.items() if n > 0]
        if made:
            out.append(Line(str(spec), made, color=i))
    return out


def _x_key(summary: Mapping[str, Any]) -> str | None:
    """The experiment's length axis when it has one, else its first condition parameter."""
    for entry in (summary.get("models") or {}).values():
        length = entry.get("effective_length") or {}
        if length.get("param"):
            return str(length["param"])
    for entry in (summary.get("models") or {}).values():
        for cell in entry.get("series") or []:
            if cell["params"]:
                return str(sorted(cell["params"])[0])
    return None


def model_figure(experiment: str, summary: Mapping[str, Any]) -> Figure | None:
    """The experiment's accuracy by its length axis, a line per model, in the report's one chart style (small
    multiples past a few models)."""
    x_key = _x_key(summary)
    if x_key is None:
        return None
    values = [c["params"][x_key] for e in (summary.get("models") or {}).values() for c in e.get("series") or []
              if x_key in c["params"]]
    if not values or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return None  # a curve needs a numeric axis (a length); the table above holds the rest
    return lines_figure(f"{experiment}: accuracy by {x_key}, a line per model", model_lines(summary, x_key),
                        x_label=x_key)


def models_html(record: Mapping[str, Any]) -> str:
    """The report's "Models side by side" section ("" for a run of one model)."""
    models = record.get("models")
    if not models:
        return ""
    reference = str(models.get("reference"))
    parts = ['<section id="models"><h2>Models side by side</h2>',
             f'<p class="note">Reference: <code>{esc(reference)}</code>. Each model\'s own record: '
             + ", ".join(f"<code>{esc(p)}</code>" for p in (models.get("records") or {}).values()) + "</p>"]
    for experiment, summary in (models.get("experiments") or {}).items():
        figure = model_figure(experiment, summary)
        parts.append(table_html(experiment_table(experiment, summary, reference))
                     + table_html(pairs_table(experiment, summary))
                     + (f'<div class="figures">{render_figure(figure)}</div>' if figure else ""))
    parts.append(table_html(cost_table(models)) + "</section>")
    return "".join(parts)


def models_lines(models: Mapping[str, Any] | None) -> list[str]:
    """The side-by-side tables as terminal lines ([] for a run of one model)."""
    if not models:
        return []
    reference = str(models.get("reference"))
    lines: list[str] = []
    tables: Sequence[Mapping[str, Any]] = [
        *(experiment_table(e, s, reference) for e, s in (models.get("experiments") or {}).items()),
        cost_table(models)]
    for table in tables:
        lines += table_lines(table)
    return lines
