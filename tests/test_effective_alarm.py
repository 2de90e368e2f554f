"""``min-effective-length=T`` as an alarm that holds its level (issue 38.4): Holm's adjusted smallest of the
clustered one-sided tests at the tested lengths at or below T; a seeded slice of ``benchmarks/sim_effective.py``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from pytest_longctx.results.clustered import pooled_accuracy
from pytest_longctx.results.effective import effective_length
from pytest_longctx.results.stats import wilson
from tests.test_effective import MEASURED, TOKENS, qa


def _sim() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "sim_effective.py"
    spec = importlib.util.spec_from_file_location("longctx_sim_effective", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


S = _sim()


def test_the_alarms_p_is_holm_over_the_lengths_at_or_below_t() -> None:
    trials = qa({32000: 0.9, 64000: 0.8, 128000: 0.6})
    found = effective_length(trials, TOKENS, 0.85, seed=1)
    assert found is not None and found.p_levels is not None
    singles = []
    for nominal in (32000, 64000, 128000):
        at = [t for t in trials if t["params"]["context_tokens"] == nominal]
        singles.append(pooled_accuracy([t["outcome"] == "correct" for t in at], [t["cluster"] for t in at])
                       .p_below(0.85))
    assert found.p_levels == pytest.approx(singles)
    assert found.p_below(MEASURED[64000]) == pytest.approx(min(1.0, 2 * min(singles[:2])))
    assert found.p_below(MEASURED[128000]) == pytest.approx(min(1.0, 3 * min(singles)))
    assert found.p_below(1000) == 1.0  # no tested length that short: nothing shown below it


@pytest.mark.parametrize("name", ["lrt", "qa blocks", "qa full"])
def test_every_length_just_above_the_bar_fails_at_most_8_percent(name: str) -> None:
    lay = next(lay for lay in S.layouts() if lay.name == name)
    rng = np.random.default_rng([38, len(lay.asked)])
    right = S.draw(rng, lay, 1500, np.full(len(lay.tokens), 0.86), 0.5)
    fails = S.alarm(right, lay, float(lay.tokens[-1]))
    assert wilson(int(fails.sum()), len(fails))[1] <= 0.08, fails.mean()


def test_a_length_that_falls_off_is_seen() -> None:
    lay = next(lay for lay in S.layouts() if lay.name == "qa blocks")
    acc = np.full(4, 0.86)
    acc[2] = 0.75
    right = S.draw(np.random.default_rng(39), lay, 400, acc, 0.3)
    assert S.alarm(right, lay, float(lay.tokens[-1])).mean() > 0.9
