"""Power statements: the detectable drop checked by seeded simulation of the gate's own test, samples for a drop,
assumptions read from a compared run, and the plan's statements end to end."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from pytest_longctx.gate_spec import parse_threshold
from pytest_longctx.results.clustered import paired_difference
from pytest_longctx.results.evidence import Evidence
from pytest_longctx.results.power import (
    Assumptions,
    Design,
    PlanEvidence,
    assumptions_from,
    detectable_drop,
    plan_power,
    samples_for,
)


def simulated_power(drop: float, items: int, per_item: int, rho: float, runs: int, seed: int,
                    alpha: float = 0.05) -> float:
    """How often the gate's pooled alarm (``p_drop_over(0) < alpha``) fires for two versions of one model: shared
    difficulty, the candidate ``drop`` worse, 2% of answers flipped in each run, trials of an item sharing their
    draws with correlation ``rho`` (the model the plan's formula assumes)."""
    rng = np.random.default_rng(seed)
    cluster = np.repeat(np.arange(items), per_item)
    hits = 0

    def latent() -> np.ndarray:
        shared = rng.random(items)[cluster]
        return np.where(rng.random(cluster.size) < math.sqrt(rho), shared, rng.random(cluster.size))

    for _ in range(runs):
        u = latent()
        before = (u < 0.85) ^ (latent() < 0.02)
        after = (u < 0.85 - drop) ^ (latent() < 0.02)
        diff = paired_difference(after.tolist(), before.tolist(), cluster.tolist())
        hits += diff.p_drop_over(0.0) < alpha
    return hits / runs


@pytest.mark.parametrize(("items", "per_item", "rho"), [(400, 1, 0.0), (40, 10, 0.5)])
def test_detectable_drop_is_detected_about_80_percent_of_the_time(items: int, per_item: int, rho: float) -> None:
    design = Design.of([str(i) for i in range(items) for _ in range(per_item)])
    # In this model a drop falls on the items whose shared draw lies in the band: the regressions share their
    # item's fate as the answers do, so the differences' correlation is rho too.
    drop = detectable_drop(design, 0.05, Assumptions(0.85, 2 * 0.02 * 0.98, rho, diff_icc=rho))
    assert drop is not None and 0 < drop < 0.3
    power = simulated_power(drop, items, per_item, rho, runs=400, seed=items)
    assert 0.8 - 0.1 <= power <= 0.8 + 0.1, (drop, power)  # 400 runs: a binomial sd of 0.02; the formula is approximate
    assert simulated_power(drop / 2, items, per_item, rho, runs=200, seed=1) < 0.6


def test_samples_for_a_drop_inverts_the_detectable_drop() -> None:
    design = Design.of([str(i) for i in range(400)])
    a = Assumptions()
    drop = detectable_drop(design, 0.05, a)
    assert drop is not None
    assert samples_for(drop, design, 20, 0.05, a) in (19, 20, 21)
    assert samples_for(drop / 2, design, 20, 0.05, a) > 60  # half the drop: about four times the samples
    assert samples_for(0.9, design, 20, 0.05, a) is None  # more than the accuracy there is to lose
    few = Design.of([str(i % 20) for i in range(2000)])  # 20 items asked 100 times each
    # a diffuse drop's power follows the differences' correlation, not the answers'
    clustered, spread = (detectable_drop(few, 0.05, Assumptions(diff_icc=r)) for r in (0.9, 0.0))
    assert clustered is not None and spread is not None and clustered > 2 * spread
    assert detectable_drop(few, 0.05, Assumptions(icc=0.9)) == detectable_drop(few, 0.05, Assumptions(icc=0.0))


def test_assumptions_from_a_compared_run() -> None:
    trials = [{"experiment": "qa", "outcome": "correct" if q < 7 else "incorrect", "cluster": f"q{q}"}
              for q in range(10) for _ in range(5)]
    found = assumptions_from({"trials": trials}, "qa")
    assert found.accuracy == pytest.approx(0.7) and found.icc == pytest.approx(1.0)
    assert found.discordance == Assumptions().discordance and "from the compared run" in found.source
    compared = {"trials": trials, "comparison": {"experiments": {"qa": {"pairs": 50, "regressed": 4, "improved": 1}}}}
    assert assumptions_from(compared, "qa").discordance == pytest.approx(0.1)
    assert assumptions_from(None, "qa") == Assumptions() == assumptions_from({"trials": trials}, "lrt")


def test_plan_evidence_counts_items_per_cell() -> None:
    evidence = PlanEvidence()
    for cell in range(4):
        for sample in range(5):
            evidence.add({"cached": False, "input_tokens": 100, "max_tokens": 10,
                          "trial": {"experiment": "qa", "params": {"cell": cell}, "item": f"q{sample}",
                                    "sample": sample, "nodeid": f"n{cell}-{sample}"}})
            evidence.add({"cached": False, "input_tokens": 50, "max_tokens": 5,
                          "trial": {"experiment": "lrt", "params": {"cell": cell}, "item": f"f{cell}-{sample}",
                                    "sample": sample, "nodeid": f"m{cell}-{sample}"}})
    by_item = {"qa": True, "lrt": True}.__getitem__
    qa = evidence.design(lambda e, _p: e == "qa", by_item)
    assert (qa.trials, qa.clusters, qa.per_cluster) == (20, 5, 4.0)
    alone = evidence.design(lambda e, _p: e == "qa", lambda _e: False)
    assert (alone.trials, alone.clusters, alone.per_cluster) == (20, 20, 1.0)
    assert evidence.samples("qa") == 5 and evidence.tokens("lrt") == (1000, 100)
    power = plan_power(evidence, {"qa": Evidence("qa"), "lrt": Evidence("lrt")},
                       [parse_threshold("*:max-drop=0"), parse_threshold("experiment=qa:0.5/shown")], 0.05, None,
                       0.05, lambda i, o: (i * 3 + o * 15) / 1e6)
    assert power["alpha_text"] == "alpha 0.05" and set(power["experiments"]) == {"lrt", "qa"}
    assert power["experiments"]["qa"]["clusters"] == 5 and power["experiments"]["lrt"]["clusters"] == 20
    lrt = power["experiments"]["lrt"]
    assert lrt["detect"]["samples"] > 5 and lrt["detect"]["cost_usd"] == pytest.approx(
        (1000 * 3 + 100 * 15) / 1e6 * lrt["detect"]["samples"] / 5, abs=0.01)
    assert [t["threshold"] for t in power["thresholds"]] == ["*:max-drop=0", "experiment=qa:0.5/shown"]


PLANNED = '''
import pytest

from pytest_longctx import Request

pytestmark = pytest.mark.longctx("planned")


@pytest.mark.parametrize("size", [1, 2, 3])
async def test_planned(longctx, size):
    longctx.record(item=f"q{longctx.sample}")
    await longctx.ask(Request.user("x" * size * 100, max_tokens=8))
'''


def write_planned(pytester: pytest.Pytester) -> None:
    """An experiment of one question a sample asked at three sizes, declared clustered by question."""
    pytester.makeconftest('''
from pytest_longctx import Evidence


def pytest_longctx_evidence():
    return [Evidence("planned", "item", "question", "one question in every size")]
''')
    pytester.makepyfile(test_planned=PLANNED)


def test_a_plan_states_what_it_could_detect(longctx_runner: Any) -> None:
    write_planned(longctx_runner.pytester)
    run = longctx_runner.run("--longctx-plan", "true", "--longctx-samples", "30", "--longctx-detect", "0.05",
                             "--longctx-threshold", "*:max-drop=0", model="anthropic/claude-sonnet-5")
    out = run.result.stdout.str()
    assert run.ret == 0, out
    power = run.plan_record["plan"]["power"]
    planned = power["experiments"]["planned"]
    assert (planned["trials"], planned["clusters"], planned["samples"]) == (90, 30, 30)
    assert planned["drop"] is not None and planned["detect"]["samples"] > 30
    assert "power: the smallest drop detected with power 0.8" in out
    assert "planned: 90 trials, 30 independent items (3.0 trials an item): a drop of" in out
    assert f"needs --longctx-samples {planned['detect']['samples']:,} (now 30)" in out


def _record(outcomes: list[bool], clusters: list[str]) -> dict[str, Any]:
    from pytest_longctx.results.aggregate import Aggregator

    agg = Aggregator()
    for i, (right, cluster) in enumerate(zip(outcomes, clusters, strict=True)):
        agg.add({"nodeid": f"n{i}", "experiment": "qa", "params": {"cell": i % 4}, "sample": i, "item": cluster,
                 "cluster": cluster, "outcome": "correct" if right else "incorrect"})
    return {"schema": "pytest-longctx/run", "version": 2, "settings": {"seed": 0, "model": "m"},
            "cells": agg.cells(), "trials": agg.trials}


def test_what_a_run_could_detect_never_comes_from_the_candidates_difference() -> None:
    """Against one baseline, a candidate that lost 75 points and one that lost nothing get the same statement:
    it describes the design and the baseline."""
    from pytest_longctx.results.compare import compare
    from pytest_longctx.results.overview import overview

    rng = np.random.default_rng(3)
    clusters = [f"q{i % 40}" for i in range(160)]
    base = _record((rng.random(160) < 0.85).tolist(), clusters)
    said = []
    for right in (rng.random(160) < 0.1, rng.random(160) < 0.85):
        now = _record(right.tolist(), clusters)
        comparison, _ = compare(now["cells"], now["trials"], base, now["settings"])
        found = overview(now["trials"], {"qa": Evidence("qa", "item")}, comparison=comparison, alpha=0.05)
        said.append(found["qa"]["detectable"])
    assert said[0] == said[1] and said[0]["drop"] is not None and said[0]["concentrated"]["items"] >= 2


def test_a_compared_baseline_gives_the_disagreements_correlation() -> None:
    trials = [{"experiment": "qa", "outcome": "correct", "cluster": f"q{q}"} for q in range(10) for _ in range(5)]
    compared = {"trials": trials, "comparison": {"experiments": {"qa": {"pairs": 50, "regressed": 4, "improved": 1,
                                                                         "deff": 2.0}}}}
    found = assumptions_from(compared, "qa")
    assert found.diff_icc == pytest.approx((2.0 - 1) / (5 - 1)) and "from its own comparison" in found.source
