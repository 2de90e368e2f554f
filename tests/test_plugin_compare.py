"""Comparison with an earlier run: trials paired on items (not sample indexes), one-sided exact McNemar per cell with
Holm, pooled paired differences per experiment, schema-1 records, and gating end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.errors import UsageError
from pytest_longctx.gate_spec import parse_threshold
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.compare import compare, load_record
from pytest_longctx.results.gate import GateInputs, evaluate
from pytest_longctx.results.pairing import ERROR_HERE, ERROR_THERE, NO_CELL, NOT_ASKED, OTHER_ITEM, pair_runs


def _trials(outcomes: str, experiment: str = "qa", items: list[str] | None = None, **params: Any
            ) -> list[dict[str, Any]]:
    """One trial per letter: c = correct, i = incorrect, e = error; item q<sample> unless ``items`` are given."""
    names = {"c": "correct", "i": "incorrect", "e": "error"}
    out = []
    for s, o in enumerate(outcomes):
        item = items[s] if items is not None else f"q{s}"
        out.append({"nodeid": f"{experiment}{params}[s{s}]", "experiment": experiment, "params": params,
                    "sample": s, "outcome": names[o], "item": item, "cluster": item, "expected": "A"})
    return out


def _run(trials: list[dict[str, Any]], seed: int = 0, version: int = 2) -> dict[str, Any]:
    agg = Aggregator()
    for t in trials:
        agg.add(t)
    return {"schema": "pytest-longctx/run", "version": version,
            "settings": {"model": "fake/x", "seed": seed, "started": "then"},
            "cells": agg.cells(), "trials": agg.trials}


def test_significant_drop_per_cell_and_pooled() -> None:
    baseline = _run(_trials("c" * 10))
    now = _run(_trials("i" * 9 + "c"))
    _, summary = compare(now["cells"], now["trials"], baseline, now["settings"])
    cmp = now["cells"][0]["compare"]
    assert (cmp["paired"], cmp["regressed"], cmp["improved"]) == (10, 9, 0)
    assert cmp["p_value"] == pytest.approx(1 / 2**9) == cmp["p_holm"]  # 9 discordant pairs, all one way (one-sided)
    assert cmp["diff"] == pytest.approx(-0.9) and cmp["significant_drop"] is True
    assert summary["significant_drops"] == 1 and summary["cells_compared"] == 1
    assert (summary["baseline_model"], summary["baseline_seed"], summary["same_seed"]) == ("fake/x", 0, True)
    pooled = summary["experiments"]["qa"]
    assert (pooled["pairs"], pooled["clusters"], pooled["regressed"]) == (10, 10, 9)
    assert pooled["diff"] == pytest.approx(-0.9) and pooled["high"] < 0


def test_same_seed_means_the_same_seed() -> None:
    baseline = _run(_trials("cc"), seed=7)
    now = _run(_trials("cc"))
    _, summary = compare(now["cells"], now["trials"], baseline, {"seed": 0})
    assert summary["same_seed"] is False and summary["baseline_seed"] == 7
    _, summary = compare(now["cells"], now["trials"], baseline, {"seed": 7})
    assert summary["same_seed"] is True


def test_holm_across_an_experiments_cells() -> None:
    base = _run(_trials("c" * 8, lines=1) + _trials("c" * 8, lines=2) + _trials("c" * 8, lines=3))
    now = _run(_trials("i" * 8, lines=1) + _trials("c" * 8, lines=2) + _trials("c" * 8, lines=3))
    compare(now["cells"], now["trials"], base, now["settings"])
    dropped = next(c for c in now["cells"] if c["params"] == {"lines": 1})["compare"]
    assert dropped["p_value"] == pytest.approx(1 / 256) and dropped["p_holm"] == pytest.approx(3 / 256)  # one-sided


def test_pairing_is_on_items_not_sample_indexes() -> None:
    """A model whose own baseline filter dropped q1 asks q2 at sample 1: its trials still pair with the other
    run's q0, q2, q3 (not with whatever that run asked at the same index)."""
    before = _run(_trials("cccc", items=["q0", "q1", "q2", "q3"]))
    now = _run(_trials("ciic", items=["q0", "q2", "q3", "q4"]))
    comparison, summary = compare(now["cells"], now["trials"], before, now["settings"])
    pairs = {(a["item"], a["outcome"], b["item"]) for _, a, b in comparison.pairing.pairs}
    assert pairs == {("q0", "correct", "q0"), ("q2", "incorrect", "q2"), ("q3", "incorrect", "q3")}
    assert summary["pairing"] == {"by": "item", "paired": 3, "unpaired_here": {NOT_ASKED: 1},
                                  "unpaired_there": {NOT_ASKED: 1}}
    by_index = _run(_trials("ciic", items=["q0", "q2", "q3", "q4"]), version=1)
    legacy = pair_runs(by_index["trials"], before["trials"], by_item=False)
    assert len(legacy.pairs) == 1 and legacy.unpaired_here == {OTHER_ITEM: 3}  # only sample 0 asked the same


