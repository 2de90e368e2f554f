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
    root = ElementTree.fromstring(svg)  # well-formed XML: one chart (two series) in the shared style
    ns = "{http://www.w3.org/2000/svg}"
    curves = root.findall(f"{ns}polyline[@class='curve']")
    assert [c.get("data-series") for c in curves] == ["10 documents", "20 documents"]
    assert len(curves[0].get("points", "").split()) == 3
    refs = root.findall(f"{ns}line[@class='ref']")
    assert sorted("".join(r.itertext()) for r in refs) == ["closed-book 0.30", "oracle 0.90"]
    assert len(root.findall(f"{ns}circle")) == 5
    assert len(root.findall(f"{ns}line[@class='ci']")) == 5  # an interval per point, set apart
    # the 10-document line: 0.8 at position 1, 0.5 at 5, 0.7 at 10 -> y falls then rises
    ys = [float(p.split(",")[1]) for p in curves[0].get("points", "").split()]
    assert ys[1] > ys[0] and ys[1] > ys[2]
    figure = litm_figures(CELLS)[0]
    assert ("closed-book 0.30", "#7f7f7f", True) in figure.legend and "oracle 0.90" in str(figure.legend)
    assert "of 20" in svg and "log scale" not in svg  # positions on a linear axis


def test_kv_figure_has_no_baselines_and_escapes_text() -> None:
    svg = u_curve_svg(CELLS, "litm-kv")
    assert svg is not None and 'class="ref"' not in svg
    assert "75 keys" in svg
    assert not re.search(r"<(?!/?(svg|title|text|rect|line|polyline|polygon|circle)\b)", svg)
    assert [f.title.split(":")[0] for f in litm_figures(CELLS)] == ["Multi-document QA", "Key-value retrieval"]


def test_compared_run_draws_its_curve_beside_this_one() -> None:
    compared = [{**c, "compare": {"baseline_n": 10, "baseline_accuracy": 1.0}} for c in CELLS]
    figure = litm_figures(compared)[1]  # key-value: one series and the compared run's, dashed
    assert any(dashed and "compared run" in label for label, _, dashed in figure.legend)
    assert figure.svg.count('stroke-dasharray="6 4"') == 1
