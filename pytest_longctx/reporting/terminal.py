"""The terminal summary: one row per condition cell, the gate verdict, usage, written files."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from pytest_longctx.reporting.chance import LEGEND, cell_mark, chance_lines
from pytest_longctx.results.thresholds import cell_verdict

if TYPE_CHECKING:
    from pytest_longctx.run_settings import Settings


def _params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in params.items()) or "-"


def write_summary(tr: pytest.TerminalReporter, state: Any, settings: Settings) -> None:
    """The run's summary: the plan (a dry run), the header, the decision, the cell table, the experiments' tables,
    usage, the gate's lines and the footer."""
    record = state.record
    if record is None:
        _footer(tr, state)
        return
    if record.get("plan") is not None:
        _write_plan(tr, record["plan"])
    cells = record["cells"]
    if not cells:
        for line in state.summary_lines if record.get("plan") is not None else ():  # e.g. what a folder detects
            tr.write_line(f"longctx {line}")
        _footer(tr, state)
        return
    from pytest_longctx.reporting.samples import samples_per_cell

    every = " (all items)" if settings.samples_all else ""
    tr.write_sep("=", f"longctx: {settings.model.spec}  protocol={settings.protocol}  seed={settings.seed}  "
                      f"samples per cell: {samples_per_cell(cells)}{every}")
    from pytest_longctx.reporting.decision import gate_lines, terminal_lines

    for style, line in terminal_lines(record):
        tr.write_line(line, **({style: True} if style else {}))
    chance = record.get("chance") or {}
    _write_cells(tr, cells, chance)
    from pytest_longctx.reporting.tables import table_lines

    for table in record.get("tables") or []:
        for j, line in enumerate(table_lines(table)):
            tr.write_line(line, bold=j == 0)
    _write_usage(tr, record["usage"], settings)
    for style, line in gate_lines(record):  # the same lines longctx-gate prints
        tr.write_line(line, **({style: True} if style else {}))
    if record.get("comparison"):
        c = record["comparison"]
        tr.write_line(f"cells vs the compared run: {c['cells_compared']} compared, {c['significant_drops']} with a "
                      f"significant drop (* : one-sided exact McNemar, Holm across each experiment's cells, "
                      f"alpha {c['alpha']})")
    for line in state.summary_lines:  # the experiments' pytest_longctx_summary_lines, gathered at the finish
        tr.write_line(f"longctx {line}")
    for line in chance_lines(chance):
        tr.write_line(f"longctx: {line}", yellow=True)
    _footer(tr, state)


def _write_plan(tr: pytest.TerminalReporter, plan: dict[str, Any]) -> None:
    """A dry run's plan: requests, tokens and cost, then what it can detect and the sequential gate's plan."""
    from pytest_longctx.dispatch.plan import format_plan

    tr.write_sep("=", "longctx plan (dry run: nothing was sent)")
    for line in format_plan(plan):
        tr.write_line(line)
    if plan.get("power"):
        from pytest_longctx.reporting.decision import power_lines

        for line in power_lines(plan["power"]):
            tr.write_line(line)
    if (plan.get("sequential") or {}).get("alarms"):
        from pytest_longctx.results.sequential_plan import plan_lines

        for line in plan_lines(plan["sequential"]):
            tr.write_line(line)


def _write_cells(tr: pytest.TerminalReporter, cells: list[dict[str, Any]], chance: dict[str, Any]) -> None:
    """One row per condition cell: accuracy, interval, the chance mark, errors and its checks (legend if marked)."""
    rows = [("experiment", "params", "n", "acc", "95% CI", "", "err", "cell checks / vs compared run")]
    for cell in cells:
        cmp = cell.get("compare")
        verdict = cell_verdict(cell)
        if cmp is not None:
            star = "*" if cmp["significant_drop"] else ""
            holm = f", Holm p={cmp['p_holm']:.2g}" if cmp.get("p_holm") is not None else ""
            verdict = (verdict + " " if verdict else "") + f"({cmp['diff']:+.2f}{star}{holm})"
        rows.append((cell["experiment"], _params(cell["params"]), str(cell["n"]), f"{cell['accuracy']:.3f}",
                     f"[{cell['ci_low']:.2f}, {cell['ci_high']:.2f}]", cell_mark(cell, chance),
                     str(cell["errors"]), verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        tr.write_line("  ".join(col.ljust(w) if j < 2 or j == 5 else col.rjust(w) if j < 7 else col
                                for j, (col, w) in enumerate(zip(row, widths, strict=True))).rstrip(), bold=i == 0)
    if any(row[5] for row in rows[1:]):
        tr.write_line(LEGEND)


def _write_usage(tr: pytest.TerminalReporter, usage: dict[str, Any], settings: Settings) -> None:
    """Trials, requests, cache hits, tokens and the estimated spend; then the prompt cache's reads and writes."""
    from pytest_longctx.reporting.progress import estimated_spend, prompt_cache_text
    from pytest_longctx.util.words import plural

    spend = estimated_spend(usage, settings)
    sent = f"{usage['calls']} request{'' if usage['calls'] == 1 else 's'} sent"
    trials = f"{usage['trials']} {plural('trial', usage['trials'])}"
    tr.write_line(f"usage: {trials}, {sent}, {usage['cache_hits']} answered from cache, "
                  f"{usage['input_tokens']:,} input / {usage['output_tokens']:,} output tokens"
                  + (f", ~${spend:,.2f} at list prices" if spend else ""))
    cached = prompt_cache_text(usage)
    if cached:
        tr.write_line(f"usage: {cached}")


def _footer(tr: pytest.TerminalReporter, state: Any) -> None:
    """Experiments not run for want of data, notes, why the run stopped, and where its reports went (also when
    there is no table to show)."""
    for entry in state.missing_data:
        tr.write_line(f"longctx: {entry['line']}", yellow=True)
    for note in state.notes:
        tr.write_line(f"longctx: {note}")
    if state.stop_reason:
        tr.write_line(f"longctx: run stopped: {state.stop_reason}", red=True)
    for path in state.written:
        tr.write_line(f"longctx report: {path}")