def test_an_item_asked_twice_in_a_cell_pairs_in_order() -> None:
    before = _run(_trials("ci", items=["q0", "q0"]))
    now = _run(_trials("ii", items=["q0", "q0"]))
    pairing = pair_runs(now["trials"], before["trials"])
    assert [(a["sample"], b["sample"]) for _, a, b in pairing.pairs] == [(0, 0), (1, 1)]


def test_unpaired_trials_are_counted_with_their_reasons() -> None:
    baseline = _run(_trials("cccce"))
    now_trials = _trials("iecci")
    now_trials[2]["item"] = "another question"
    now = _run(now_trials + _trials("cc", experiment="lrt", lines=5))
    _, summary = compare(now["cells"], now["trials"], baseline, now["settings"])
    assert summary["pairing"]["unpaired_here"] == {ERROR_HERE: 1, NOT_ASKED: 1, ERROR_THERE: 1, NO_CELL: 2}
    assert summary["pairing"]["unpaired_there"] == {NOT_ASKED: 1}
    cmp = next(c for c in now["cells"] if c["experiment"] == "qa")["compare"]
    assert (cmp["paired"], cmp["regressed"], cmp["improved"]) == (2, 1, 0)  # q0 regressed, q3 held
    assert "compare" not in next(c for c in now["cells"] if c["experiment"] == "lrt")


def test_schema_1_records_load_with_a_cluster_a_trial(tmp_path: Path) -> None:
    old = _run(_trials("cc"), version=1)
    for trial in old["trials"]:
        del trial["cluster"]
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    loaded = load_record(path)
    assert [t["cluster"] for t in loaded["trials"]] == ["qa|trial:qa{}[s0]#0", "qa|trial:qa{}[s1]#1"]
    now = _run(_trials("cc"))
    _, summary = compare(now["cells"], now["trials"], loaded, now["settings"])
    assert summary["pairing"]["by"] == "sample" and summary["baseline_version"] == 1
    assert "schema-1 record" in summary["legacy_note"] and "each counts alone" in summary["legacy_note"]


def test_gate_without_pairs_is_an_error() -> None:
    baseline = _run(_trials("cc"))
    unpaired = _run(_trials("ii", items=["x", "y"]))
    comparison, _ = compare(unpaired["cells"], unpaired["trials"], baseline, unpaired["settings"])
    gate = evaluate((parse_threshold("*:max-drop=0.1"),),
                    GateInputs(unpaired["cells"], unpaired["trials"], comparison, "base.json"))
    assert gate["status"] == "error" and "no trial of its 1 cells paired" in gate["errors"][0]


def test_load_record(tmp_path: Path) -> None:
    good = tmp_path / "longctx.json"
    good.write_text(json.dumps(_run(_trials("c"))), encoding="utf-8")
    assert load_record(good)["schema"] == "pytest-longctx/run"
    for name, text in (("bad.json", "{"), ("other.json", json.dumps({"schema": "something/else"})),
                       ("list.json", "[]")):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(UsageError, match=name):
            load_record(path)
    with pytest.raises(UsageError, match="cannot read run record"):
        load_record(tmp_path / "missing.json")


YES = '''
import pytest

from pytest_longctx import Oracle, Request


@pytest.mark.longctx("yes")
async def test_yes(longctx):
    answer = await longctx.ask(Request.user("Say yes.", max_tokens=4), oracle=Oracle("yes", ("no",)))
    longctx.record(expected="yes", answer=answer, item=f"q{longctx.sample}")
    assert answer == "yes"
'''


