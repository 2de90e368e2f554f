"""Properties the decision keeps on any pair of records (Hypothesis; issue #38 items 2 and 10).

Generated records: experiments of items asked in every cell (one trial per item and cell), each trial correct,
incorrect or errored, in a baseline and a candidate run; thresholds of every kind and reading over them. On any of
them the one decision (``results/decide.py`` -> ``results/decision.py``):

* ignores the order of the trials and cells, and a consistent relabelling of items (and their clusters);
* refuses a record that lists a trial twice (exit 4, through ``longctx-gate`` too);
* never exits 0 when a candidate trial errored (exit 1, as the run);
* is ``longctx-gate``'s on the same two records (the same exit code and verdicts as the run's);
* never turns a fail into a pass when the candidate answers more questions wrong, items asked unequally often, every
  kind and reading (the readings' own monotonicity: ``tests/test_monotone.py``).
"""

from __future__ import annotations

import copy
import json
import math
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pytest_longctx.errors import UsageError
from pytest_longctx.gate_command import main
from pytest_longctx.gate_spec import GateSettings, Threshold, parse_threshold
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.decide import decide
from pytest_longctx.results.decision import GateResult
from pytest_longctx.results.evidence import Evidence, LengthAxis, assign_clusters, by_experiment, describe
from pytest_longctx.results.schema import record_problem

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EXPERIMENTS = ("qa", "lrt")
DECLARED = by_experiment([Evidence(e, "item", "question", "asked in every cell") for e in EXPERIMENTS])
LENGTHS = by_experiment([Evidence(e, "item", "question", "asked in every cell", LengthAxis("size"))
                         for e in EXPERIMENTS])
OUTCOMES = ("correct", "incorrect", "error")
THRESHOLDS = ("*:max-drop=0", "experiment=qa:max-drop=0.05/shown", "*:max-drop=0.1/point", "experiment=lrt:min=0.5",
              "*:min=0.6/shown", "experiment=qa:min=0.7/point", "*:max-drop=0/each", "experiment=lrt:max-drop=0.02")
EFFECTIVE = ("*:min-effective-length=2/shown", "*:min-effective-length=2", "*:min-effective-length=3/point",
             "*:min=0.6/each", "*:max-drop=0.05/shown/each")


@dataclass(frozen=True)
class Pair:
    """Two runs' outcomes: ``(experiment, size, item) -> (baseline, candidate)``."""

    outcomes: dict[tuple[str, int, int], tuple[str, str]]


@st.composite
def pairs(draw: st.DrawFn, errors: bool = True, unequal: bool = False) -> Pair:
    """``unequal``: each item asked in only some cells (items of unequal sizes)."""
    experiments = draw(st.lists(st.sampled_from(EXPERIMENTS), min_size=1, max_size=2, unique=True))
    outcome = st.sampled_from(OUTCOMES if errors else OUTCOMES[:2])
    weighted = st.one_of(st.just("correct"), outcome)  # mostly right, as real runs are
    out = {}
    for experiment in sorted(experiments):
        items = draw(st.integers(1, 8))
        for size in range(1, draw(st.integers(1, 3)) + 1):
            for item in range(items):
                if not unequal or size == 1 or draw(st.booleans()):
                    out[(experiment, size, item)] = (draw(weighted), draw(weighted))
    return Pair(out)


def record(pair: Pair, side: int, names: Any = None, order: random.Random | None = None) -> dict[str, Any]:
    """One run's record of ``pair`` (side 0: the baseline, 1: the candidate); ``names`` relabels items."""
    agg = Aggregator()
    for (experiment, size, item), outcomes in pair.outcomes.items():
        name = names(experiment, item) if names else f"q{item}"
        agg.add({"nodeid": f"test_{experiment}.py::test[{size}-s{item}]", "experiment": experiment,
                 "params": {"size": size}, "sample": item, "item": name, "outcome": outcomes[side],
                 **({"error": "BackendError: the API failed"} if outcomes[side] == "error" else {})})
    trials = agg.trials
    assign_clusters(trials, DECLARED)
    cells = agg.cells()
    if order is not None:
        order.shuffle(trials)
        order.shuffle(cells)
    return {"schema": "pytest-longctx/run", "version": 3, "stopped": None, "cells": cells, "trials": trials,
            "evidence": describe(DECLARED, trials),
            "settings": {"seed": 0, "protocol": "longctx", "samples": 8, "alpha": 0.05, "effective_accuracy": 0.85,
                         "thresholds": [], "model": "fake/x"}}


def gate_settings(thresholds: tuple[Threshold, ...]) -> GateSettings:
    """What the gate reads of the candidate's run: its thresholds against baseline.json, 8 samples a cell."""
    return GateSettings(thresholds, compare=Path("baseline.json"), samples=8)


def decided(pair: Pair, thresholds: list[str], declared: dict[str, Evidence] = DECLARED, **kw: Any) -> GateResult:
    """The run's decision on the candidate of ``pair`` against its baseline."""
    ts = tuple(parse_threshold(t) for t in thresholds)
    return decide(record(pair, 1, **kw), gate_settings(ts), declared, record(pair, 0, **kw), [])


def summary(result: GateResult) -> tuple[Any, ...]:
    return result.status, result.exit_code, result.counts, [c["verdict"] for c in result.checks]


def close(a: Any, b: Any) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9,
                                                                                           abs_tol=1e-12))


thresholds = st.lists(st.sampled_from(THRESHOLDS), min_size=1, max_size=3, unique=True)


