"""Lost in the middle's table and U-curve builders on plain run-record cells."""

from __future__ import annotations

import re
from typing import Any
from xml.etree import ElementTree

from pytest_longctx.experiments.litm.figure import litm_figures, u_curve_svg
from pytest_longctx.experiments.litm.report import litm_tables
from pytest_longctx.reporting.tables import table_lines


def cell(experiment: str, correct: int, n: int, errors: int = 0, **params: Any) -> dict[str, Any]:
    return {"experiment": experiment, "params": params, "correct": correct, "n": n, "errors": errors,
            "ci_low": 0.1, "ci_high": 0.9}


CELLS = [
    cell("litm-qa", 3, 10, documents=0, gold_position=None),
    cell("litm-qa", 9, 10, documents=1, gold_position=0),
    cell("litm-qa", 8, 10, documents=10, gold_position=0),
    cell("litm-qa", 5, 10, documents=10, gold_position=4),
    cell("litm-qa", 7, 10, documents=10, gold_position=9),
    cell("litm-qa", 7, 9, errors=1, documents=20, gold_position=0),
    cell("litm-qa", 4, 10, documents=20, gold_position=19),
    cell("litm-kv", 10, 10, keys=75, key_position=0),
    cell("litm-kv", 6, 10, keys=75, key_position=49),
    cell("qa", 1, 1, context_tokens=1000),
]


def test_tables_in_the_paper_layout() -> None:
    qa, base, kv = litm_tables(CELLS, [])
    assert qa["columns"] == ["documents", "1", "5", "10", "20"]
    assert qa["rows"] == [["10 documents", {"correct": 8, "n": 10}, {"correct": 5, "n": 10},
                           {"correct": 7, "n": 10}, None],
                          ["20 documents", {"correct": 7, "n": 9}, None, None, {"correct": 4, "n": 10}]]
    assert "BM25" in qa["note"] and "1 trial error(s) are not counted" in qa["note"]
    assert base["rows"] == [["closed-book", {"correct": 3, "n": 10}], ["oracle", {"correct": 9, "n": 10}]]
    assert kv["columns"] == ["keys", "1", "50"] and kv["rows"][0][0] == "75 keys"
    assert {t["experiment"] for t in (qa, base, kv)} == {"litm-qa", "litm-kv"}
    text = "\n".join(table_lines(qa))
    assert "0.80 (8/10)" in text and "–" in text


def test_no_cells_no_tables_or_figures() -> None:
    assert litm_tables([cell("qa", 1, 1, context_tokens=1)]) == []
    assert litm_figures([]) == [] and u_curve_svg([], "litm-kv") is None


def test_u_curve_lines_baselines_and_points() -> None:
    svg = u_curve_svg(CELLS)
    assert svg is not None
    root = ElementTree.fromstring(svg)  # well-formed XML
    ns = "{http://www.w3.org/2000/svg}"
    curves = root.findall(f"{ns}polyline")
    assert [c.get("data-count") for c in curves] == ["10", "20"]
    assert len(curves[0].get("points", "").split()) == 3
    assert sorted(b.get("data-name") for b in root.findall(f"{ns}line[@class='baseline']")) == ["closed-book",
                                                                                                  "oracle"]
    assert len(root.findall(f"{ns}circle")) == 5
    # the 10-document line: 0.8 at position 1, 0.5 at 5, 0.7 at 10 -> y falls then rises
    ys = [float(p.split(",")[1]) for p in curves[0].get("points", "").split()]
    assert ys[1] > ys[0] and ys[1] > ys[2]
    assert "closed-book 0.30" in svg and "oracle 0.90" in svg and "of 20" in svg


def test_kv_figure_has_no_baselines_and_escapes_text() -> None:
    svg = u_curve_svg(CELLS, "litm-kv")
    assert svg is not None and 'class="baseline"' not in svg
    assert "Key-value retrieval" in svg and "75 keys" in svg
    assert not re.search(r"<(?!/?(svg|title|text|rect|line|polyline|circle)\b)", svg)
    assert len(litm_figures(CELLS)) == 2
