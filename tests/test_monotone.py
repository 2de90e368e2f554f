"""Monotone by construction (issue 38.5), shown by Hypothesis over generated records: one more wrong answer never
raises a pooled lower or upper bound, never lowers the p of 'accuracy <= A' (what ``min=A/shown`` needs small) nor
raises the p of 'accuracy >= A' (what the ``min=A`` alarm needs small): at the ceiling and the floor with items of
one size (the issue's 2,320 trials over 20 questions are such a record), and for items of any sizes and any
answers (``results/envelope.py``; before it, items of sizes 1 and 4 with 0 and 4 right had the lower bound 0.0157,
then 0.0177 with 0 and 3 right). The same for the paired readings (the drop's p-values and bounds: one more wrong
answer of the candidate) and the effective length (point, ``/shown``, the alarm's p). The decision built on them
never turns a fail into a pass: ``tests/test_decision_properties.py``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_longctx.results.clustered import paired_difference
from pytest_longctx.results.effective import effective_length
from pytest_longctx.results.evidence import LengthAxis
from pytest_longctx.results.robust import Shape, pooled_rows

EPS = 1e-9


@st.composite
def records(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    """Item sizes, right answers per item, and an item holding a right answer to turn wrong."""
    size = draw(st.integers(2, 200))
    sizes = [size] * draw(st.integers(2, 30))
    minority = draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes)))
    if draw(st.booleans()):  # the ceiling: one more wrong answer goes to an item with none
        right = [size - int(m) for m in minority]
        if all(minority):
            minority[0], right[0] = False, size
        flip = draw(st.sampled_from([g for g, m in enumerate(minority) if not m]))
    else:  # the floor: one more wrong answer takes an item's only right one
        right = [int(m) for m in minority]
        if not any(minority):
            right[0] = 1
        flip = draw(st.sampled_from([g for g, k in enumerate(right) if k > 0]))
    return sizes, right, flip


@st.composite
def unequal(draw: st.DrawFn) -> tuple[list[int], list[int], int]:
    """Items of any sizes (1 to 60), any right answers, and an item holding a right answer to turn wrong."""
    sizes = draw(st.lists(st.integers(1, 60), min_size=2, max_size=12))
    right = [draw(st.integers(0, n)) for n in sizes]
    if not any(right):
        right[0] = 1
    flip = draw(st.sampled_from([g for g, k in enumerate(right) if k > 0]))
    return sizes, right, flip


@settings(max_examples=400, deadline=None, database=None)
@given(st.one_of(records(), unequal()), st.sampled_from([0.05, 0.0125]), st.floats(0.05, 0.95))
def test_one_more_wrong_answer_never_helps_a_pooled_reading(record: tuple[list[int], list[int], int],
                                                            alpha: float, bar: float) -> None:
    """Items of one size at the ceiling or the floor (:func:`records`), or of any sizes and answers."""
    never_helps(record, alpha, bar)


def never_helps(record: tuple[list[int], list[int], int], alpha: float, bar: float) -> None:
    """Every pooled reading of ``record`` is no better after its ``flip`` item loses a right answer."""
    sizes, right, flip = record
    shape = Shape.of(sizes)
    before = pooled_rows(np.array([right], dtype=float), shape)
    worse = list(right)
    worse[flip] -= 1
    after = pooled_rows(np.array([worse], dtype=float), shape)
    (lo0, hi0), (lo1, hi1) = before.bounds(alpha), after.bounds(alpha)
    assert lo1[0] <= lo0[0] + EPS and hi1[0] <= hi0[0] + EPS
    (ilo0, ihi0), (ilo1, ihi1) = before.interval(0.95), after.interval(0.95)
    assert ilo1[0] <= ilo0[0] + EPS and ihi1[0] <= ihi0[0] + EPS
    assert after.p_above(bar)[0] >= before.p_above(bar)[0] - EPS  # 'shown at least A' no easier
    assert after.p_below(bar)[0] <= before.p_below(bar)[0] + EPS  # 'shown below A' no harder


def test_the_issues_unequal_record_no_longer_narrows() -> None:
    """Items of sizes 1 and 4: 0 and 4 right, then 0 and 3: the lower bound no longer rises (0.0157, then 0.0177)."""
    shape = Shape.of([1, 4])
    lows = [pooled_rows(np.array([right], dtype=float), shape).bounds(0.05)[0][0] for right in ([0, 4], [0, 3])]
    assert lows[1] <= lows[0] + EPS
    assert lows[0] == pytest.approx(0.0157, abs=5e-4)  # the record's own bound: the envelope costs it nothing


@st.composite
def paired_records(draw: st.DrawFn) -> tuple[list[bool], list[bool], list[int], int]:
    """Two runs' answers on items of any sizes (1 to 12 trials), near the ceiling, the floor or anywhere, and a
    trial the candidate answered right to turn wrong."""
    sizes = draw(st.lists(st.integers(1, 12), min_size=2, max_size=8))
    clusters = [g for g, n in enumerate(sizes) for _ in range(n)]
    rate = draw(st.sampled_from([0.03, 0.5, 0.97]))
    answers = st.lists(st.floats(0, 1), min_size=len(clusters), max_size=len(clusters))
    before = [u < rate for u in draw(answers)]
    now = [u < rate for u in draw(answers)]
    if not any(now):
        now[0] = True
    flip = draw(st.sampled_from([i for i, a in enumerate(now) if a]))
    return now, before, clusters, flip


@settings(max_examples=120, deadline=None, database=None)
@given(paired_records(), st.sampled_from([0.0, 0.02, 0.1]))
def test_one_more_wrong_answer_never_helps_a_paired_reading(record: tuple[list[bool], list[bool], list[int], int],
                                                            margin: float) -> None:
    """The candidate's drop: the alarm's p ('drop at most X', small fails) never rises, the non-inferiority p
    ('drop at least X', small passes /shown) never falls, and the difference's bounds never rise."""
    now, before, clusters, flip = record
    worse = list(now)
    worse[flip] = False
    a, b = paired_difference(now, before, clusters), paired_difference(worse, before, clusters)
    assert b.p_drop_over(margin) <= a.p_drop_over(margin) + EPS
    assert b.p_drop_under(margin) >= a.p_drop_under(margin) - EPS
    assert b.low <= a.low + EPS and b.high <= a.high + EPS
    assert b.drop_lower(0.05) >= a.drop_lower(0.05) - EPS and b.drop_upper(0.05) >= a.drop_upper(0.05) - EPS


