"""The HTML report: one self-contained file (inline CSS, inline SVG charts, a little optional JS).

Layout: header (model, seed, date, gate verdict, usage), comparison with the baseline, then one
section per experiment (charts first, then the cell table and a drill-down of misses), and the
run record embedded as JSON for machines. Every string from corpora or models is escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from pytest_longctx.reporting.chance import chance_lines
from pytest_longctx.reporting.charts import esc, render_figure
from pytest_longctx.reporting.decision import run_status
from pytest_longctx.reporting.decision_table import decision_html, verdict_box
from pytest_longctx.reporting.html_tables import cell_table, comparison_section, drilldown
from pytest_longctx.reporting.samples import samples_per_cell
from pytest_longctx.reporting.sections import Section, arrange
from pytest_longctx.reporting.side_by_side import models_html
from pytest_longctx.reporting.tables import table_html
from pytest_longctx.util.words import plural


def embed_json(record: Mapping[str, Any]) -> str:
    """The record as JSON that cannot end its ``<script>`` element or open a comment."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _asset(name: str) -> str:
    return resources.files("pytest_longctx.reporting").joinpath(name).read_text(encoding="utf-8")


def anchor(name: str) -> str:
    return "exp-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def utc_text(stamp: Any) -> str:
    """``2025-10-09T08:53:20+00:00`` -> ``2025-10-09 08:53:20`` (the label says UTC)."""
    return str(stamp or "–").replace("T", " ").removesuffix("+00:00")


def _fact(label: str, value: Any, cls: str = "") -> str:
    return f'<div class="{cls}"><dt>{esc(label)}</dt><dd>{value}</dd></div>'


def _billed(usage: Mapping[str, Any]) -> str:
    """Input of the requests sent, as billed (prompt-cache writes 1.25x, reads 0.1x) vs uncached."""
    uncached = int(usage.get("paid_input_tokens", 0))
    billed = int(usage.get("billed_input_tokens", uncached))
    written, read = int(usage.get("cache_creation_input_tokens", 0)), int(usage.get("cache_read_input_tokens", 0))
    if not written and not read:
        return f"{billed:,} <span class=muted>(no prompt caching)</span>"
    return (f"{billed:,} of {uncached:,} uncached ({billed / max(1, uncached):.3f}) <span class=muted>(prompt cache: "
            f"{written:,} written, {read:,} read)</span>")


def money_facts(usage: Mapping[str, Any]) -> list[str]:
    """What the run's requests cost (the ledger's count: each at the price of the model called), per model when
    several, what a budget bought and what a sequential stop saved."""
    if not usage.get("ledger"):
        return []
    spent = float(usage.get("usd", 0.0)) + float(usage.get("abandoned_usd", 0.0))
    abandoned = (f"; {int(usage['abandoned']):,} abandoned in flight at a stop, up to "
                 f"${float(usage['abandoned_usd']):,.2f}" if usage.get("abandoned") else "")
    out = [_fact("spent", f"${spent:,.2f} <span class=muted>({int(usage.get('calls', 0)):,} requests sent, "
                 f"{int(usage.get('failed', 0)):,} failed{esc(abandoned)}; response-cache hits free)</span>")]
    per_model = usage.get("models") or {}
    if len(per_model) > 1:
        out.append(_fact("per model", "; ".join(f"<code>{esc(m)}</code> {int(u.get('calls', 0)):,} requests "
                                                 f"${float(u.get('usd', 0.0)):,.2f}" for m, u in per_model.items()),
                         "wide"))
    prices = {m: w for m, w in (usage.get("prices") or {}).items() if w != "free"}
    if prices:
        out.append(_fact("prices", "; ".join(f"<code>{esc(m)}</code> {esc(w)}" for m, w in prices.items()), "wide"))
    budget = usage.get("budget")
    if budget:
        bought = (f"${float(budget['usd']):,.2f}: bought {int(budget['answered']):,} answers "
                  f"(${float(budget['spent_usd']):,.2f})")
        if budget.get("stopped"):
            bought += f"; {int(budget['refused']):,} requests refused, the run stopped: {budget['stopped']}"
        out.append(_fact("budget", esc(bought), "wide"))
    seq = usage.get("sequential")
    if seq:
        settled = "; ".join(f"{a['threshold']}: {a['settled'] or 'not settled'}"
                            + (f" at group {a['settled_at_group']}" if a.get("settled_at_group") is not None else "")
                            for a in seq.get("settled") or [])
        out.append(_fact("sequential stop", esc(
            f"{seq['groups_completed']} of {seq['groups_planned']} sample groups ({settled}); "
            f"{seq['skipped_trials']:,} of {seq['planned_trials']:,} trials skipped, about ${seq['saved_usd']:,.2f} "
            f"saved"), "wide"))
    return out


