"""Property-based tests (Hypothesis) of threshold parsing and of the gate's verdicts.

The gate is what CI trusts to refuse a regressed model, so its rules are checked on generated
inputs, not only on hand-picked ones: parsing round-trips and never crashes, a gate passes exactly
when every matched cell meets its spec, a threshold that matches nothing is an error, and the order
of cells or thresholds never changes the verdict.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_longctx.errors import UsageError
from pytest_longctx.results.aggregate import cell_key
from pytest_longctx.results.gating import GATE_ERROR_EXIT_CODE, GATE_EXIT_CODE, Threshold, evaluate, parse_threshold

EXPERIMENTS = ("qa", "lrt", "demo")
SIZES = (1, 2, 3)
SETTINGS = settings(max_examples=200, deadline=None)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=8)
patterns = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789.*", min_size=1, max_size=8)
rates = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
alphas = st.floats(min_value=0.0, max_value=1.0, allow_nan=False, exclude_min=True, exclude_max=True)


@st.composite
def thresholds(draw: st.DrawFn) -> Threshold:
    selector = tuple(draw(st.lists(st.tuples(names, patterns), max_size=3)))
    kind = draw(st.sampled_from(("min", "max-drop")))
    alpha = draw(st.none() | alphas) if kind == "max-drop" else None
    t = Threshold("", selector, kind, draw(rates), alpha, draw(st.integers(min_value=1, max_value=500)))
    return Threshold(t.canonical(), *(getattr(t, f) for f in ("selector", "kind", "value", "alpha", "min_n")))


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
    assert 0.0 <= t.value <= 1.0 and t.min_n >= 1 and t.kind in ("min", "max-drop")
    assert parse_threshold(t.canonical()).canonical() == t.canonical()


@st.composite
def cells(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Distinct cells (experiment x size), each with at least one scored trial."""
    keys = draw(st.lists(st.tuples(st.sampled_from(EXPERIMENTS), st.sampled_from(SIZES)), min_size=1, max_size=9,
                         unique=True))
    out = []
    for experiment, size in keys:
        n = draw(st.integers(min_value=1, max_value=50))
        correct = draw(st.integers(min_value=0, max_value=n))
        params = {"size": size}
        out.append({"key": cell_key(experiment, params), "experiment": experiment, "params": params,
                    "n": n, "correct": correct, "accuracy": correct / n})
    return out


selectors = st.lists(st.sampled_from([("experiment", e) for e in (*EXPERIMENTS, "dmeo")]
                                     + [("size", str(s)) for s in (*SIZES, 4)]), max_size=2, unique=True)
min_thresholds = st.builds(lambda sel, value: parse_threshold(Threshold("", tuple(sel), "min", value).canonical()),
                           selectors, rates)


@given(cells(), st.lists(min_thresholds, min_size=1, max_size=4))
@SETTINGS
def test_gate_passes_iff_every_matched_cell_meets_its_minimum(run: list[dict[str, Any]],
                                                              ts: list[Threshold]) -> None:
    gate = evaluate(copy.deepcopy(run), tuple(ts), None)
    matched = [[c for c in run if t.matches(c["experiment"], c["params"])] for t in ts]
    if any(not m for m in matched):
        assert (gate["status"], gate["exit_code"]) == ("error", GATE_ERROR_EXIT_CODE)
        assert any("matches no cell" in e for e in gate["errors"])
        return
    missed = any(c["accuracy"] < t.value for t, m in zip(ts, matched, strict=True) for c in m)
    assert gate["errors"] == []
    assert (gate["status"], gate["exit_code"]) == (("fail", GATE_EXIT_CODE) if missed else ("pass", 0))
    assert gate["counts"]["pass"] + gate["counts"]["fail"] == sum(len(m) for m in matched)


@given(cells(), st.lists(min_thresholds, min_size=1, max_size=4), st.randoms())
@SETTINGS
def test_gate_ignores_the_order_of_cells_and_thresholds(run: list[dict[str, Any]], ts: list[Threshold],
                                                        rnd: Any) -> None:
    gate = evaluate(copy.deepcopy(run), tuple(ts), None)
    shuffled_cells, shuffled_ts = copy.deepcopy(run), list(ts)
    rnd.shuffle(shuffled_cells)
    rnd.shuffle(shuffled_ts)
    other = evaluate(shuffled_cells, tuple(shuffled_ts), None)
    assert (other["status"], other["counts"], other["exit_code"]) == (gate["status"], gate["counts"],
                                                                     gate["exit_code"])
    assert sorted(other["errors"]) == sorted(gate["errors"])


@given(cells(), st.data())
@SETTINGS
def test_max_drop_fails_iff_a_cell_dropped_too_far_and_errors_without_a_shared_cell(run: list[dict[str, Any]],
                                                                                    data: st.DataObject) -> None:
    limit = data.draw(rates, label="max-drop")
    t = parse_threshold(f"*:max-drop={limit!r}")
    shared = data.draw(st.lists(st.sampled_from([c["key"] for c in run]), unique=True), label="shared")
    baselines: dict[str, dict[str, Any]] = {}
    for key in shared:
        n = data.draw(st.integers(min_value=0, max_value=50))
        accuracy = data.draw(rates) if n else 0.0
        baselines[key] = {"key": key, "n": n, "accuracy": accuracy, "errors": 0 if n else 3}
    gate = evaluate(copy.deepcopy(run), (t,), baselines, compared_with="base.json")
    if not shared:
        assert gate["status"] == "error" and any("shares no" in e for e in gate["errors"])
        return
    if any(baselines[k]["n"] == 0 for k in shared):  # a baseline cell without scored trials is never 0.0
        assert gate["status"] == "error" and any("no scored trials" in e for e in gate["errors"])
        return
    by_key = {c["key"]: c for c in run}
    dropped = any(baselines[k]["accuracy"] - by_key[k]["accuracy"] > limit + 1e-12 for k in shared)
    assert gate["status"] == ("fail" if dropped else "pass")
    assert gate["counts"]["no-baseline"] == len(run) - len(shared)  # new cells are reported, never failed
