"""Controller-side aggregation: cells, counts, intervals, and an order that does not depend on timing."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from pytest_longctx.results.aggregate import RECORD_KEY, Aggregator, cell_key, records_of, trial_key
from pytest_longctx.results.stats import wilson


def _rec(experiment: str, params: dict[str, Any], sample: int, outcome: str, **extra: Any) -> dict[str, Any]:
    ids = "-".join(str(v) for v in params.values())
    return {"nodeid": f"test_{experiment}.py::test[{ids}-s{sample}]", "experiment": experiment, "params": params,
            "sample": sample, "outcome": outcome, "calls": 1, "cache_hits": 0, "input_tokens": 100,
            "output_tokens": 5, **extra}


def _records() -> list[dict[str, Any]]:
    out = []
    for lines in (100, 5, 10):
        for sample in range(4):
            outcome = "correct" if sample < 2 else ("incorrect" if sample == 2 else "error")
            out.append(_rec("lrt", {"lines": lines, "shuffle": "none"}, sample, outcome))
    out += [_rec("demo", {"filler": 40}, s, "correct") for s in range(3)]
    out += [_rec("qa", {}, s, "error", input_tokens=0, output_tokens=0, calls=0) for s in range(2)]
    return out


def test_cell_counts_accuracy_and_interval() -> None:
    agg = Aggregator()
    for record in _records():
        agg.add(record)
    cell = next(c for c in agg.cells() if c["experiment"] == "lrt" and c["params"]["lines"] == 10)
    assert cell["key"] == 'lrt{"lines":10,"shuffle":"none"}'
    assert (cell["correct"], cell["incorrect"], cell["errors"], cell["n"]) == (2, 1, 1, 3)
    assert cell["accuracy"] == pytest.approx(2 / 3)  # errors are not scored
    assert (cell["ci_low"], cell["ci_high"]) == wilson(2, 3)
    assert (cell["input_tokens"], cell["output_tokens"]) == (400, 20)

    only_errors = next(c for c in agg.cells() if c["experiment"] == "qa")
    assert (only_errors["n"], only_errors["errors"], only_errors["accuracy"]) == (0, 2, 0.0)
    assert (only_errors["ci_low"], only_errors["ci_high"]) == (0.0, 1.0)


def test_cells_are_ordered_by_experiment_then_natural_params() -> None:
    agg = Aggregator()
    for record in _records():
        agg.add(record)
    assert [(c["experiment"], c["params"]) for c in agg.cells()] == [
        ("demo", {"filler": 40}),
        ("lrt", {"lines": 5, "shuffle": "none"}),
        ("lrt", {"lines": 10, "shuffle": "none"}),
        ("lrt", {"lines": 100, "shuffle": "none"}),
        ("qa", {}),
    ]


def test_mixed_param_types_sort_without_error() -> None:
    agg = Aggregator()
    for i, value in enumerate([10, "block-4", 2.5, None, True, [1, 2], "none", 3]):
        agg.add(_rec("x", {"shuffle": value}, 0, "correct", nodeid=f"t{i}"))
    values = [c["params"]["shuffle"] for c in agg.cells()]
    assert values[:3] == [2.5, 3, 10]  # numbers first, numerically
    assert len(values) == 8


@pytest.mark.parametrize("seed", range(5))
def test_order_does_not_depend_on_arrival(seed: int) -> None:
    """Workers report in any order; the record must not show it."""
    reference = Aggregator()
    for record in _records():
        reference.add(record)
    shuffled = _records()
    random.Random(seed).shuffle(shuffled)
    agg = Aggregator()
    for record in shuffled:
        agg.add(record)
    assert agg.trials == reference.trials
    assert agg.cells() == reference.cells()
    assert agg.usage() == reference.usage()


def test_trials_order_is_experiment_params_sample() -> None:
    agg = Aggregator()
    for record in _records():
        agg.add(record)
    trials = agg.trials
    lrt = [(t["params"]["lines"], t["sample"]) for t in trials if t["experiment"] == "lrt"]
    for _lines, group in itertools.groupby(lrt, key=lambda p: p[0]):
        assert [s for _, s in group] == [0, 1, 2, 3]
    assert [t["experiment"] for t in trials] == sorted(t["experiment"] for t in trials)


def test_a_rerun_test_replaces_its_record() -> None:
    agg = Aggregator()
    agg.add(_rec("demo", {}, 0, "error"))
    agg.add(_rec("demo", {}, 0, "correct"))  # e.g. --reruns, or a report replayed twice
    [cell] = agg.cells()
    assert (cell["correct"], cell["errors"], cell["n"]) == (1, 0, 1)
    assert agg.usage()["trials"] == 1


def test_usage_totals() -> None:
    agg = Aggregator()
    for record in _records():
        agg.add(record)
    assert agg.usage() == {"trials": 17, "calls": 15, "cache_hits": 0, "input_tokens": 1500, "output_tokens": 75,
                           "paid_input_tokens": 0, "paid_output_tokens": 0, "cache_creation_input_tokens": 0,
                           "cache_read_input_tokens": 0, "billed_input_tokens": 0}


def test_records_of_and_add_report() -> None:
    good = _rec("demo", {}, 0, "correct")
    props: list[tuple[str, object]] = [("other", {"x": 1}), (RECORD_KEY, good), (RECORD_KEY, "not a dict"),
                                       ("longctx_plan", {"key": "k"})]
    assert records_of(props) == [good]
    agg = Aggregator()
    agg.add_report(props)
    assert agg.trials == [good]


def test_keys_are_canonical() -> None:
    assert cell_key("lrt", {"b": 1, "a": "x"}) == cell_key("lrt", {"a": "x", "b": 1}) == 'lrt{"a":"x","b":1}'
    assert cell_key("lrt", {}) == "lrt{}"
    assert cell_key("lrt", {"a": 1}) != cell_key("lrt", {"a": "1"})
    assert trial_key({"experiment": "qa", "params": {"n": 2}, "sample": 7}) == 'qa{"n":2}#7'
