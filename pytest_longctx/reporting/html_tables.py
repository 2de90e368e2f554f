"""HTML tables of the report: condition cells, the comparison with a baseline, and the drill-down
of misses and errors. Every value from the record is escaped."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_longctx.reporting.chance import mark
from pytest_longctx.reporting.charts import esc, p_number
from pytest_longctx.results.thresholds import cell_verdict
from pytest_longctx.util.words import plural

#: Misses and errors listed per experiment; the rest stay in the embedded record / longctx.json.
DRILL_CAP = 200
#: Characters of raw model output shown per miss (the record keeps up to 4000).
RAW_SHOWN = 1500
#: Detail keys that say where the relevant material sat, shown first and in this order.
WHERE_KEYS = ("position", "depth", "needle_token_offset", "context_tokens", "lines", "miss_line", "miss_distance")
HIDDEN_DETAIL = ("tokenizer", "fixtures")


def value_text(value: Any, limit: int = 200) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def num(value: Any, spec: str = ".3f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def pnum(value: Any) -> str:
    """A p-value in a table (see :func:`p_number`); '–' when there is none."""
    return p_number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def param_keys(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    keys: list[str] = []
    for cell in cells:
        keys.extend(k for k in cell.get("params", {}) if k not in keys)
    return keys


def _td(text: str, sort: Any = None, cls: str = "") -> str:
    attrs = (f' data-v="{esc(sort)}"' if sort is not None else "") + (f' class="{cls}"' if cls else "")
    return f"<td{attrs}>{text}</td>"


def _check_badge(check: Mapping[str, Any]) -> str:
    return (f'<span class="badge {esc(check.get("verdict"))}" title="{esc(check.get("threshold"))}: '
            f'{esc(check.get("detail"))}">{esc(check.get("verdict"))}</span>')


def checks_html(checks: Sequence[Mapping[str, Any]]) -> str:
    """Every non-passing check in full (verdict + threshold); passing ones folded into one badge."""
    if not checks:
        return '<span class="muted">–</span>'
    shown = [f'{_check_badge(c)}<code class="thr">{esc(c.get("threshold"))}</code>'
             for c in checks if c.get("verdict") != "pass"]
    passed = [c for c in checks if c.get("verdict") == "pass"]
    if passed:
        tip = "; ".join(f'{c.get("threshold")}: {c.get("detail")}' for c in passed)
        label = "pass" if len(passed) == 1 and not shown else f"{len(passed)} pass"
        code = f'<code class="thr">{esc(passed[0].get("threshold"))}</code>' if len(passed) == 1 and not shown else ""
        shown.append(f'<span class="badge pass" title="{esc(tip)}">{label}</span>{code}')
    return " ".join(shown)


def params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={value_text(v, 80)}" for k, v in params.items()) or "(no params)"


def pairs_text(cmp: Mapping[str, Any]) -> str:
    """Discordant pairs: right→wrong ↓ and wrong→right ↑ out of the paired trials."""
    return f"{esc(cmp.get('regressed'))}↓ {esc(cmp.get('improved'))}↑ of {esc(cmp.get('paired'))}"


def accuracy_html(acc: float) -> str:
    width = max(0.0, min(acc, 1.0)) * 100
    return (f'<span class="acc">{acc:.3f}<span class="accbar" aria-hidden="true"><span style="width:{width:.0f}%">'
            "</span></span></span>")


def _compare_tds(cmp: Mapping[str, Any] | None, n: Any) -> list[str]:
    if not cmp:
        return [_td('<span class="muted">not in baseline</span>'), _td(""), _td(""), _td("")]
    diff = cmp.get("diff") or 0.0
    sig = bool(cmp.get("significant_drop"))
    base_n = "" if cmp.get("baseline_n") == n else f" <span class=muted>(n={esc(cmp.get('baseline_n'))})</span>"
    return [_td(f"{num(cmp.get('baseline_accuracy'))}{base_n}", cmp.get("baseline_accuracy"), "num"),
            _td(num(cmp.get("diff"), "+.3f"), diff, "num " + ("neg" if diff < 0 else "pos" if diff > 0 else "")),
            _td(f'{pnum(cmp.get("p_value"))} <span class="muted">(Holm {pnum(cmp.get("p_holm"))}; '
                f'{pairs_text(cmp)})</span>', cmp.get("p_value"), "num"),
            _td('<span class="badge fail">drop</span>' if sig else '<span class="muted">no</span>', int(sig))]


def cell_table(experiment: str, cells: Sequence[Mapping[str, Any]], chance: float | None = None) -> str:
    """One row per condition cell: params, n, accuracy, interval (marked when it holds ``chance`` or 0), errors,
    verdicts, comparison."""
    keys = param_keys(cells)
    compared = any("compare" in c for c in cells)
    marks = [mark(c, chance) for c in cells]
    head = [*keys, "n", "correct", "accuracy", "95% CI", *(["vs chance"] if any(marks) else []), "errors",
            "thresholds"]
    if compared:
        head += ["baseline", "diff", "p of a drop (Holm)", "sig. drop"]
    rows = []
    for cell, shown in zip(cells, marks, strict=True):
        params = cell.get("params", {})
        acc = float(cell.get("accuracy", 0.0))
        verdict = cell_verdict(cell)
        tds = [_td(esc(value_text(params.get(k))), params.get(k) if isinstance(params.get(k), (int, float)) else None)
               for k in keys]
        interval = f"[{num(cell.get('ci_low'), '.2f')},&nbsp;{num(cell.get('ci_high'), '.2f')}]"
        errors = cell.get("errors", 0)
        tds += [_td(esc(cell.get("n", 0)), cell.get("n", 0), "num"),
                _td(esc(cell.get("correct", 0)), cell.get("correct", 0), "num opt"),
                _td(accuracy_html(acc), f"{acc:.6f}", "num"),
                _td(interval, cell.get("ci_low"), "num"),
                *([_td(esc(shown), shown, "warn" if shown else "")] if any(marks) else []),
                _td(esc(errors), errors, "num warn" if errors else "num"),
                _td(checks_html(cell.get("checks", [])), verdict)]
        cmp = cell.get("compare")
        if compared:
            tds += _compare_tds(cmp, cell.get("n"))
        row_cls = "fail" if verdict == "fail" or (cmp or {}).get("significant_drop") else ""
        rows.append(f'<tr class="{row_cls}">{"".join(tds)}</tr>')
    numeric = {"n", "correct", "accuracy", "95% CI", "errors", "baseline", "diff",
               "p of a drop (Holm)"}
    header = "".join(f'<th class="{"num" if h in numeric else ""}{" opt" if h == "correct" else ""}">'
                     f'{esc(h).replace("_", "_<wbr>")}</th>' for h in head)
    return (f'<div class="tablebar"><input class="filter" type="search" placeholder="filter rows…" '
            f'aria-label="filter {esc(experiment)} cells"><span class="muted">{len(cells)} '
            f'{plural("cell", len(cells))} · click a header to sort</span></div>'
            f'<div class="scroll tall"><table class="cells sortable"><thead><tr>{header}</tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table></div>')


def _fell_table(cells: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for cell in cells:
        cmp = cell["compare"]
        sig = bool(cmp.get("significant_drop"))
        flag = '<span class="badge fail">significant drop</span>' if sig else '<span class="muted">no</span>'
        rows.append(f'<tr class="{"fail" if sig else ""}"><td>{esc(cell.get("experiment"))}</td>'
                    f'<td>{esc(params_text(cell.get("params", {})))}</td>'
                    f'<td class="num">{num(cmp.get("baseline_accuracy"))}</td>'
                    f'<td class="num">{num(cell.get("accuracy"))}</td>'
                    f'<td class="num neg">{num(cmp.get("diff"), "+.3f")}</td><td class="num">{pairs_text(cmp)}</td>'
                    f'<td class="num" data-v="{esc(cmp.get("p_value"))}">{pnum(cmp.get("p_value"))}</td>'
                    f'<td class="num">{pnum(cmp.get("p_holm"))}</td>'
                    f"<td>{flag}</td></tr>")
    return ('<div class="scroll"><table class="sortable"><thead><tr><th>experiment</th><th>condition</th>'
            '<th class="num">baseline</th><th class="num">now</th><th class="num">diff</th>'
            '<th class="num">paired trials (right→wrong / wrong→right)</th>'
            '<th class="num">p of a drop (one-sided McNemar)</th>'
            '<th class="num">Holm</th><th>flag</th></tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table></div>')


def comparison_section(record: Mapping[str, Any]) -> str:
    """Baseline summary, the significantly regressed cells, and (folded) the other cells that fell."""
    comparison = record.get("comparison") or {}
    cells = [c for c in record.get("cells", []) if c.get("compare")]
    fell = sorted((c for c in cells if (c["compare"].get("diff") or 0) < 0),
                  key=lambda c: (c["compare"].get("p_value") if c["compare"].get("p_value") is not None else 1.0,
                                 c["compare"].get("diff") or 0))
    significant = [c for c in fell if c["compare"].get("significant_drop")]
    others = [c for c in fell if not c["compare"].get("significant_drop")]
    improved = sum(1 for c in cells if (c["compare"].get("diff") or 0) > 0)
    drops = int(comparison.get("significant_drops", len(significant)))
    facts = [("baseline model", comparison.get("baseline_model")), ("baseline seed", comparison.get("baseline_seed")),
             ("baseline run (UTC)", str(comparison.get("baseline_started") or "–").replace("T", " ")
              .removesuffix("+00:00")),
             ("same seed", "yes" if comparison.get("same_seed") else "no"),
             ("trials paired", (comparison.get("pairing") or {}).get("paired", "–")),
             ("cells compared", comparison.get("cells_compared")),
             ("alpha (per cell: one-sided exact McNemar, Holm per experiment)", comparison.get("alpha"))]
    dl = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in facts)
    rows = "".join(
        f"<tr><td>{esc(name)}</td><td class=num>{num(e.get('diff'), '+.3f')}</td><td class=num>"
        f"[{num(e.get('low'), '+.3f')}, {num(e.get('high'), '+.3f')}]</td><td class=num>{esc(e.get('pairs'))}</td>"
        f"<td class=num>{esc(e.get('clusters'))}</td><td class=num>{pnum(e.get('p_value'))}</td></tr>"
        for name, e in (comparison.get("experiments") or {}).items())
    pooled = ('<h3>Pooled paired differences (this run minus the compared one)</h3><div class="scroll"><table>'
              '<thead><tr><th>experiment</th><th class=num>difference</th><th class=num>95% CI</th>'
              '<th class=num>pairs</th><th class=num>independent items</th><th class=num>p</th></tr></thead>'
              f"<tbody>{rows}</tbody></table></div>") if rows else ""
    out = [f'<dl class="facts">{dl}</dl>', pooled,
           f'<p class="{"said fail" if drops else "said"}">{drops} cell{"" if drops == 1 else "s"} with a significant '
           f"drop (exact McNemar per cell, Holm per experiment); {len(fell)} of {len(cells)} compared cells are below "
           f"the baseline, {improved} above. The verdicts are in the table at the top.</p>"]
    if significant:
        out.append("<h3>Regressed cells (significant drop)</h3>" + _fell_table(significant[:100]))
    if others:
        out.append(f'<details class="drill"><summary>{len(others)} other cells fell, not significantly</summary>'
                   + _fell_table(others[:200]) + "</details>")
    return "".join(out)


def where_html(detail: Mapping[str, Any]) -> str:
    """Where the relevant material sat (position, depth, offsets, miss line) plus other short details."""
    keys = [k for k in WHERE_KEYS if k in detail]
    keys += [k for k in detail if k not in keys and k not in HIDDEN_DETAIL and not isinstance(detail[k], (dict, list))]
    items = []
    for k in keys:
        value = detail[k]
        if value is None:
            text = "not in file" if k in ("miss_distance", "miss_line") else "–"
        else:
            text = value_text(value, 120)
        items.append(f"<li><b>{esc(k)}</b> {esc(text)}</li>")
    return f'<ul class="where">{"".join(items)}</ul>' if items else ""


def pick_misses(trials: Sequence[Mapping[str, Any]], cap: int = DRILL_CAP) -> list[Mapping[str, Any]]:
    """Up to ``cap`` misses/errors, taken round-robin over cells so every cell is represented."""
    by_cell: dict[str, list[Mapping[str, Any]]] = {}
    for t in trials:
        if t.get("outcome") in ("incorrect", "error"):
            by_cell.setdefault(json.dumps(t.get("params", {}), sort_keys=True), []).append(t)
    picked: list[Mapping[str, Any]] = []
    queues = list(by_cell.values())
    depth = 0
    while len(picked) < cap and any(depth < len(q) for q in queues):
        picked.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    keep = {id(t) for t in picked[:cap]}
    return [t for t in trials if id(t) in keep]


def drilldown(experiment: str, trials: Sequence[Mapping[str, Any]]) -> str:
    """A collapsible list of wrong answers and errors: what was asked, expected, answered, and where."""
    misses = [t for t in trials if t.get("outcome") in ("incorrect", "error")]
    if not misses:
        return f'<p class="muted">No misses or errors in {esc(experiment)}.</p>'
    shown = pick_misses(trials)
    wrong = sum(1 for t in misses if t.get("outcome") == "incorrect")
    rows = []
    for t in shown:
        raw = str(t.get("raw") or "")
        cut = f"\n… ({len(raw) - RAW_SHOWN} more characters in the record)" if len(raw) > RAW_SHOWN else ""
        outcome = str(t.get("outcome"))
        message = t.get("error") if outcome == "error" else t.get("reason")
        rows.append(
            f'<tr class="{esc(outcome)}"><td><span class="badge {esc(outcome)}">{esc(outcome)}</span></td>'
            f'<td class="mono small">{esc(t.get("nodeid"))}<br><span class="muted">sample {esc(t.get("sample"))}'
            f'</span></td><td class="small">{esc(params_text(t.get("params", {})))}</td>'
            f'<td class="small">{esc(value_text(t.get("item"), 200))}</td>'
            f'<td class="mono">{esc(value_text(t.get("expected"), 300))}</td>'
            f'<td class="mono">{esc(value_text(t.get("answer"), 300))}</td>'
            f'<td class="small">{where_html(t.get("detail") or {})}</td>'
            f'<td><pre class="raw">{esc(raw[:RAW_SHOWN])}{esc(cut)}</pre>'
            + (f'<div class="msg {esc(outcome)}">{esc(value_text(message, 1000))}</div>' if message else "")
            + "</td></tr>")
    note = (f" — showing {len(shown)} of {len(misses)} (spread over all cells); the rest are in the embedded "
            "record and longctx.json") if len(shown) < len(misses) else ""
    return (f'<details class="drill"><summary>Misses and errors in {esc(experiment)}: {wrong} incorrect, '
            f'{len(misses) - wrong} errors{esc(note)}</summary><div class="tablebar"><input class="filter" '
            f'type="search" placeholder="filter misses…" aria-label="filter {esc(experiment)} misses"></div>'
            '<div class="scroll"><table class="misses"><thead><tr><th>outcome</th><th>test</th><th>params</th>'
            '<th>item</th><th>expected</th><th>answer</th><th>where</th><th>raw output / message</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div></details>')
