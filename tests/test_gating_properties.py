"""Property-based tests (Hypothesis) of threshold parsing and of the gate's verdicts.

The gate is what CI trusts to refuse a regressed model, so its rules are checked on generated inputs, not only
on hand-picked ones: parsing round-trips and never crashes; a point check passes exactly when the pooled estimate
meets it; a threshold that matches nothing is an error; the order of trials or thresholds never changes a
verdict; and the statistical readings are ordered as they must be (an alarm that sounds means the good thing
cannot be shown; a stricter bar never passes what a looser one fails). Decision rules' error rates are checked by
seeded simulation in benchmarks/sim_gate.py, not here.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_longctx.errors import UsageError
from pytest_longctx.gate_spec import KINDS, READINGS, Threshold, parse_threshold
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.gate import GateInputs, evaluate
from pytest_longctx.results.thresholds import GATE_ERROR_EXIT_CODE, GATE_EXIT_CODE

EXPERIMENTS = ("qa", "lrt", "demo")
SIZES = (1, 2, 3)
SETTINGS = settings(max_examples=200, deadline=None)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=8)
patterns = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789.*", min_size=1, max_size=8)
rates = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def thresholds(draw: st.DrawFn) -> Threshold:
    selector = tuple(draw(st.lists(st.tuples(names, patterns), max_size=3)))
    kind = draw(st.sampled_from(KINDS))
    value = float(draw(st.integers(1, 10**6))) if kind == "min-effective-length" else draw(rates)
    each = draw(st.booleans()) if kind != "min-effective-length" else False
    t = Threshold("", selector, kind, value, draw(st.sampled_from(READINGS)), each,
                  draw(st.integers(min_value=1, max_value=500)))
    return Threshold(t.canonical(), *(getattr(t, f) for f in ("selector", "kind", "value", "reading", "each", "min_n")))


@given(thresholds())
@SETTINGS
def test_parse_round_trips_the_canonical_spelling(t: Threshold) -> None:
    parsed = parse_threshold(t.canonical())
    assert parsed == t
    assert parsed.canonical() == t.canonical()


@given(st.text(max_size=40))
@SETTINGS
def test_parsing_any_text_gives_a_threshold_or_one_line_usage_error(text: str) -> None:
    try:
        t = parse_threshold(text)
    except UsageError as exc:
        message = str(exc)
        assert message.startswith("--longctx-threshold: ") and "\n" not in message
        return
    assert t.min_n >= 1 and t.kind in KINDS and t.reading in READINGS
    assert t.value > 0 if t.kind == "min-effective-length" else 0.0 <= t.value <= 1.0
    assert parse_threshold(t.canonical()).canonical() == t.canonical()


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    """Distinct cells (experiment x size) with scored trials; items repeat across a cell's sizes (clusters)."""
    keys = draw(st.lists(st.tuples(st.sampled_from(EXPERIMENTS), st.sampled_from(SIZES)), min_size=1, max_size=6,
                         unique=True))
    agg = Aggregator()
    for experiment, size in keys:
        outcomes = draw(st.lists(st.booleans(), min_size=1, max_size=30))
        for sample, right in enumerate(outcomes):
            item = f"{experiment}-q{sample}"
            agg.add({"nodeid": f"{experiment}[{size}-{sample}]", "experiment": experiment, "params": {"size": size},
                     "sample": sample, "item": item, "cluster": item,
                     "outcome": "correct" if right else "incorrect"})
    return {"cells": agg.cells(), "trials": agg.trials}


def _gate(record: dict[str, Any], ts: list[Threshold] | tuple[Threshold, ...]) -> dict[str, Any]:
    copied = copy.deepcopy(record)
    return evaluate(tuple(ts), GateInputs(copied["cells"], copied["trials"]))


selectors = st.lists(st.sampled_from([("experiment", e) for e in (*EXPERIMENTS, "dmeo")]
                                     + [("size", str(s)) for s in (*SIZES, 4)]), max_size=2, unique=True)