def _title(record: Mapping[str, Any]) -> str:
    """The model; several models: each of them, the reference first and named so."""
    models = record.get("models") or {}
    order = [str(m) for m in models.get("order") or []]
    if len(order) > 1:
        reference = str(models.get("reference"))
        rest = [m for m in order if m != reference]
        return (f'{len(order)} models: {esc(reference)} <span class="muted">(reference)</span>, '
                + ", ".join(esc(m) for m in rest))
    return esc(record.get("settings", {}).get("model", "unknown model"))


def header(record: Mapping[str, Any], sections: Sequence[Section] = ()) -> str:
    """Title and the verdict (errors, a stop, the gate, the exit code, with counts), then what went wrong."""
    s = record.get("settings", {})
    gate = record.get("gate") or {"status": "none"}
    cells = record.get("cells", [])
    experiments = {str(c.get("experiment")) for c in cells}
    banners = "".join(f'<div class="banner fail">gate error: {esc(why)}</div>' for why in gate.get("errors") or [])
    if record.get("report_fallback"):
        fb = record["report_fallback"]
        banners += (f'<div class="banner fail">written to a fallback folder: {esc(fb.get("report_dir"))} '
                    f'could not take it ({esc(fb.get("reason"))})</div>')
    if record.get("plan") is not None:
        banners += '<div class="banner">plan mode (dry run): nothing was sent to the model</div>'
    return (f'<header class="top"><div class="headline"><p class="kicker">pytest-longctx report</p>'
            f'<h1>{_title(record)}</h1>'
            + (f'<p class="model-note">{esc(s["model_note"])}</p>' if s.get("model_note") else "") +
            f'<p class="muted">{len(cells):,} condition {plural("cell", len(cells))} · {len(experiments)} '
            f'{plural("experiment", len(experiments))} · {len(sections)} report {plural("section", len(sections))}'
            f"</p></div>{verdict_box(run_status(record), record.get('trials') or [])}</header>{banners}")


def run_facts(record: Mapping[str, Any]) -> str:
    """Notes (data not found, chance) and the facts needed to reproduce or judge the run."""
    s = record.get("settings", {})
    usage = record.get("usage", {})
    gate = record.get("gate") or {"status": "none"}
    cells = record.get("cells", [])
    ns = [int(c.get("n", 0)) for c in cells]
    commit = str(s.get("git_commit") or "–")
    facts = [
        _fact("protocol", esc(s.get("protocol", "longctx"))),
        _fact("seed", esc(s.get("seed"))),
        _fact("date (UTC)", f'{esc(utc_text(s.get("started")))} <span class="muted">({esc(s.get("duration_s"))} s)'
              "</span>"),
        _fact("samples per cell", esc(samples_per_cell(cells) if cells else s.get("samples"))
              + (f' <span class="muted">(scored n {min(ns)}–{max(ns)})</span>' if ns else "")),
        _fact("trials / cells", f"{esc(usage.get('trials', len(record.get('trials', []))))} / {len(cells)}"),
        _fact("tokenizer", esc(", ".join(s.get("tokenizers") or []) or "–")),
        _fact("model calls", f"{esc(usage.get('calls', 0))} <span class=muted>({esc(usage.get('cache_hits', 0))} "
              "cache hits)</span>"),
        _fact("tokens sent in / out", f"{int(usage.get('paid_input_tokens', 0)):,} / "
              f"{int(usage.get('paid_output_tokens', 0)):,}") if usage.get("ledger") else
        _fact("tokens in / out", f"{int(usage.get('input_tokens', 0)):,} / {int(usage.get('output_tokens', 0)):,}"),
        _fact("billed input", _billed(usage)),
        _fact("judge", esc(s.get("judge") or "–")),
        _fact("pytest-longctx / pytest / python",
              f"{esc(s.get('plugin_version'))} / {esc(s.get('pytest_version'))} / {esc(s.get('python'))}"),
        _fact("git commit", f'<code title="{esc(commit)}">{esc(commit[:12])}</code>'),
        _fact("context window", f"{s.get('context_window'):,} tokens" if isinstance(s.get("context_window"), int)
              else "–"),
        _fact("workers / cache", f"{esc(s.get('workers'))} / {esc(s.get('cache'))}"),
        _fact("thresholds", " ".join(f"<code>{esc(t)}</code>" for t in gate.get("thresholds") or []) or "–", "wide"),
    ]
    facts += money_facts(usage)
    if s.get("compare"):
        facts.append(_fact("compared with", f"<code>{esc(s.get('compare'))}</code>", "wide"))
    banners = "".join(f'<div class="banner">{esc(entry.get("line"))}</div>' for entry in record.get("missing_data")
                      or [])
    banners += "".join(f'<div class="banner warn">{esc(line)}</div>' for line in chance_lines(record.get("chance")
                                                                                             or {}))
    return f'{banners}<dl class="facts">{"".join(facts)}</dl>'


