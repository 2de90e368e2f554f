"""The HTML report, rendered from schema-faithful records and parsed with the standard library.

Records come from ``report_data`` (the plugin's own aggregator, run builder, compare and gating),
so the report is checked on exactly what a run writes. No browser here: see test_report_browser.py.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.reporting.charts import XScale, fmt_value, heat_color
from pytest_longctx.reporting.html import embed_json, render_html
from pytest_longctx.reporting.html_tables import DRILL_CAP
from pytest_longctx.results.aggregate import Aggregator
from tests import report_data as data


def _html(record: dict) -> str:
    return render_html(record, data.builtin_sections(record))


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Page(HTMLParser):
    """The parts of a report the tests look at: elements with attributes, text, sections, the record."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.section: str | None = None
        self.svgs: dict[str | None, int] = {}
        self.rows: dict[str | None, list[list[str]]] = {}
        self.texts: list[str] = []
        self.scripts: list[tuple[dict[str, str], str]] = []
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._script: tuple[dict[str, str], list[str]] | None = None
        self.title = ""
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.elements.append((tag, a))
        if tag not in VOID:
            self.stack.append((tag, a))
        if tag == "section":
            self.section = a.get("id")
        elif tag == "svg":
            self.svgs[self.section] = self.svgs.get(self.section, 0) + 1
        elif tag == "tr" and self._table_class() == "cells":
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = []
        elif tag == "script":
            self._script = (a, [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None
        elif tag == "td" and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).replace("\xa0", " ").strip())  # a no-break space reads as one
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.rows.setdefault(self.section, []).append(self._row)
            self._row = None
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, text: str) -> None:
        if self._script is not None:
            self._script[1].append(text)
            return
        if [tag for tag, _ in self.stack[-2:]] == ["head", "title"]:
            self.title += text
        self.texts.append(text)
        if self._cell is not None:
            self._cell.append(text)

    def _table_class(self) -> str:
        for tag, attrs in reversed(self.stack):
            if tag == "table":
                return attrs.get("class", "").split()[0] if attrs.get("class") else ""
        return ""

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.texts).split())

    def by_class(self, cls: str) -> list[dict[str, str]]:
        return [a for _, a in self.elements if cls in a.get("class", "").split()]

    def record(self) -> Any:
        found = [text for attrs, text in self.scripts if attrs.get("id") == "longctx-record"]
        assert len(found) == 1
        return json.loads(found[0])