def _min(selector: Any, value: float, reading: str = "point") -> Threshold:
    return parse_threshold(Threshold("", tuple(selector), "min", value, reading).canonical())


point_thresholds = st.builds(_min, selectors, rates)


@given(records(), st.lists(point_thresholds, min_size=1, max_size=4, unique_by=lambda t: t.canonical()))
@SETTINGS
def test_point_gate_passes_iff_every_pooled_estimate_meets_its_minimum(record: dict[str, Any],
                                                                       ts: list[Threshold]) -> None:
    gate = _gate(record, ts)
    matched = [[c for c in record["cells"] if t.matches(c["experiment"], c["params"])] for t in ts]
    if any(not m for m in matched):
        assert (gate["status"], gate["exit_code"]) == ("error", GATE_ERROR_EXIT_CODE)
        assert any("matches no cell" in e for e in gate["errors"])
        return
    pooled = [sum(c["correct"] for c in m) / sum(c["n"] for c in m) for m in matched]
    missed = any(p < t.value for t, p in zip(ts, pooled, strict=True))
    assert gate["errors"] == []
    assert (gate["status"], gate["exit_code"]) == (("fail", GATE_EXIT_CODE) if missed else ("pass", 0))
    assert gate["counts"]["pass"] + gate["counts"]["fail"] == len(ts)


@given(records(), st.lists(st.builds(_min, selectors, rates, st.sampled_from(READINGS)), min_size=1, max_size=4,
                           unique_by=lambda t: t.canonical()), st.randoms())
@SETTINGS
def test_gate_ignores_the_order_of_trials_and_thresholds(record: dict[str, Any], ts: list[Threshold],
                                                         rnd: Any) -> None:
    gate = _gate(record, ts)
    shuffled = copy.deepcopy(record)
    rnd.shuffle(shuffled["cells"])
    rnd.shuffle(shuffled["trials"])
    order = list(range(len(ts)))
    rnd.shuffle(order)
    other = _gate(shuffled, [ts[i] for i in order])
    assert (other["status"], other["counts"], other["exit_code"]) == (gate["status"], gate["counts"],
                                                                     gate["exit_code"])
    assert sorted(other["errors"]) == sorted(gate["errors"])
    for i, j in enumerate(order):
        assert other["checks"][i]["verdict"] == gate["checks"][j]["verdict"]
        assert other["checks"][i].get("p") == gate["checks"][j].get("p")


@given(records(), rates, rates)
@SETTINGS
def test_readings_are_ordered(record: dict[str, Any], a: float, b: float) -> None:
    """An alarm that sounds means the bar cannot be shown met; a higher bar never passes what a lower one fails."""
    low, high = sorted((a, b))
    for reading in READINGS:
        verdicts = [_gate(record, [_min((), v, reading)])["checks"][0]["verdict"] for v in (low, high)]
        assert not (verdicts[0] == "fail" and verdicts[1] == "pass"), (reading, low, high)
    alarm = _gate(record, [_min((), a, "alarm")])["checks"][0]["verdict"]
    shown = _gate(record, [_min((), a, "shown")])["checks"][0]["verdict"]
    if alarm == "fail":
        assert shown == "fail"
    if shown == "pass":
        assert alarm == "pass"


@given(records(), st.lists(st.builds(_min, selectors, rates, st.sampled_from(READINGS)), min_size=1, max_size=4))
@SETTINGS
def test_a_repeated_threshold_is_one_check(record: dict[str, Any], ts: list[Threshold]) -> None:
    """The same check given twice (or spelled two ways) is one alarm: Holm counts it once."""
    once = _gate(record, ts)
    respelled = [parse_threshold(t.canonical().replace("/point", "/point@n=1")) for t in ts]
    twice = _gate(record, [*ts, *respelled, *ts])
    assert len(twice["checks"]) == len({t.canonical() for t in ts}) == len(once["checks"])
    assert [c["verdict"] for c in twice["checks"]] == [c["verdict"] for c in once["checks"]]
    assert [c.get("p_adjusted") for c in twice["checks"]] == [c.get("p_adjusted") for c in once["checks"]]
