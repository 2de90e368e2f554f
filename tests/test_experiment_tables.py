"""The sources' tables: built by the LRT and docs packages from plain cells and trials, rendered by
reporting/tables.py (terminal lines, escaped HTML). A failing builder costs a note: tests/test_hooks.py."""

from __future__ import annotations

from typing import Any

from pytest_longctx.experiments.docs.report import docs_tables, paired_p
from pytest_longctx.experiments.lrt.report import chance, lrt_tables
from pytest_longctx.reporting.tables import table_html, table_lines


def cell(experiment: str, correct: int, n: int, **params: Any) -> dict[str, Any]:
    return {"experiment": experiment, "params": params, "correct": correct, "n": n}


def trial(sample: int, ok: bool, **params: Any) -> dict[str, Any]:
    return {"experiment": "docs", "sample": sample, "params": params, "outcome": "correct" if ok else "incorrect",
            "detail": {"scorer": "judge", "protocol": "source"}}


def test_lrt_tables_follow_the_readmes_two_figures() -> None:
    cells = [cell("lrt", k, 50, lines=n, shuffle=s) for n, k in ((500, 40), (6500, 10))
             for s in ("block-100", "full", "block-5", "none", "block-20")]
    misses = [{"outcome": "incorrect", "params": {"shuffle": "none"},
               "detail": {"miss_distance": -2, "no_number": False, "not_in_file": False, "protocol": "source"}},
              {"outcome": "incorrect", "params": {"shuffle": "full"},
               "detail": {"miss_distance": None, "no_number": True, "not_in_file": False, "protocol": "source"}}]
    ordered, blocks, where = lrt_tables(cells, misses)
    assert ordered["columns"] == ["lines", "none", "full"]
    assert blocks["columns"] == ["lines", "block-5", "block-20", "block-100"]
    assert ordered["rows"] == [["500", {"correct": 40, "n": 50}, {"correct": 40, "n": 50}],
                               ["6,500", {"correct": 10, "n": 50}, {"correct": 10, "n": 50}]]
    assert "1 time in 10,000" in ordered["note"] and chance("source") == 1 / 10_000
    assert [r[0] for r in where["rows"]] == ["none", "full"] and where["rows"][1][2] == "1"


def test_docs_tables_pair_cells_by_sample() -> None:
    trials = [trial(i, ok, depth=0) for i, ok in enumerate([True, True, True, False])]
    trials += [trial(i, ok, depth=100) for i, ok in enumerate([False, False, True, False])]
    trials += [trial(i, True, context_fraction=100, arm="long-context") for i in range(4)]
    trials += [trial(i, i < 1, context_fraction=100, arm="rag") for i in range(4)]
    by_depth, by_size = docs_tables([], trials)
    assert by_depth["rows"][0][:2] == ["0%", {"correct": 3, "n": 4}]
    assert by_depth["rows"][1][2] == paired_p({0: True, 1: True, 2: True, 3: False},
                                              {0: False, 1: False, 2: True, 3: False}) == "0.50 (2/0)"
    assert by_size["rows"] == [["100%", {"correct": 4, "n": 4}, {"correct": 1, "n": 4}, "0.25 (3/0)", "–"]]
    assert "No chance line" in by_size["note"] and "scorer judge; protocol source" in by_size["note"]
    assert paired_p({0: True}, {1: True}) == "–"


def test_rendering_escapes() -> None:
    table = {"experiment": "lrt", "title": "T <b>", "columns": ["lines", "none"],
             "rows": [["500", {"correct": 1, "n": 4}], ["1,000", None]], "note": "n <i>"}
    assert table_lines(table) == ["T <b>", "  lines        none", "  500    0.25 (1/4)", "  1,000           –",
                                  "  n <i>"]
    html = table_html(table)
    assert "T &lt;b&gt;" in html and "<b>" not in html and "0.25 (1/4)" in html