@pytest.fixture(scope="module")
def showcase(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    record: dict[str, Any] = data.showcase_record(tmp_path_factory.mktemp("showcase"))
    return record


@pytest.fixture(scope="module")
def page(showcase: dict[str, Any]) -> Page:
    return Page(render_html(showcase, data.builtin_sections(showcase)))


def test_header_shows_the_run_facts(showcase: dict[str, Any], page: Page) -> None:
    s = showcase["settings"]
    text = page.text
    assert page.title == f"longctx · {s['model']} · gate fail"
    assert [e for e in page.elements if e[0] == "h1"]
    for fact in (s["model"], "seed", "date (UTC)", s["started"].replace("T", " ").removesuffix("+00:00"),
                 f"({s['duration_s']} s)", "samples per cell", f"{s['samples']} (scored n", data.TOKENIZER,
                 f"{s['plugin_version']} / {s['pytest_version']} / {s['python']}", "model calls", "cache hits",
                 "200,000 tokens"):
        assert fact in text, fact
    usage = showcase["usage"]
    assert f"{usage['calls']} ({usage['cache_hits']} cache hits)" in text
    assert f"{usage['input_tokens']:,} / {usage['output_tokens']:,}" in text
    if s["git_commit"]:
        assert s["git_commit"][:12] in text
    gate = page.by_class("gate")
    assert len(gate) == 1 and "fail" in gate[0]["class"].split()
    # the showcase has errored trials: pytest exits 1, and the report says the gate alone would give 10
    assert "FAIL" in text and "exit code 1 (errors; the gate alone: exit code 10)" in text
    for threshold in s["thresholds"]:
        assert threshold in text


def test_gate_pass_and_none_and_stopped(tmp_path: Path) -> None:
    passing = Page(_html(data.make_record(tmp_path, samples=3, thresholds=("*:0.0",))))
    assert "pass" in passing.by_class("gate")[0]["class"].split() and "1 pass of 1 threshold check" in passing.text
    assert "1 ERROR" in passing.text and "exit code 1 (errors)" in passing.text  # a trial errored: the run exits 1
    none = Page(_html(data.make_record(tmp_path, samples=3, stopped="FatalBackendError: 401 invalid x-api-key")))
    assert "none" in none.by_class("gate")[0]["class"].split() and "no thresholds set" in none.text
    assert "run stopped: FatalBackendError: 401 invalid x-api-key" in none.text


def test_one_table_row_per_cell(showcase: dict[str, Any], page: Page) -> None:
    rows = [row for section_rows in page.rows.values() for row in section_rows]
    assert len(rows) == len(showcase["cells"])
    by_section = {k: len(v) for k, v in page.rows.items()}
    count = {exp: sum(1 for c in showcase["cells"] if c["experiment"] == exp) for exp in ("qa", "lrt", "docs", "demo")}
    assert by_section == {"exp-qa": count["qa"], "exp-controls": 4, "exp-lrt": count["lrt"],
                          "exp-docs": count["docs"], "exp-demo": count["demo"]}
    # Param columns, then n, correct, accuracy, interval, errors, thresholds, and the comparison columns.
    lrt = {(row[0], row[1]): row for row in page.rows["exp-lrt"]}
    cell = next(c for c in showcase["cells"] if c["params"] == {"lines": 400, "shuffle": "full"})
    row = lrt[("400", "full")]
    assert row[2:6] == [str(cell["n"]), str(cell["correct"]), f"{cell['accuracy']:.3f}",
                        f"[{cell['ci_low']:.2f}, {cell['ci_high']:.2f}]"]
    assert row[6] == str(cell["errors"])
    check = next(c for c in cell["checks"] if c["threshold"] == "experiment=lrt:max-drop=0/each")
    assert "experiment=lrt:max-drop=0/each" in row[7] or check["verdict"] == "pass"
    assert check["verdict"] in row[7]
    assert row[8].startswith(f"{cell['compare']['baseline_accuracy']:.3f}")
    assert row[9] == f"{cell['compare']['diff']:+.3f}"
    assert row[10].startswith(f"{cell['compare']['p_value']:.3g}")
    assert row[11] == ("drop" if cell["compare"]["significant_drop"] else "no")


def test_charts_per_experiment(page: Page) -> None:
    # qa's two charts hold 4 and 3 series beside the compared run's: small multiples, one panel (svg) per series
    assert page.svgs == {"exp-qa": 4 + 3, "exp-controls": 1, "exp-lrt": 2, "exp-docs": 4, "exp-demo": 1}
    assert len(page.by_class("panel")) == 7 and len(page.by_class("multiples")) == 2
    captions = page.text
    for title in ("Accuracy by depth (%), per prompt variant", "Accuracy by depth (%), per context size",
                  "Controls: with the source (baseline) vs without it (control)", "Accuracy vs number of lines",
                  "Where wrong answers point", "Accuracy by context size (% of the budget), long context vs RAG",
                  "Retrieval recall (RAG)", "Judge agreement", "Accuracy per condition"):
        assert title in captions, title
    assert "chance 0.25" in captions
    assert re.search(r"\d+ wrong answers; \d+% named a value that is not in the file", captions)


def test_position_chart_with_variants(tmp_path: Path) -> None:
    agg = Aggregator()
    for position in ("end", "beginning", "middle"):
        for prompt in ("plain", "cot"):
            for s in range(4):
                agg.add(_trial("qa", {"position": position, "prompt": prompt}, s, s % 2 == 0))
    record = _record_from(agg, tmp_path)
    rendered = render_html(record, data.builtin_sections(record))
    page = Page(rendered)
    assert page.svgs == {"exp-qa": 1}
    assert "Accuracy by position, per prompt variant" in page.text
    assert "prompt=cot" in page.text and "prompt=plain" in page.text
    svg = rendered[rendered.index("<svg"):rendered.index("</svg>")]
    assert svg.index(">beginning<") < svg.index(">middle<") < svg.index(">end<")  # reading order, not alphabetical
    # two variants share one chart: a 95% interval bar per point, set apart so they do not bury each other
    assert svg.count('class="ci"') == 6 and svg.count("<polygon") == 0


def test_unknown_experiment_and_odd_params_get_a_bar_chart(tmp_path: Path) -> None:
    agg = Aggregator()
    for s in range(3):
        agg.add(_trial("needle-v2", {"shape": [1, 2], "flag": True}, s, True))
        agg.add(_trial("needle-v2", {"shape": [3], "flag": False}, s, s == 0))
        agg.add(_trial("lrt", {"shuffle": "none"}, s, False))  # no size param: falls back to bars
    page = Page(_html(_record_from(agg, tmp_path)))
    assert page.svgs == {"exp-lrt": 1, "exp-needle-v2": 1}
    assert "Accuracy per condition" in page.text


def test_comparison_section_lists_regressions(showcase: dict[str, Any], page: Page) -> None:
    comparison = showcase["comparison"]
    assert comparison["significant_drops"] >= 1
    text = page.text
    assert "Comparison with the baseline" in text
    assert comparison["baseline_model"] in text
    drops = comparison["significant_drops"]
    assert f"{drops} cell{'' if drops == 1 else 's'} with a significant drop" in text
    assert "Regressed cells (significant drop)" in text
    regressed = [c for c in showcase["cells"] if (c.get("compare") or {}).get("significant_drop")]
    for cell in regressed:
        assert ", ".join(f"{k}={v}" for k, v in cell["params"].items()) in text
    assert text.count("significant drop") >= len(regressed)


def test_no_comparison_section_without_baseline(tmp_path: Path) -> None:
    page = Page(_html(data.make_record(tmp_path, samples=3)))
    assert "Comparison with the baseline" not in page.text
    assert "p (McNemar)" not in page.text and "sig. drop" not in page.text


def test_drilldown_shows_misses_with_where_and_raw(showcase: dict[str, Any], page: Page) -> None:
    summaries = [t for t in page.texts if t.startswith("Misses and errors in ")]
    assert len(summaries) == 6  # qa, qa-baseline, qa-control, lrt, docs, demo
    miss = next(t for t in showcase["trials"] if t["experiment"] == "lrt" and t["outcome"] == "incorrect"
                and t["detail"].get("miss_distance") is not None)
    text = page.text
    for value in (miss["nodeid"], miss["item"], miss["expected"], miss["raw"], miss["reason"]):
        assert str(value) in text
    assert f"miss_distance {miss['detail']['miss_distance']}" in text
    assert "miss_distance not in file" in text
    qa_miss = next(t for t in showcase["trials"] if t["experiment"] == "qa" and t["outcome"] == "incorrect")
    assert f"needle_token_offset {qa_miss['detail']['needle_token_offset']}" in page.text
    error = next(t for t in showcase["trials"] if t["outcome"] == "error")
    assert error["error"] in text


def test_script_injection_is_escaped_everywhere(tmp_path: Path) -> None:
    payload = data.PAYLOAD
    record = data.make_record(tmp_path, samples=4, payload=payload,
                              thresholds=(f"prompt={payload}:0.5",))
    record["stopped"] = payload
    record["trials"][0]["detail"]["position"] = payload
    for cell in record["cells"][:2]:
        cell["params"] = {**cell["params"], "note": payload}  # reaches table cells, legends and SVG <title>s
    rendered = render_html(record, data.builtin_sections(record))
    assert payload not in rendered
    assert "<!--" not in rendered and "<img" not in rendered.lower()
    page = Page(rendered)
    assert [tag for tag, _ in page.elements].count("script") == 2  # the JSON and the report's own JS
    assert not [a for _, a in page.elements if any(k.startswith("on") for k in a)]
    assert page.text.count(payload) >= 4  # the answers, the stop reason, params, the threshold: all shown as text
    assert html.escape(payload) in rendered
    assert page.record() == record


def test_embedded_record_round_trips(showcase: dict[str, Any], page: Page) -> None:
    assert page.record() == showcase
    embedded = embed_json({"answer": "</script><!-- & \u2028"})
    assert "<" not in embedded and ">" not in embedded and "&" not in embedded
    assert json.loads(embedded) == {"answer": "</script><!-- & \u2028"}


def test_large_run_stays_small(tmp_path: Path) -> None:
    agg = Aggregator()
    for lines in range(50):
        for s in range(200):  # 10,000 trials, half of them misses with a long raw answer
            trial = _trial("lrt", {"lines": 100 + lines, "shuffle": "none"}, s, s % 2 == 0)
            trial["raw"] = "x" * 4000
            agg.add(trial)
    record = _record_from(agg, tmp_path)
    rendered = render_html(record, data.builtin_sections(record))
    report_size = len(rendered) - len(embed_json(record))
    assert report_size < 1_500_000, report_size
    page = Page(rendered)
    misses = [a for tag, a in page.elements if tag == "tr" and a.get("class") == "incorrect"]
    assert len(misses) == DRILL_CAP
    assert f"showing {DRILL_CAP} of 5000" in page.text
    assert "(2500 more characters in the record)" in page.text
    assert page.record() == record


def test_plan_and_empty_records_render(tmp_path: Path) -> None:
    record = _record_from(Aggregator(), tmp_path)
    record["plan"] = {"models": {}, "trials": 0, "note": "nothing"}
    page = Page(render_html(record, data.builtin_sections(record)))
    assert "No trials were recorded in this run." in page.text
    assert "plan mode (dry run)" in page.text
    minimal = Page(render_html({"schema": "pytest-longctx/run", "version": 1, "cells": [], "trials": []}))
    assert minimal.record()["cells"] == []


def test_chart_helpers() -> None:
    assert [fmt_value(v) for v in (32000, 1500, 100, 0.25, 1.0, "beginning", "x" * 30)] == [
        "32k", "1.5k", "100", "0.25", "1", "beginning", "x" * 15 + "…"]
    log = XScale([100, 400, 1600, 6400], 0, 300)
    assert log.log and log(100) == 0 and log(6400) == 300 and abs(log(800) - 150) < 1e-9
    linear = XScale([0, 50, 100], 0, 100)
    assert not linear.log and linear(25) == 25
    words = XScale(["end", "middle", "beginning"], 0, 100)
    assert words.values == ["beginning", "middle", "end"] and words("middle") == 50
    assert heat_color(0.0) == "#d73027" and heat_color(1.0) == "#1a9850"


PYTEST_HTML_EVAL = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("lrt")
@pytest.mark.parametrize("lines", [10, 20])
async def test_line(longctx, lines):
    target = longctx.rng.randrange(lines)
    answer = await longctx.ask(Request.user(f"line {target}?", max_tokens=8, template="line@1"),
                               oracle=Oracle(f"value-{target}", (f"<b>{target + 1}</b>",)))
    longctx.record(expected=f"value-{target}", answer=answer, item=f"line {target}")
    assert answer == f"value-{target}"


def test_plain():
    assert True
'''


def test_pytest_html_columns(longctx_runner: Any) -> None:
    pytest.importorskip("pytest_html")
    longctx_runner.pytester.makepyfile(test_lines=PYTEST_HTML_EVAL)
    run = longctx_runner.run("--longctx-samples", "4", "--html=report.html", "--self-contained-html",
                             model="fake/random")
    assert run.ret == 0, run.result.stdout.str()
    report = (longctx_runner.pytester.path / "report.html").read_text(encoding="utf-8")
    head = report[report.index('id="results-table-head"'):]
    head = head[:head.index("</thead>")]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head)[2:6] == ["Condition", "Expected", "Answer", "Outcome"]
    blob = json.loads(html.unescape(re.search(r'data-jsonblob="([^"]*)"', report).group(1)))  # type: ignore[union-attr]
    rows = {test_id: entries[-1]["resultsTableRow"] for test_id, entries in blob["tests"].items()}
    trials = {t["nodeid"]: t for t in run.record["trials"]}
    assert set(trials) < set(rows) and len(trials) == 8
    outcomes = set()
    for nodeid, trial in trials.items():
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in rows[nodeid][2:6]]
        assert cells == [f"lrt: lines={trial['params']['lines']}", trial["expected"], trial["answer"], trial["outcome"]]
        assert "<b>" not in rows[nodeid][4]  # a model's markup is escaped in the pytest-html row too
        outcomes.add(trial["outcome"])
    assert outcomes == {"correct", "incorrect"}
    plain = next(v for k, v in rows.items() if k.endswith("::test_plain"))
    assert [re.sub(r"<[^>]+>", "", c) for c in plain[2:6]] == ["", "", "", ""]


def _trial(experiment: str, params: dict[str, Any], sample: int, correct: bool) -> dict[str, Any]:
    return data._trial(experiment, params, sample, correct, item=f"item-{sample}", expected="yes",
                       answer="yes" if correct else "no", raw="yes" if correct else "no",
                       detail={"context_tokens": 1000})


def _record_from(agg: Aggregator, tmp: Path) -> dict[str, Any]:
    from types import SimpleNamespace

    from pytest_longctx.session.run import build_record, decide

    settings = data.settings_for("fake/random", tmp)
    record = build_record(settings, SimpleNamespace(aggregator=agg, started=1_760_000_000.0, stop_reason=None),
                          1_760_000_010.0, 1)
    decide(record, settings.gate, {}, None, [])
    return dict(json.loads(json.dumps(record)))


def test_decision_table_opens_the_report_failing_rows_first(showcase: dict[str, Any]) -> None:
    rendered = _html(showcase)
    # the verdict and the decision table come before the run's facts, the comparison and every chart
    assert rendered.index('class="gate') < rendered.index('<table class="decision">') < rendered.index('class="facts"')
    assert rendered.index('<table class="decision">') < rendered.index("<svg")
    table = rendered[rendered.index('<table class="decision">'):rendered.index("</table>")]
    kinds = re.findall(r'<tr class="(fail|warn|ok)">', table)
    assert kinds == sorted(kinds, key=["fail", "warn", "ok"].index) and kinds[0] == "fail"
    failing = {c["experiments"][0] for c in showcase["gate"]["checks"] if c["verdict"] == "fail"}
    first = re.search(r'<tr class="fail"><th scope="row">([^<]+)</th>', table)
    assert first is not None and first.group(1) in failing
    lrt = showcase["experiments"]["lrt"]
    assert f"{lrt['pooled']['accuracy']:.3f}" in table and f"{lrt['vs']['diff']:+.3f}" in table
    assert "effective length" in table and "could detect" in table


def test_an_all_error_run_says_so_at_the_top(tmp_path: Path) -> None:
    record = data.error_record(tmp_path)
    errors = len(record["trials"])
    assert errors and all(t["outcome"] == "error" for t in record["trials"])
    page = Page(_html(record))
    gate = page.by_class("gate")
    assert len(gate) == 1 and "errors" in gate[0]["class"].split()
    text = page.text
    top = text[text.index("pytest-longctx report"):text.index("experiment accuracy")]  # the first screen
    assert f"{errors:,} ERRORS" in top and f"{errors:,} errors of {errors:,} trials (nothing scored" in top
    assert "exit code 1 (errors)" in top and f"ERROR ×{errors:,}: BackendError: fake/error" in top
    assert "NONE" not in top and "0%" not in top
    assert "nothing scored" in text[text.index("experiment accuracy"):]


def test_terminal_decision_lines_status_first_then_failing() -> None:
    from pytest_longctx.reporting.decision import terminal_lines

    record = data.showcase_record(Path("/nonexistent-not-written"))
    lines = terminal_lines(record)
    style, first = lines[0]
    assert style == "red" and first.startswith("FAIL: ")
    assert "exit code 1 (errors; the gate alone: exit code 10)" in first
    names = [text for style, text in lines[1:] if not text.startswith(" ") and style in ("red", "bold")]
    assert names[0] == "lrt" and lines[1] == ("red", "lrt")
    body = [text for _, text in lines]
    lrt = body[body.index("lrt"):]
    verdicts = [t.split()[0] for t in lrt[1:] if t.startswith("  ") and t.split()[0] in ("PASS", "FAIL")][:3]
    assert verdicts[0] == "FAIL"  # the failing threshold before the passing ones


def test_terminal_status_line_leaves_the_stop_reason_to_the_footer(tmp_path: Path) -> None:
    from pytest_longctx.reporting.decision import terminal_lines

    record = data.make_record(tmp_path, samples=3, stopped="FatalBackendError: 401 invalid x-api-key")
    style, first = terminal_lines(record)[0]
    assert style == "red" and first.startswith("STOPPED: ") and "exit code 2 (stopped)" in first
    assert not any("401 invalid" in text for _, text in terminal_lines(record))  # printed once, by the footer
    assert "run stopped: FatalBackendError: 401 invalid x-api-key" in Page(_html(record)).text