def group_section(record: Mapping[str, Any], section: Section) -> str:
    group, experiments = section.name, section.experiments
    cells = [c for c in record.get("cells", []) if c.get("experiment") in experiments]
    trials = [t for t in record.get("trials", []) if t.get("experiment") in experiments]
    figures = "".join(render_figure(f) for f in section.figures if f is not None)
    tables = "".join(table_html(t) for t in record.get("tables") or [] if t.get("experiment") in experiments)
    parts = [f'<section id="{anchor(group)}"><h2>{esc(section.title)}</h2>'
             f'<div class="figures">{figures}</div>' + (f'<div class="source-tables">{tables}</div>' if tables else "")]
    for exp in experiments:
        exp_cells = [c for c in cells if c.get("experiment") == exp]
        exp_trials = [t for t in trials if t.get("experiment") == exp]
        title = f"<h3>{esc(exp)}: condition cells</h3>" if group != exp else "<h3>Condition cells</h3>"
        report = record.get("chance") or {}
        chance = None if report.get("double") else (report.get("levels") or {}).get(exp)  # no marks on test doubles
        parts.append(title + cell_table(exp, exp_cells, chance) + drilldown(exp, exp_trials))
    return "".join(parts) + "</section>"


def run_details(record: Mapping[str, Any]) -> str:
    settings = record.get("settings", {})
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v if isinstance(v, str) else json.dumps(v))}</td></tr>"
                   for k, v in settings.items())
    fixtures = "".join(f"<tr><th>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>"
                       for k, v in (record.get("fixtures") or {}).items())
    return ('<section id="run"><details><summary>Run settings and fixture hashes</summary><div class="scroll">'
            f'<table class="kv">{rows}{fixtures}</table></div><p class="note">The full run record is embedded in '
            'this file as JSON (<code>script#longctx-record</code>).</p></details></section>')


def render_html(record: dict[str, Any], sections: Sequence[Section] | None = None) -> str:
    """Render a run record (schema 1 or 2) as one self-contained HTML page.

    ``sections`` come from the ``pytest_longctx_report_sections`` hook (see :func:`.sections.arrange`);
    without them every experiment gets a plain section of its own.
    """
    settings = record.get("settings", {})
    gate = (record.get("gate") or {}).get("status", "none")
    group_list = list(sections) if sections is not None else arrange([], record.get("cells", []))
    body = [header(record, group_list), decision_html(record), models_html(record), run_facts(record)]
    if record.get("comparison"):
        body.append(f'<section id="comparison"><h2>Comparison with the baseline</h2>{comparison_section(record)}'
                    "</section>")
    body.extend(group_section(record, section) for section in group_list)
    if not group_list:
        body.append('<p class="muted">No trials were recorded in this run.</p>')
    body.append(run_details(record))
    title = f"longctx · {settings.get('model', '')} · gate {gate}"
    return ("<!doctype html>\n"
            f'<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, '
            f'initial-scale=1"><title>{esc(title)}</title><style>{_asset("report.css")}</style></head>'
            f'<body><main>{"".join(body)}</main>'
            f'<script type="application/json" id="longctx-record">{embed_json(record)}</script>'
            f"<script>{_asset('report.js')}</script></body></html>\n")
