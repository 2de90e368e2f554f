"""Threshold grammar, selector matching, and the gate's pooled, paired and per-cell verdicts on plain records."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.errors import UsageError
from pytest_longctx.gate_spec import Threshold, parse_alpha, parse_threshold
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.compare import compare
from pytest_longctx.results.evidence import LengthAxis
from pytest_longctx.results.gate import GateInputs, evaluate
from pytest_longctx.results.thresholds import GATE_ERROR_EXIT_CODE, GATE_EXIT_CODE, cell_verdict


def trial(experiment: str, sample: int, correct: bool | None, cluster: str | None = None, **params: Any
          ) -> dict[str, Any]:
    """A scored trial (None: an error) whose item is its cluster (default: its own, per cell and sample)."""
    item = cluster if cluster is not None else f"{experiment}-{sorted(params.items())}-{sample}"
    return {"nodeid": f"t::{experiment}{sorted(params.items())}[{sample}]", "experiment": experiment,
            "params": params, "sample": sample, "item": item, "cluster": item,
            "outcome": "error" if correct is None else "correct" if correct else "incorrect", "expected": 1}


def run(trials: list[dict[str, Any]]) -> dict[str, Any]:
    agg = Aggregator()
    for t in trials:
        agg.add(t)
    trials = agg.trials
    return {"schema": "pytest-longctx/run", "version": 2, "settings": {"model": "fake/x", "seed": 0},
            "cells": agg.cells(), "trials": trials}


def gate(record: dict[str, Any], *texts: str, baseline: dict[str, Any] | None = None, alpha: float = 0.05,
         **inputs: Any) -> dict[str, Any]:
    comparison = None
    if baseline is not None:
        comparison, _ = compare(record["cells"], record["trials"], baseline, record["settings"], alpha)
    return evaluate(tuple(parse_threshold(t) for t in texts),
                    GateInputs(record["cells"], record["trials"], comparison,
                               "base.json" if baseline is not None else None, alpha, **inputs))


def lrt(correct: int, n: int = 100, lines: int = 100, start: int = 0) -> list[dict[str, Any]]:
    return [trial("lrt", start + i, i < correct, lines=lines) for i in range(n)]


@pytest.mark.parametrize(("text", "selector", "kind", "value", "reading", "each", "min_n"), [
    ("*:0.8", (), "min", 0.8, "alarm", False, 1),
    ("  *:0.8  ", (), "min", 0.8, "alarm", False, 1),
    ("*:min=0.75", (), "min", 0.75, "alarm", False, 1),
    ("*:1", (), "min", 1.0, "alarm", False, 1),
    ("*:0/point", (), "min", 0.0, "point", False, 1),
    ("experiment=lrt:0.95/shown", (("experiment", "lrt"),), "min", 0.95, "shown", False, 1),
    ("experiment=lrt, shuffle=none:0.95", (("experiment", "lrt"), ("shuffle", "none")), "min", 0.95, "alarm",
     False, 1),
    ("shuffle=block-*:0.5/each@n=30", (("shuffle", "block-*"),), "min", 0.5, "alarm", True, 30),
    ("*:max-drop=0", (), "max-drop", 0.0, "alarm", False, 1),
    ("*:max-drop=0.05/sig", (), "max-drop", 0.05, "alarm", False, 1),  # the older spelling of alarm
    ("experiment=qa:max-drop=0.1/shown/each@n=10", (("experiment", "qa"),), "max-drop", 0.1, "shown", True, 10),
    ("experiment=lrt:min-effective-length=32000", (("experiment", "lrt"),), "min-effective-length", 32000.0,
     "alarm", False, 1),
    ("*:0.5@n=0", (), "min", 0.5, "alarm", False, 1),
])
def test_parse_valid(text: str, selector: tuple[tuple[str, str], ...], kind: str, value: float, reading: str,
                     each: bool, min_n: int) -> None:
    t = parse_threshold(text)
    assert (t.text, t.selector, t.kind, t.value, t.reading, t.each, t.min_n) == (
        text.strip(), selector, kind, value, reading, each, min_n)
    assert parse_threshold(t.canonical()) == Threshold(t.canonical(), *(
        getattr(t, f) for f in ("selector", "kind", "value", "reading", "each", "min_n")))


@pytest.mark.parametrize(("text", "why"), [
    ("0.8", "missing SELECTOR:CHECK"),
    ("*:", "missing SELECTOR:CHECK"),
    (":0.8", "missing SELECTOR:CHECK"),
    ("lrt:0.8", "selector part 'lrt' is not key=value"),
    ("experiment=:0.8", "is not key=value"),
    ("*:high", "'high' is not a number"),
    ("*:min=", "'' is not a number"),
    ("*:1.5", "between 0 and 1"),
    ("*:nan", "between 0 and 1"),
    ("*:max-drop=x", "'x' is not a number"),
    ("*:max-drop=0.05/often", "unknown suffix 'often'"),
    ("*:max-drop=0.05/sig=0.01", "--longctx-alpha"),
    ("*:maximum=0.5", "unknown check 'maximum'"),
    ("*:min-effective-length=0", "whole number of tokens above 0"),
    ("*:min-effective-length=1000.5", "whole number of tokens above 0"),
    ("*:min-effective-length=1000/each", "cannot be checked cell by cell"),
    ("*:0.8@30", "expected @n=N"),
    ("*:0.8@n=many", "expected @n=N with a whole number"),
])
def test_parse_invalid_is_one_line_usage_error(text: str, why: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        parse_threshold(text, flag="--longctx-threshold")
    message = str(excinfo.value)
    assert "\n" not in message and message.startswith("--longctx-threshold: ")
    assert why in message and repr(text.strip()) in message


def test_alpha_option_values() -> None:
    assert parse_alpha("0.01") == 0.01
    for bad in ("0", "0.5", "x", "-1"):
        with pytest.raises(UsageError, match="--longctx-alpha"):
            parse_alpha(bad)


def test_matching_with_globs() -> None:
    everything = parse_threshold("*:0.5")
    assert everything.matches("anything", {}) and everything.matches("lrt", {"shuffle": "none"})
    t = parse_threshold("experiment=lrt,shuffle=block-*:0.9")
    assert t.matches("lrt", {"shuffle": "block-4", "lines": 100})
    assert not t.matches("lrt", {"shuffle": "none"}) and not t.matches("qa", {"shuffle": "block-4"})
    assert not t.matches("lrt", {"lines": 100})  # a selector key the cell lacks never matches
    assert parse_threshold("experiment=qa*:0.5").matches("qa-baseline", {})
    assert not parse_threshold("experiment=qa:0.5").matches("qa-baseline", {})
    assert parse_threshold("depth=0.?:0.5").matches("lrt", {"depth": 0.5})  # numbers match their JSON text
    assert parse_threshold("cot=true:0.5").matches("qa", {"cot": True})


def test_min_pools_the_cells_it_selects() -> None:
    """Two cells at 0.75 and 0.95: each alone is fine for 0.8 on a point reading in one and not the other; pooled
    (0.85 over 200 independent trials) the alarm does not sound, and 'shown' is not shown at 0.84."""
    record = run(lrt(75, lines=100) + lrt(95, lines=200))
    passed = gate(record, "experiment=lrt:0.8", units={"lrt": "file"})
    check = passed["checks"][0]
    assert (passed["status"], check["verdict"], check["cells"], check["clusters"]) == ("pass", "pass", 2, 200)
    assert check["estimate"] == pytest.approx(0.85) and check["low"] < 0.85 < check["high"]
    assert "over 2 cells, 200 files: not shown below 0.8" in check["words"]
    assert record["cells"][0]["checks"] == []  # a pooled check belongs to the threshold, not to a cell
    assert gate(record, "experiment=lrt:0.9")["status"] == "fail"  # 0.85 [0.79, 0.89] shown below 0.9
    assert gate(record, "experiment=lrt:0.84/shown")["status"] == "fail"  # not enough to show 0.84
    assert gate(record, "experiment=lrt:0.76/shown")["status"] == "pass"
    assert gate(record, "experiment=lrt:0.86/point")["status"] == "fail"  # the bare estimate, 0.85 < 0.86


def test_shown_says_how_many_samples_would_show_it() -> None:
    record = run(lrt(17, n=20))  # 0.85 over 20 independent trials
    result = gate(record, "*:0.8/shown", samples=20)
    check = result["checks"][0]
    assert check["verdict"] == "fail" and check["needs_samples"] > 20 and check["needs_clusters"] > 20
    assert f"--longctx-samples {check['needs_samples']:,}" in check["words"]


def test_clusters_not_trials_decide() -> None:
    """20 questions, each asked in 50 cells with one fate: 1,000 trials are 20 units of evidence."""
    fates = [q < 15 for q in range(20)]  # 0.75
    trials = [trial("qa", q, fates[q], cluster=f"q{q}", cell=c) for q in range(20) for c in range(50)]
    record = run(trials)
    check = gate(record, "experiment=qa:0.9")["checks"][0]
    assert check["clusters"] == 20 and check["n"] == 1000
    assert check["verdict"] == "fail"  # 0.75 of 20 questions is still shown below 0.9 ...
    assert gate(record, "experiment=qa:0.85")["status"] == "pass"  # ... but not below 0.85, as 1,000 trials would
    independent = run([trial("qa", i, i % 4 != 0, cell=c) for i in range(20) for c in range(50)])
    assert gate(independent, "experiment=qa:0.8")["status"] == "fail"


def test_too_few_clusters_is_an_error_for_a_pooled_check() -> None:
    record = run(lrt(9, n=10))
    result = gate(record, "*:0.5@n=30")
    assert (result["status"], result["exit_code"]) == ("error", GATE_ERROR_EXIT_CODE)
    assert result["checks"][0]["verdict"] == "too-few"
    assert result["errors"] == ["threshold '*:0.5@n=30': 10 trials (independent items) < 30: nothing to decide on"]


def paired(now: list[bool], before: list[bool], cells: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    def trials(outcomes: list[bool]) -> list[dict[str, Any]]:
        return [trial("lrt", i, o, cluster=f"f{c}-{i}", lines=c) for c in range(cells) for i, o in enumerate(outcomes)]
    return run(trials(now)), run(trials(before))


def test_max_drop_alarm_and_shown() -> None:
    now, before = paired([i >= 10 for i in range(200)], [True] * 200)  # 10 of 200 regressed
    result = gate(now, "experiment=lrt:max-drop=0", baseline=before)
    check = result["checks"][0]
    assert (result["status"], check["verdict"], check["n"]) == ("fail", "fail", 200)
    assert check["estimate"] == pytest.approx(-0.05) and check["p"] < 0.01
    assert "shown larger than 0" in check["words"]
    assert gate(now, "experiment=lrt:max-drop=0.1", baseline=before)["status"] == "pass"  # not shown above 0.1
    assert gate(now, "experiment=lrt:max-drop=0.1/shown", baseline=before)["status"] == "pass"  # shown below 0.1
    shown = gate(now, "experiment=lrt:max-drop=0.06/shown", baseline=before, samples=200)["checks"][0]
    assert shown["verdict"] == "fail" and shown["needs_samples"] > 200  # 0.05 observed: not shown below 0.06
    same = gate(before, "experiment=lrt:max-drop=0", baseline=before)
    assert same["status"] == "pass" and same["checks"][0]["p"] > 0.4
    improved = gate(before, "experiment=lrt:max-drop=0", baseline=now)
    assert improved["status"] == "pass"


def test_relative_threshold_needs_a_compared_run_with_pairs() -> None:
    now, _ = paired([True] * 20, [True] * 20)
    missing = gate(now, "*:max-drop=0")
    assert missing["status"] == "error" and "--longctx-compare" in missing["errors"][0]
    other = run([trial("lrt", i, True, cluster=f"other-{i}", lines=0) for i in range(20)])
    unpaired = gate(now, "*:max-drop=0", baseline=other)
    assert unpaired["status"] == "error"
    assert "no trial of its 1 cells paired" in unpaired["errors"][0]
    assert "20 its item was not asked in that cell of the other run" in unpaired["errors"][0]


def test_each_is_holm_corrected_across_cells() -> None:
    """Ten cells; in one, 8 of 20 regressed and none improved: exact one-sided McNemar p = 1/256, times 10 by Holm."""
    base = [True] * 20
    now_cells = {c: [i >= 8 for i in range(20)] if c == 3 else base for c in range(10)}
    def trials(source: dict[int, list[bool]]) -> list[dict[str, Any]]:
        return [trial("lrt", i, o, cluster=f"f{c}-{i}", lines=c) for c, outs in source.items()
                for i, o in enumerate(outs)]
    now, before = run(trials(now_cells)), run(trials(dict.fromkeys(range(10), base)))
    result = gate(now, "experiment=lrt:max-drop=0/each", baseline=before)
    cell = next(c for c in now["cells"] if c["params"]["lines"] == 3)
    check = cell["checks"][0]
    assert check["p"] == pytest.approx(1 / 256) and check["p_holm"] == pytest.approx(10 / 256)
    assert (check["verdict"], result["status"]) == ("fail", "fail")
    assert cell_verdict(cell) == "fail" and cell_verdict(now["cells"][0]) == "pass"
    strict = gate(now, "experiment=lrt:max-drop=0/each", baseline=before, alpha=0.02)
    assert strict["status"] == "pass"  # 10/256 = 0.039 > 0.02 after Holm, though 1/256 < 0.02 alone


def test_alarms_are_corrected_together() -> None:
    """Two alarms each with p just under alpha alone: after Holm across the gate, neither fails."""
    record = run(lrt(38, n=50, lines=1) + lrt(38, n=50, lines=2))  # 0.76 each
    single = gate(record, "lines=1:0.85")["checks"][0]
    assert 0.02 < single["p"] < 0.05 and single["verdict"] == "fail"
    both = gate(record, "lines=1:0.85", "lines=2:0.85")
    assert [c["p_adjusted"] for c in both["checks"]] == pytest.approx([2 * single["p"]] * 2)
    assert both["status"] == "pass" and "Holm over 2 alarms" in both["checks"][0]["words"]
    mixed = gate(record, "lines=1:0.85", "lines=2:0.85/point")  # a point check is not an alarm
    assert mixed["checks"][0]["verdict"] == "fail" and mixed["checks"][0]["p_adjusted"] == single["p"]


def test_effective_length_gate() -> None:
    trials = (lrt(98, lines=100) + lrt(96, lines=200, start=100) + lrt(90, lines=400, start=200)
              + lrt(40, lines=800, start=300))
    record = run(trials)
    axis = {"lrt": LengthAxis("lines")}
    result = gate(record, "experiment=lrt:min-effective-length=400", lengths=axis, effective_accuracy=0.85)
    check = result["checks"][0]
    assert (check["estimate"], check["verdict"]) == (400, "pass")
    assert check["low"] <= 400 <= check["high"]
    assert gate(record, "experiment=lrt:min-effective-length=800", lengths=axis)["status"] == "fail"
    assert gate(record, "experiment=lrt:min-effective-length=400/shown", lengths=axis)["status"] == "fail"
    assert gate(record, "experiment=lrt:min-effective-length=200/shown", lengths=axis)["status"] == "pass"
    no_axis = gate(record, "experiment=lrt:min-effective-length=400")
    assert no_axis["status"] == "error" and "length axis" in no_axis["errors"][0]


def test_gate_summary_and_errors() -> None:
    record = run(lrt(90, n=100))
    unmatched = gate(record, "experiment=qa:0.5")
    assert unmatched["status"] == "error" and "matches no cell" in unmatched["errors"][0]
    assert unmatched["exit_code"] == GATE_ERROR_EXIT_CODE
    failed = gate(record, "*:0.99")
    assert (failed["status"], failed["exit_code"], failed["counts"]["fail"]) == ("fail", GATE_EXIT_CODE, 1)
    assert failed["thresholds"] == ["*:0.99"] and failed["alpha"] == 0.05
    none = gate(record)
    assert (none["status"], none["exit_code"], none["checks"]) == ("none", 0, [])
    assert cell_verdict({"checks": []}) == "" == cell_verdict({})


def test_gate_exit_code_is_public_and_distinct() -> None:
    import pytest_longctx

    assert pytest_longctx.GATE_EXIT_CODE == GATE_EXIT_CODE == 10
    assert pytest_longctx.GATE_ERROR_EXIT_CODE == GATE_ERROR_EXIT_CODE == 11
    assert {GATE_EXIT_CODE, GATE_ERROR_EXIT_CODE}.isdisjoint({int(code) for code in pytest.ExitCode})