def test_compare_and_gate_end_to_end(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_yes=YES)
    base = longctx_runner.run("--longctx-samples", "8", report_dir="base")
    assert base.ret == 0
    baseline = str(base.report_dir / "longctx.json")

    # 8 of 8 paired items regressed: one-sided exact McNemar p = 1 / 256, and the pooled alarm sees a drop above 0.1
    # (with 6 items it cannot: the test's variance at the null leaves too few effective items, p = 0.06)
    worse = longctx_runner.run("--longctx-samples", "8", "--longctx-compare", baseline,
                               "--longctx-threshold", "*:max-drop=0.1", model="fake/wrong")
    assert worse.ret == 10
    cmp = worse.cell("yes")["compare"]
    assert (cmp["paired"], cmp["regressed"], cmp["p_value"], cmp["significant_drop"]) == (8, 8, 0.00390625, True)
    assert worse.record["comparison"]["significant_drops"] == 1
    assert worse.record["settings"]["compare"] == baseline
    check = worse.record["gate"]["checks"][0]
    assert check["verdict"] == "fail" and check["p"] < 0.05

    # 2 paired items, both regressed: too little to show a drop above 0.1, so the alarm stays quiet...
    few = longctx_runner.run("--longctx-samples", "2", "--longctx-compare", baseline,
                             "--longctx-threshold", "*:max-drop=0.1", model="fake/wrong")
    assert few.ret == 0, few.result.stdout.str()
    assert few.record["gate"]["checks"][0]["verdict"] == "pass"
    # ... and too little to show the drop is below 0.1: non-inferiority fails closed and says what would show it
    shown = longctx_runner.run("--longctx-samples", "6", "--longctx-compare", baseline,
                               "--longctx-threshold", "*:max-drop=0.1/shown", model="fake/perfect")
    assert shown.ret == 10
    check = shown.record["gate"]["checks"][0]
    assert check["verdict"] == "fail" and check["needs_samples"] > 6
    assert f"--longctx-samples {check['needs_samples']}" in check["words"]


def test_non_inferiority_passes_when_enough_items_show_it(longctx_runner: Any) -> None:
    """150 items answered alike in both runs: the score test shows the drop below 0.1 (one-sided p ~ 3e-5)."""
    longctx_runner.pytester.makepyfile(test_yes=YES)
    base = longctx_runner.run("--longctx-samples", "150", report_dir="base")
    assert base.ret == 0
    same = longctx_runner.run("--longctx-samples", "150", "--longctx-compare", str(base.report_dir / "longctx.json"),
                              "--longctx-threshold", "*:max-drop=0.1/shown", model="fake/perfect")
    assert same.ret == 0, same.result.stdout.str()
    check = same.record["gate"]["checks"][0]
    assert (check["verdict"], check["n"], check["clusters"]) == ("pass", 150, 150)
    assert "shown below 0.1" in check["words"]


def test_compare_with_missing_record_is_a_usage_error(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_yes=YES)
    run = longctx_runner.run("--longctx-compare", "nowhere/longctx.json")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert "--longctx-compare: nowhere/longctx.json not found" in run.result.stderr.str()


def test_clusters_are_namespaced_by_experiment(tmp_path: Path) -> None:
    """Two experiments that both call their items q0..q9: a pooled '*' threshold counts 20 items, not 10; a
    version-2 record (clusters named without their experiment) loads namespaced."""
    from pytest_longctx.results.evidence import Evidence, assign_clusters

    trials = _trials("c" * 10, experiment="a") + _trials("c" * 10, experiment="b")
    assign_clusters(trials, {"a": Evidence("a"), "b": Evidence("b")})
    assert {t["cluster"] for t in trials} == {f"{e}|q{i}" for e in "ab" for i in range(10)}
    run = _run(trials)
    gate = evaluate((parse_threshold("*:min=0.5"),), GateInputs(run["cells"], run["trials"]))
    assert gate["checks"][0]["clusters"] == 20
    old = _run(_trials("c" * 10, experiment="a") + _trials("c" * 10, experiment="b"))  # clusters "q0".."q9"
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    loaded = load_record(path)
    assert len({t["cluster"] for t in loaded["trials"]}) == 20 and loaded["trials"][0]["cluster"] == "a|q0"
    merged = evaluate((parse_threshold("*:min=0.5"),), GateInputs(old["cells"], old["trials"]))
    assert merged["checks"][0]["clusters"] == 10  # what the old names did: two experiments' q0 as one item
