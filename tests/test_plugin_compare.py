"""Comparison with an earlier run: paired trials, exact McNemar, and max-drop gating end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.errors import UsageError
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.compare import baselines_by_key, compare, load_record
from pytest_longctx.results.gating import evaluate, parse_threshold


def _trials(outcomes: str, experiment: str = "qa", **params: Any) -> list[dict[str, Any]]:
    """One trial per letter: c = correct, i = incorrect, e = error; item q<sample>."""
    names = {"c": "correct", "i": "incorrect", "e": "error"}
    return [{"nodeid": f"{experiment}{params}[s{s}]", "experiment": experiment, "params": params, "sample": s,
             "outcome": names[o], "item": f"q{s}", "expected": "A"} for s, o in enumerate(outcomes)]


def _run(trials: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    agg = Aggregator()
    for t in trials:
        agg.add(t)
    return {"schema": "pytest-longctx/run", "version": 1,
            "settings": {"model": "fake/x", "seed": seed, "started": "then"},
            "cells": agg.cells(), "trials": agg.trials}


def test_significant_drop() -> None:
    baseline = _run(_trials("c" * 10))
    now = _run(_trials("i" * 9 + "c"))
    summary = compare(now["cells"], now["trials"], baseline)
    cmp = now["cells"][0]["compare"]
    assert (cmp["paired"], cmp["regressed"], cmp["improved"]) == (10, 9, 0)
    assert cmp["p_value"] == pytest.approx(2 / 2**9)  # 9 discordant pairs, all one way
    assert cmp["diff"] == pytest.approx(-0.9)
    assert cmp["significant_drop"] is True
    assert (cmp["baseline_accuracy"], cmp["baseline_n"]) == (1.0, 10)
    assert summary["significant_drops"] == 1 and summary["cells_compared"] == 1
    assert (summary["baseline_model"], summary["baseline_seed"], summary["same_seed"]) == ("fake/x", 0, True)

    gate = evaluate(now["cells"], (parse_threshold("*:max-drop=0.1/sig"),), baselines_by_key(baseline))
    assert gate["status"] == "fail"


def test_non_significant_drop() -> None:
    baseline = _run(_trials("cccccccci"))
    now = _run(_trials("iiicccccc"))  # 3 regressed, 1 improved: a drop of 0.22, p = 0.625
    compare(now["cells"], now["trials"], baseline)
    cmp = now["cells"][0]["compare"]
    assert (cmp["paired"], cmp["regressed"], cmp["improved"]) == (9, 3, 1)
    assert cmp["p_value"] == pytest.approx(0.625)
    assert cmp["diff"] == pytest.approx(-2 / 9)
    assert cmp["significant_drop"] is False

    sig = evaluate(now["cells"], (parse_threshold("*:max-drop=0.1/sig"),), baselines_by_key(baseline))
    assert sig["status"] == "pass"  # too little evidence of a real drop
    plain = evaluate(now["cells"], (parse_threshold("*:max-drop=0.1"),), baselines_by_key(baseline))
    assert plain["status"] == "fail"  # without /sig the raw drop decides


def test_an_improvement_is_never_a_significant_drop() -> None:
    baseline = _run(_trials("i" * 10))
    now = _run(_trials("c" * 10))
    compare(now["cells"], now["trials"], baseline)
    cmp = now["cells"][0]["compare"]
    assert cmp["p_value"] < 0.01 and cmp["significant_drop"] is False


def test_pairing_skips_errors_and_different_items() -> None:
    baseline = _run(_trials("cccce"))
    now_trials = _trials("iecci")
    now_trials[2]["item"] = "another question"
    now = _run(now_trials)
    compare(now["cells"], now["trials"], baseline)
    cmp = now["cells"][0]["compare"]
    # s0 paired (regressed), s1 error now, s2 other item, s3 paired, s4 error in the baseline
    assert (cmp["paired"], cmp["regressed"], cmp["improved"]) == (2, 1, 0)


def test_cells_without_baseline_or_pairs() -> None:
    baseline = _run(_trials("cc", experiment="qa"))
    now = _run(_trials("cc", experiment="qa") + _trials("cc", experiment="lrt", lines=5))
    summary = compare(now["cells"], now["trials"], baseline, alpha=0.01)
    by_exp = {c["experiment"]: c for c in now["cells"]}
    assert "compare" not in by_exp["lrt"]
    assert summary["cells_compared"] == 1 and summary["alpha"] == 0.01

    unpaired = _run([{**t, "sample": t["sample"] + 10} for t in _trials("ii")])
    compare(unpaired["cells"], unpaired["trials"], baseline)
    assert unpaired["cells"][0]["compare"]["paired"] == 0
    assert unpaired["cells"][0]["compare"]["p_value"] is None
    verdict = evaluate(unpaired["cells"], (parse_threshold("*:max-drop=0.1/sig"),), baselines_by_key(baseline))
    assert verdict["counts"]["error"] == 1 and verdict["status"] == "error"  # no pairs: the drop cannot be tested


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
    longctx.record(expected="yes", answer=answer)
    assert answer == "yes"
'''


def test_compare_and_gate_end_to_end(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_yes=YES)
    base = longctx_runner.run("--longctx-samples", "6", report_dir="base")
    assert base.ret == 0
    baseline = str(base.report_dir / "longctx.json")

    # 6 of 6 paired trials regressed: p = 2 / 64 < 0.05, a significant drop
    worse = longctx_runner.run("--longctx-samples", "6", "--longctx-compare", baseline,
                               "--longctx-threshold", "*:max-drop=0.1/sig", model="fake/wrong")
    assert worse.ret == 10
    cmp = worse.cell("yes")["compare"]
    assert (cmp["paired"], cmp["regressed"], cmp["p_value"], cmp["significant_drop"]) == (6, 6, 0.03125, True)
    assert worse.record["comparison"]["significant_drops"] == 1
    assert worse.record["settings"]["compare"] == baseline

    # 4 paired trials all regressed: p = 2 / 16, not significant, so the gate passes
    few = longctx_runner.run("--longctx-samples", "4", "--longctx-compare", baseline,
                             "--longctx-threshold", "*:max-drop=0.1/sig", model="fake/wrong")
    assert few.ret == 0
    assert few.cell("yes")["compare"]["p_value"] == 0.125
    assert few.cell("yes")["checks"][0]["verdict"] == "pass"


def test_compare_with_missing_record_is_a_usage_error(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_yes=YES)
    run = longctx_runner.run("--longctx-compare", "nowhere/longctx.json")
    assert run.ret == pytest.ExitCode.USAGE_ERROR
    assert "--longctx-compare: nowhere/longctx.json not found" in run.result.stderr.str()
