"""The ranking of several models (results/ranking.py): places from simultaneous paired intervals, checked on known
data and by seeded simulation over a family of data models (false claims at most alpha, real gaps found)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pytest_longctx.results.ranking import rank, simultaneous_level


def trials(outcomes: list[list[bool]]) -> list[dict[str, Any]]:
    """Trial records of one model: ``outcomes[item][cell]``; each item is its own cluster, asked in every cell."""
    return [{"experiment": "x", "params": {"cell": c}, "sample": i, "item": f"q{i}", "cluster": f"q{i}",
             "outcome": "correct" if right else "incorrect", "nodeid": f"t[{c}-{i}]"}
            for i, row in enumerate(outcomes) for c, right in enumerate(row)]


def test_simultaneous_level_is_bonferroni_over_the_pairs() -> None:
    assert simultaneous_level(2, 0.05) == pytest.approx(0.95)
    assert simultaneous_level(3, 0.05) == pytest.approx(1 - 0.05 / 3)
    assert simultaneous_level(5, 0.1) == pytest.approx(1 - 0.1 / 10)


def test_nested_models_are_ranked_in_order_and_ties_share_places() -> None:
    items = 200
    u = [(i + 0.5) / items for i in range(items)]  # item difficulty: right iff u < accuracy
    good, mid, bad = ([[x < p] for x in u] for p in (0.95, 0.80, 0.60))
    result = rank({"good": trials(good), "mid": trials(mid), "bad": trials(bad), "mid2": trials(mid)}, 0.05)
    places = {m: p["text"] for m, p in result["places"].items()}
    assert places == {"good": "1", "mid": "2-3", "mid2": "2-3", "bad": "4"}
    tied = next(p for p in result["pairs"] if {p["a"], p["b"]} == {"mid", "mid2"})
    assert not tied["separated"] and tied["diff"] == 0 and tied["pairs"] == items
    assert result["level"] == pytest.approx(1 - 0.05 / 6)


def test_models_that_share_no_item_are_not_separated() -> None:
    a = trials([[True]] * 30)
    b = [{**t, "params": {"cell": 9}} for t in trials([[False]] * 30)]  # another cell: nothing pairs
    result = rank({"a": a, "b": b}, 0.05)
    assert result["pairs"][0]["pairs"] == 0 and result["places"]["a"]["text"] == "1-2"


def simulate(rng: np.random.Generator, accuracies: tuple[float, ...], items: int, cells: int,
             rho: float) -> dict[str, list[dict[str, Any]]]:
    """Models that answer like versions of one model: an item's difficulty decides a share ``rho`` of its
    prompts (its fate shared across cells), a fresh draw the rest; some items are asked in fewer cells."""
    difficulty = rng.random(items)
    asked = rng.integers(1, cells + 1, size=items)  # unequal cluster sizes
    out = {}
    for m, p in enumerate(accuracies):
        shared = rng.random((items, cells)) < rho
        u = np.where(shared, difficulty[:, None], rng.random((items, cells)))
        right = u < p
        out[f"m{m}"] = [t for t in trials([[bool(right[i, c]) for c in range(asked[i])] for i in range(items)])]
    return out


def false_claims(result: dict[str, Any], accuracies: tuple[float, ...]) -> bool:
    """Whether any pair is separated where the models are equal, or ordered the wrong way round."""
    truth = {f"m{m}": p for m, p in enumerate(accuracies)}
    for pair in result["pairs"]:
        if pair["better"] is None:
            continue
        other = pair["b"] if pair["better"] == pair["a"] else pair["a"]
        if truth[pair["better"]] <= truth[other]:
            return True
    return False


#: (accuracies, items, cells, rho): equal models near 0.5 and near the ceiling, few and many items, fates shared
#: across cells or not, and a real gap beside two equal models.
FAMILY = [
    ((0.5, 0.5, 0.5), 30, 4, 0.6),
    ((0.95, 0.95, 0.95), 60, 4, 0.8),
    ((0.85, 0.85, 0.80), 40, 5, 0.5),
    ((0.7, 0.7, 0.7, 0.7), 100, 2, 0.0),
    ((0.9, 0.9, 0.6), 25, 6, 1.0),
]


@pytest.mark.parametrize(("accuracies", "items", "cells", "rho"), FAMILY)
def test_false_claims_stay_under_alpha(accuracies: tuple[float, ...], items: int, cells: int, rho: float) -> None:
    """Family-wise: a run claims an order that is not true (or separates equal models) at most alpha of the time
    (plus Monte Carlo slack of 3 standard errors)."""
    rng = np.random.default_rng(31 + items + cells)
    runs, alpha = 300, 0.05
    wrong = sum(false_claims(rank(simulate(rng, accuracies, items, cells, rho), alpha), accuracies)
                for _ in range(runs))
    assert wrong / runs <= alpha + 3 * (alpha * (1 - alpha) / runs) ** 0.5, wrong


def test_a_real_gap_is_found() -> None:
    """Power: 150 items in 3 cells, a 10-point gap between versions of one model is separated in most runs."""
    rng = np.random.default_rng(5)
    accuracies = (0.9, 0.8)
    found = sum(rank(simulate(rng, accuracies, 150, 3, 0.7), 0.05)["places"]["m0"]["text"] == "1"
                for _ in range(100))
    assert found >= 80, found