@given(pairs(), thresholds, st.randoms(use_true_random=False))
@SETTINGS
def test_the_order_of_trials_and_cells_changes_nothing(pair: Pair, ts: list[str], rnd: random.Random) -> None:
    first = decided(pair, ts)
    shuffled = decided(pair, ts, order=rnd)
    assert summary(shuffled) == summary(first)
    for a, b in zip(shuffled.checks, first.checks, strict=True):
        assert close(a.get("p"), b.get("p")) and close(a.get("p_adjusted"), b.get("p_adjusted"))


@given(pairs(), thresholds, st.permutations(range(8)))
@SETTINGS
def test_a_consistent_relabelling_of_items_changes_nothing(pair: Pair, ts: list[str], perm: list[int]) -> None:
    first = decided(pair, ts)
    renamed = decided(pair, ts, names=lambda experiment, item: f"{experiment}-item-{perm[item]:03d}")
    assert summary(renamed) == summary(first)
    for a, b in zip(renamed.checks, first.checks, strict=True):
        assert close(a.get("p"), b.get("p")) and close(a.get("estimate"), b.get("estimate"))


@given(pairs(), st.data())
@SETTINGS
def test_a_trial_listed_twice_is_refused(pair: Pair, data: st.DataObject) -> None:
    rec = record(pair, 1)
    i = data.draw(st.integers(0, len(rec["trials"]) - 1))
    rec["trials"].insert(data.draw(st.integers(0, len(rec["trials"]))), copy.deepcopy(rec["trials"][i]))
    problem = record_problem(rec)
    assert problem is not None and "repeats" in problem and "\n" not in problem
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "twice.json"
        path.write_text(json.dumps(rec), encoding="utf-8")
        assert main([str(path)]) == 4


@given(pairs(), thresholds)
@SETTINGS
def test_errored_trials_never_exit_0(pair: Pair, ts: list[str]) -> None:
    result = decided(pair, ts)
    errored = sum(1 for base, cand in pair.outcomes.values() if cand == "error")
    assert result.errored == errored
    if result.exit_code == 4:  # the compared record refused (no scored trial in a cell): a usage error, never 0
        assert any("--longctx-compare" in e for e in result.errors), result.errors
        return
    if errored:
        assert result.exit_code == 1 and result.run_exit(0) == 1
    else:
        assert result.exit_code in (0, 10, 11)


@given(pair=pairs(), ts=thresholds)
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # capsys: emptied
def test_longctx_gate_decides_as_the_run(capsys: pytest.CaptureFixture[str], pair: Pair, ts: list[str]) -> None:
    run = decided(pair, ts)
    pytest_status = 1 if run.errored else 0  # a run whose trials errored: pytest's "tests failed"
    with tempfile.TemporaryDirectory() as folder:
        paths = [Path(folder) / name for name in ("base.json", "cand.json")]
        for side, path in enumerate(paths):
            path.write_text(json.dumps(record(pair, side)), encoding="utf-8")
        argv = [str(paths[1]), "--compare", str(paths[0]), "--report-dir", str(Path(folder) / "out")]
        code = main([*argv, *(a for t in ts for a in ("--threshold", t))])
        written = Path(folder) / "out" / "longctx.json"
        again = json.loads(written.read_text(encoding="utf-8")) if written.is_file() else None
    capsys.readouterr()
    experiments = {e for e, _, _ in pair.outcomes}
    if any(t.startswith("experiment=") and t.split(":")[0].split("=")[1] not in experiments for t in ts):
        assert code == 4 and again is None  # the run refuses such a selector at start-up, before any request
        return
    if run.refused:  # a baseline the run refuses at start-up (4, before any trial), as longctx-gate does
        assert code == run.exit_code == 4 and again is None
        return
    assert code == run.run_exit(pytest_status) == run.exit_code
    assert again is not None
    gate = again["gate"]
    assert (gate["status"], gate["run_exit_code"], gate["counts"], [c["verdict"] for c in gate["checks"]]) == summary(
        run)


def _worse(pair: Pair, data: st.DataObject) -> Pair:
    right = [k for k, (_, cand) in pair.outcomes.items() if cand == "correct"]
    assume(right)
    flipped = data.draw(st.lists(st.sampled_from(right), min_size=1, unique=True))
    return Pair({k: (base, "incorrect" if k in flipped else cand) for k, (base, cand) in pair.outcomes.items()})


@given(pairs(errors=False, unequal=True), st.sampled_from(THRESHOLDS + EFFECTIVE), st.data())
@SETTINGS
def test_more_wrong_answers_never_turn_a_fail_into_a_pass(pair: Pair, threshold: str, data: st.DataObject) -> None:
    """Every kind and reading, items asked unequally often (the ``size`` parameter as a length axis for the
    effective length): a candidate with more wrong answers is never passed where it failed."""
    before = decided(pair, [threshold], LENGTHS)
    after = decided(_worse(pair, data), [threshold], LENGTHS)
    if before.status == "fail":
        assert after.status in ("fail", "error"), (threshold, before.checks, after.checks)


def test_a_bad_record_is_one_line_not_a_traceback() -> None:
    pair = Pair({("qa", 1, 0): ("correct", "correct"), ("qa", 1, 1): ("correct", "incorrect")})
    rec = record(pair, 1)
    rec["cells"][0]["incorrect"] = 0
    assert record_problem(rec) == ("cells[0] (qa) says incorrect=0 but its trials give 1: the counts disagree "
                                   "with the trials")
    with pytest.raises(UsageError):
        parse_threshold("*:max-drop=2")
