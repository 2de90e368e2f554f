"""Statistics on plain values: Wilson intervals and the exact McNemar test."""

from __future__ import annotations

import math

import pytest

from pytest_longctx.results.stats import binom_two_sided, mcnemar_exact, wilson


@pytest.mark.parametrize(("correct", "n", "low", "high"), [
    # 95% Wilson score intervals as published (e.g. Newcombe 1998, Table I; R's prop.test(correct = FALSE)).
    (0, 10, 0.0, 0.2775),
    (1, 10, 0.0179, 0.4042),
    (5, 10, 0.2366, 0.7634),
    (9, 10, 0.5958, 0.9821),
    (10, 10, 0.7225, 1.0),
    (81, 263, 0.2553, 0.3662),
    (50, 100, 0.4038, 0.5962),
    (15, 148, 0.0624, 0.1605),
])
def test_wilson_known_values(correct: int, n: int, low: float, high: float) -> None:
    got = wilson(correct, n)
    assert got == pytest.approx((low, high), abs=5e-5)


def test_wilson_edges() -> None:
    assert wilson(0, 0) == (0.0, 1.0)  # no scored trials: nothing is known
    assert wilson(3, -1) == (0.0, 1.0)
    low, high = wilson(0, 1)
    assert low == 0.0 and 0 < high < 1
    low, high = wilson(1, 1)
    assert 0 < low < 1 and high == 1.0
    for n in (1, 7, 40, 1000):  # exact bounds at the ends, not rounding noise
        assert wilson(0, n)[0] == 0.0
        assert wilson(n, n)[1] == 1.0


@pytest.mark.parametrize("n", [1, 2, 7, 40, 1000])
def test_wilson_contains_the_estimate_and_is_symmetric(n: int) -> None:
    for correct in range(0, n + 1, max(1, n // 10)):
        low, high = wilson(correct, n)
        assert 0.0 <= low <= correct / n <= high <= 1.0
        mirror_low, mirror_high = wilson(n - correct, n)
        assert (low, high) == pytest.approx((1 - mirror_high, 1 - mirror_low), abs=1e-12)


def test_wilson_narrows_with_more_trials() -> None:
    widths = [high - low for low, high in (wilson(n // 2, n) for n in (10, 40, 160, 640))]
    assert widths == sorted(widths, reverse=True)
    assert widths[1] / widths[3] == pytest.approx(4, rel=0.05)  # width ~ 1/sqrt(n) once n is not tiny


def test_wilson_other_confidence_level() -> None:
    z99 = 2.5758293035489
    low95, high95 = wilson(5, 10)
    low99, high99 = wilson(5, 10, z=z99)
    assert low99 < low95 and high99 > high95


@pytest.mark.parametrize(("regressed", "improved", "p"), [
    (0, 0, 1.0),          # no discordant pairs: no evidence
    (3, 3, 1.0),          # balanced
    (0, 5, 0.0625),       # 2 * 0.5**5
    (5, 0, 0.0625),       # two-sided: symmetric
    (6, 0, 0.03125),      # 2 * 0.5**6: the smallest all-one-way count significant at 0.05
    (1, 9, 0.021484375),  # 2 * (1 + 10) / 1024
    (2, 8, 0.109375),     # 2 * (1 + 10 + 45) / 1024
    (10, 20, 0.0987),     # R: mcnemar.exact / binom.test(10, 30)
])
def test_mcnemar_exact_known_values(regressed: int, improved: int, p: float) -> None:
    assert mcnemar_exact(regressed, improved) == pytest.approx(p, abs=5e-5)


def test_mcnemar_is_exact_binomial() -> None:
    for b in range(0, 12):
        for c in range(0, 12):
            n = b + c
            k = min(b, c)
            expected = 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
            assert mcnemar_exact(b, c) == pytest.approx(expected)
            assert 0.0 < mcnemar_exact(b, c) <= 1.0


def test_binom_two_sided_edges() -> None:
    assert binom_two_sided(0, 0) == 1.0
    assert binom_two_sided(5, 10) == 1.0
    assert binom_two_sided(0, 1) == 1.0
    assert binom_two_sided(10, 10) == binom_two_sided(0, 10) == pytest.approx(2 / 1024)