@st.composite
def length_records(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    """Items asked at some of three lengths (1 to 6 times each: unequal sizes), mostly right, and a right trial to
    turn wrong."""
    trials = []
    for item in range(draw(st.integers(2, 10))):
        for length in (1000, 2000, 4000):
            for k in range(draw(st.integers(0, 6))):
                trials.append({"nodeid": f"t::x[{length}-{item}-{k}]", "experiment": "x", "sample": k,
                               "params": {"context_tokens": length}, "item": f"q{item}", "cluster": f"q{item}",
                               "outcome": "correct" if draw(st.integers(0, 9)) else "incorrect"})
    right = [i for i, t in enumerate(trials) if t["outcome"] == "correct"]
    assume(right)
    return trials, draw(st.sampled_from(right))


@settings(max_examples=80, deadline=None, database=None)
@given(length_records(), st.sampled_from([0.6, 0.85]), st.sampled_from([1000.0, 2000.0, 4000.0]))
def test_one_more_wrong_answer_never_lengthens_an_effective_length(record: tuple[list[dict[str, Any]], int],
                                                                   bar: float, t: float) -> None:
    """The point and ``/shown`` effective lengths never grow, the alarm's p (small fails) never rises."""
    trials, flip = record
    worse = [dict(x) for x in trials]
    worse[flip]["outcome"] = "incorrect"
    a, b = (effective_length(x, LengthAxis("context_tokens"), bar, seed=1, replicates=20) for x in (trials, worse))
    assert a is not None and b is not None
    assert b.tokens <= a.tokens and b.shown(0.05) <= a.shown(0.05)
    assert b.p_below(t) <= a.p_below(t) + EPS
