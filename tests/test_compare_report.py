"""Comparison and gating end to end, seen from the reports: two pytester runs, the second compared
with the first's longctx.json, checked on the run record, the exit code and the HTML report."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pytest_longctx import GATE_EXIT_CODE

#: A small line-retrieval eval: the fake model answers the asked line's value or a wrong one
#: (the next line's value, or a value that is not in the file).
LRT_EVAL = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("lrt")
@pytest.mark.parametrize("shuffle", ["none", "full"])
@pytest.mark.parametrize("lines", [10, 40])
async def test_lrt(longctx, lines, shuffle):
    values = [f"v{longctx.rng.randrange(10**6):06d}" for _ in range(lines)]
    order = list(range(lines))
    if shuffle == "full":
        longctx.rng.shuffle(order)
    target = longctx.rng.randrange(lines)
    text = "\\n".join(f"line {i}: {values[i]}" for i in order)
    request = Request.user(f"{text}\\nWhat is on line {target}?", max_tokens=8, template="lrt-mini@1")
    answer = await longctx.ask(request, oracle=Oracle(values[target], (values[(target + 1) % lines], "v999999")))
    miss = values.index(answer) - target if answer in values and answer != values[target] else None
    longctx.record(expected=values[target], answer=answer, item=f"file {longctx.seed}", lines=lines,
                   miss_distance=0 if answer == values[target] else miss)
    assert answer == values[target]
'''

DROP_GATE = "*:max-drop=0"


def _html(run: Any) -> str:
    text: str = (run.report_dir / "longctx.html").read_text(encoding="utf-8")
    return text


def _text(page: str) -> str:
    """Visible text of a report (tags dropped, entities kept escaped), whitespace collapsed."""
    body = re.sub(r"<script\b.*?</script>", " ", page, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", body).split())


@pytest.fixture
def project(longctx_runner: Any) -> Any:
    longctx_runner.pytester.makepyfile(test_lrt_mini=LRT_EVAL)
    return longctx_runner


def test_compare_with_same_model_passes_the_gate(project: Any, mode_args: list[str]) -> None:
    first = project.run("--longctx-samples", "6", *mode_args, model="fake/random")
    assert first.ret == 0, first.result.stdout.str()
    assert first.record["comparison"] is None and first.record["gate"]["status"] == "none"
    assert "Comparison with the baseline" not in _html(first)
    assert _html(first).count("<svg") == 2  # accuracy by lines per shuffle mode, miss histogram

    second = project.run("--longctx-samples", "6", "--longctx-compare", str(first.report_dir / "longctx.json"),
                         "--longctx-threshold", DROP_GATE, *mode_args, model="fake/random")
    assert second.ret == 0, second.result.stdout.str()
    record = second.record
    assert record["comparison"]["significant_drops"] == 0
    assert record["comparison"]["cells_compared"] == 4 == len(record["cells"])
    assert all(c["compare"]["diff"] == 0 and c["compare"]["paired"] == 6 for c in record["cells"])
    assert record["gate"]["status"] == "pass"
    text = _text(_html(second))
    assert "Comparison with the baseline" in text and "0 cells with a significant drop" in text
    assert "baseline model fake/random" in text and "trials paired 24" in text
    assert "pass " + DROP_GATE + ":" in text and "not shown larger than 0" in text
    assert record["comparison"]["experiments"]["lrt"]["diff"] == 0 and "+0.000" in text


def test_wrong_model_against_perfect_baseline_drops_significantly(project: Any) -> None:
    baseline = project.run("--longctx-samples", "10", model="fake/perfect")
    assert baseline.ret == 0
    run = project.run("--longctx-samples", "10", "--longctx-compare", str(baseline.report_dir / "longctx.json"),
                      "--longctx-threshold", DROP_GATE, model="fake/wrong")
    assert run.ret == GATE_EXIT_CODE == 10, run.result.stdout.str()
    record = run.record
    assert record["comparison"]["significant_drops"] == 4
    for cell in record["cells"]:
        assert cell["compare"] == {**cell["compare"], "baseline_accuracy": 1.0, "diff": -1.0, "regressed": 10,
                                   "improved": 0, "paired": 10, "significant_drop": True}
        assert cell["compare"]["p_holm"] == pytest.approx(4 / 2**10)  # one-sided exact McNemar, Holm over 4 cells
        assert cell["checks"] == []  # the threshold pools the cells: its check is the gate's, not a cell's
    assert record["gate"] == {**record["gate"], "status": "fail", "exit_code": 10}
    assert [c["verdict"] for c in record["gate"]["checks"]] == ["fail"]

    page = _html(run)
    text = _text(page)
    assert '<div class="gate fail">' in page and "FAIL" in text and "exit code 10" in text
    assert "4 cells with a significant drop" in text and "baseline model fake/perfect" in text
    regressed = page[page.index("Regressed cells (significant drop)"):]
    regressed = regressed[:regressed.index("</table>")]
    assert regressed.count('<tr class="fail">') == 4
    for lines in (10, 40):
        for shuffle in ("none", "full"):
            assert f"lines={lines}, shuffle={shuffle}" in _text(regressed)
    assert text.count("significant drop") >= 4
    # Every wrong answer points at the next line or at a value not in the file.
    assert "Where wrong answers point" in text
    assert "40 wrong answers;" in text


def test_a_drop_no_cell_shows_alone_fails_the_pooled_gate(project: Any) -> None:
    """Two pairs a cell: no cell's drop is significant (one-sided exact McNemar p = 0.25), but eight paired files
    that all regressed are: the pooled alarm fails, the per-cell check (Holm across the cells) cannot."""
    baseline = project.run("--longctx-samples", "2", model="fake/perfect")
    compared = str(baseline.report_dir / "longctx.json")
    run = project.run("--longctx-samples", "2", "--longctx-compare", compared, "--longctx-threshold", DROP_GATE,
                      model="fake/wrong")
    assert run.ret == GATE_EXIT_CODE, run.result.stdout.str()
    record = run.record
    assert record["comparison"]["significant_drops"] == 0
    for cell in record["cells"]:
        assert cell["compare"]["diff"] == -1.0 and cell["compare"]["regressed"] == 2
        assert cell["compare"]["p_value"] == 0.25 and not cell["compare"]["significant_drop"]
    check = record["gate"]["checks"][0]
    # the test's variance at the null keeps 8 single items from a tiny p (0.026), not from failing at alpha 0.05
    assert (check["verdict"], check["n"], check["clusters"]) == ("fail", 8, 8) and check["p"] < 0.05
    page = _html(run)
    text = _text(page)
    assert '<div class="gate fail">' in page
    assert "0 cells with a significant drop" in text and "4 of 4 compared cells are below the baseline" in text
    assert "4 other cells fell, not significantly" in text
    assert "Regressed cells (significant drop)" not in text
    assert "fail " + DROP_GATE + ":" in text and "shown larger than 0" in text

    each = project.run("--longctx-samples", "2", "--longctx-compare", compared, "--longctx-threshold",
                       "*:max-drop=0/each", model="fake/wrong")
    assert each.ret == 0, each.result.stdout.str()
    for cell in each.record["cells"]:
        (cell_check,) = cell["checks"]
        assert cell_check["p"] == pytest.approx(0.25) and cell_check["p_holm"] == pytest.approx(1.0)
        assert cell_check["verdict"] == "pass"
    point = project.run("--longctx-samples", "2", "--longctx-compare", compared, "--longctx-threshold",
                        "*:max-drop=0.05/point", model="fake/wrong")
    assert point.ret == GATE_EXIT_CODE
    assert '<div class="gate fail">' in _html(point)
