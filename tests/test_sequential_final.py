"""The sequential gate's final fixed-design look: each alarm's level split between the anytime e-process and one
look at the end of the design by the fixed gate's own paired test.

Its false alarms at no change by seeded simulation over the family of designs (Wilson bound), the final look
deciding an alarm the e-process did not settle (object and vectorised rule alike), the fixed test of the plan being
``paired_difference``'s, and end to end against the local server: unrelated models a few points apart, where the
e-process settles nothing and the final look fails the candidate on the whole design.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from pytest_longctx.results.clustered import paired_difference
from pytest_longctx.results.eprocess import (
    EPROCESS_SHARE,
    AlarmSequence,
    draw_drops,
    drops_p,
    levels,
    paired_p,
    simulate,
    split,
)
from pytest_longctx.results.robust import Shape, cr2_variance
from pytest_longctx.results.stats import wilson
from pytest_longctx.server.graded import Graded
from tests.lrt_runs import compared_with_production, run_lrt
from tests.test_power import write_planned

#: (items, trials an item, accuracy, intra-item correlation, discordance): one trial an item and many, accuracy mid
#: and near the ceiling, versions (few disagreements) and unrelated models (many)
DESIGNS = [(400, 1, 0.85, 0.5, 0.04), (60, 20, 0.7, 0.3, 0.06), (200, 4, 0.95, 0.5, 0.02), (30, 80, 0.5, 0.6, 0.1),
           (300, 1, 0.85, 0.5, 0.3), (100, 5, 0.75, 0.4, 0.35)]


def test_the_split_adds_up_to_the_alarms_level() -> None:
    a, _ = levels(0.05, 4)
    a1, a2 = split(a)
    assert a1 == pytest.approx(EPROCESS_SHARE * a) and a1 + a2 == pytest.approx(a) and 0 < a1 < a
    assert split(a, 1.0) == (a, 0.0)


@pytest.mark.parametrize("design", DESIGNS)
def test_no_change_fires_at_most_alpha_with_the_final_look(design: tuple[float, ...]) -> None:
    """Every look of the e-process at a1 and the fixed test at a2 on the whole design: together at most alpha."""
    items, per_item, accuracy, icc, disc = design
    alpha, runs = 0.05, 4000
    a1, a2 = split(alpha)
    rng = np.random.default_rng(17)
    x, regressed, improved = draw_drops(rng, runs, int(items), int(per_item), accuracy, disc, icc, 0.0, counts=True)
    final = paired_p(x, int(per_item), regressed, improved, 0.0)
    _, fired = simulate(x, 0.0, 0.05, a1, 0.1, group=1, final_level=a2, final_p=final)
    low, _ = wilson(int(fired.sum()), runs)
    assert low <= alpha, f"false alarms {fired.mean():.3%} shown above {alpha}"
    assert fired.mean() <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / runs)


def test_a_drop_of_exactly_the_margin_fires_at_most_alpha_with_the_final_look() -> None:
    rng = np.random.default_rng(18)
    x = draw_drops(rng, 4000, 300, 1, 0.85, 0.04, 0.5, 0.05)
    x = x - (x.mean() - 0.05)  # centred exactly on the margin (the final look: the t-test of the items' drops)
    a1, a2 = split(0.05)
    _, fired = simulate(x, 0.05, 0.05, a1, 0.1, group=10, final_level=a2)
    assert wilson(int(fired.sum()), 4000)[0] <= 0.05


def test_the_final_look_decides_what_the_e_process_did_not() -> None:
    """Unrelated models 6 points apart over 300 one-trial items: the e-process at a1 rarely settles, the fixed test
    at a2 on the whole design fires most of the time, and the final look's power is most of the fixed test's."""
    rng = np.random.default_rng(19)
    a1, a2 = split(0.05)
    x, regressed, improved = draw_drops(rng, 1000, 300, 1, 0.85, 0.3, 0.5, 0.06, counts=True)
    final = paired_p(x, 1, regressed, improved, 0.0)
    _, alone = simulate(x, 0.0, 0.05, 0.05, 0.1, group=10)  # the e-process with the whole level
    items, fired = simulate(x, 0.0, 0.05, a1, 0.1, group=10, final_level=a2, final_p=final)
    # the runs the final look decides: those whose verdict follows its p (always under a2, never under a2)
    ones, zeros = np.ones(1000), np.zeros(1000)
    decided = (simulate(x, 0.0, 0.05, a1, 0.1, group=10, final_level=a2, final_p=zeros)[1]
               != simulate(x, 0.0, 0.05, a1, 0.1, group=10, final_level=a2, final_p=ones)[1])
    assert decided.mean() > 0.5 and (items[decided] == 300).all()  # most runs reach the final look
    assert np.array_equal(fired[decided], final[decided] < a2)
    assert not fired[~decided].any() or (items[~decided & fired] <= 300).all()
    assert fired.mean() > alone.mean() + 0.1  # it finds what the e-process alone missed
    assert fired.mean() >= 0.8 * (final < 0.05).mean()  # near the fixed design's power at the whole level


def test_the_object_and_the_vectorised_rule_agree_with_a_final_look() -> None:
    rng = np.random.default_rng(20)
    a1, a2 = split(0.05)
    x, regressed, improved = draw_drops(rng, 60, 120, 3, 0.8, 0.2, 0.4, 0.06, counts=True)
    final = paired_p(x, 3, regressed, improved, 0.0)
    items, fired = simulate(x, 0.0, 0.05, a1, 0.1, group=10, final_level=a2, final_p=final)
    by = []
    for run in range(60):
        alarm = AlarmSequence("t", 0.0, 0.05, a1, 0.1, planned=120, final_level=a2)
        for i, value in enumerate(x[run]):
            alarm.add(float(value))
            if (i + 1) % 10 == 0 and alarm.look() is not None:
                break
        if alarm.settled is None:
            assert alarm.n == 120  # no "cannot fire" before the end: the run goes on to the final look
            alarm.final(float(final[run]))
        assert (alarm.n, alarm.settled == "fired") == (items[run], fired[run])
        by.append(alarm.by)
    assert "final look" in by  # the case exercises both ways
    assert "e-process" in by


def test_an_alarm_settled_by_the_final_look_says_so() -> None:
    a1, a2 = split(0.05)
    alarm = AlarmSequence("experiment=lrt:max-drop=0", 0.0, 0.05, a1, 0.1, planned=3, final_level=a2)
    for value in (0.0, 0.0):
        alarm.add(value)
    assert alarm.look() is None  # with a final look, "cannot fire" does not settle before the end
    alarm.add(1.0)
    assert alarm.look() is None and alarm.final(0.01) == "fired"
    out = alarm.to_json()
    assert out["verdict"] == "fail" and out["settled_by"] == "final look" and out["final_p"] == 0.01
    assert out["settled_at_item"] == 3 and out["final_level"] == pytest.approx(a2)
    assert "final fixed-design look" in alarm.words() and f"p=0.01 < {a2:.3g}" in alarm.words()
    assert alarm.final(0.9) == "fired"  # settled once

    other = AlarmSequence("t", 0.0, 0.05, a1, 0.1, planned=1, final_level=a2)
    other.add(0.0)
    assert other.look() is None and other.final(a2) == "not shown" and other.to_json()["verdict"] == "pass"
    assert "not shown larger than 0" in other.words()
    assert other.final(None) == "not shown"
    unsettled = AlarmSequence("t", 0.0, 0.05, a1, 0.1, planned=1, final_level=a2)
    assert unsettled.final(None) is None  # no fixed p (the design not complete): nothing decided
    assert "not settled before the end of its design, so no final look" in unsettled.words()
    early = AlarmSequence("t", 0.0, 0.05, a1, 0.1, planned=100, final_level=a2)
    for _ in range(30):
        early.add(1.0)
    assert early.look() == "fired" and early.final(0.9) == "fired" and early.to_json()["settled_by"] == "e-process"
    assert early.to_json()["final_p"] is None and f"by the e-process after {early.at_item} items" in early.words()


def test_the_plans_fixed_test_is_paired_difference() -> None:
    """``paired_p`` (the plan's final look) is the fixed gate's ``paired_difference`` test on equal items (its own p,
    at most the gate's monotone one); ``drops_p``
    (``simulate``'s fallback from drops alone) is the CR2 t-test of the items' drops."""
    rng = np.random.default_rng(21)
    per_item, items = 3, 40
    for _ in range(5):
        before = rng.random((items, per_item)) < 0.8
        now = np.where(rng.random((items, per_item)) < 0.15, ~before, before)
        clusters = np.repeat(np.arange(items), per_item)
        diff = paired_difference(now.ravel().tolist(), before.ravel().tolist(), clusters.tolist())
        drops = (before.astype(float) - now).mean(axis=1)[None, :]
        for margin in (0.0, 0.02):
            found = paired_p(drops, per_item, [(before & ~now).sum()], [(~before & now).sum()], margin)[0]
            # the paired test's own p; the gate's adds the monotone envelope (results/envelope.py), never lower
            assert found == pytest.approx(float(diff.rows.own_p_over(margin)[0]), rel=1e-9, abs=1e-12)
            assert found <= diff.p_drop_over(margin) + 1e-12
        # CR2 on equal clusters is the one-sample t: the same variance, G - 1 degrees of freedom
        sums = (now.astype(float) - before).sum(axis=1)
        centred = sums - sums.mean()
        se = math.sqrt(float(cr2_variance(centred[None, :], Shape.of([per_item] * items))[0]))
        t = (-sums.mean() / per_item) / se
        assert drops_p(drops, 0.0)[0] == pytest.approx(stats.t.sf(t, items - 1), rel=1e-9)
        assert drops_p(drops, 0.0)[0] == pytest.approx(stats.ttest_1samp(drops[0], 0.0, alternative="greater")
                                                       .pvalue, rel=1e-9)


@pytest.mark.e2e
def test_the_final_look_fails_an_unrelated_model_the_e_process_did_not_settle(pytester: pytest.Pytester,
                                                                               api: Any) -> None:
    api(Graded("claude-prod=0.85,seed=1"))
    compared = compared_with_production(pytester)
    api(Graded("claude-other=0.77,seed=2"))  # another model: its own hard items (another seed)
    code, other, out = run_lrt(pytester, "claude-other", "other-seq", *compared, "--longctx-sequential",
                           cache="cache-other")
    check = other["gate"]["checks"][0]
    seq = other["sequential"]
    alarm = seq["alarms"][0]
    assert not seq["stopped"] and seq["final_look"] and len(other["trials"]) == 400  # the whole design
    assert "sequential gate settled" not in out
    assert alarm["settled_by"] == "final look" and alarm["settled_at_item"] == alarm["planned_items"]
    assert alarm["e_value"] < 1 / alarm["level"]  # the e-process did not fire
    assert alarm["final_p"] == pytest.approx(check["p"], abs=1e-6) and alarm["final_p"] < alarm["final_level"]
    assert code == 10 and check["verdict"] == "fail", check["words"]
    assert "final fixed-design look" in check["words"] and "shown larger than 0" in check["words"]
    assert check["fixed"]["verdict"] == "fail"  # the fixed gate on the same answers agrees

    code, fixed, _ = run_lrt(pytester, "claude-other", "other-fixed", *compared, "--longctx-cache", "off")
    assert code == 10 and fixed["gate"]["checks"][0]["p"] == pytest.approx(check["p"])

    # a re-run over the cached run: every answer from the cache (no request sent), the same final look
    code, again, _ = run_lrt(pytester, "claude-other", "other-again", *compared, "--longctx-sequential",
                         cache="cache-other")
    assert code == 10 and again["sequential"]["alarms"][0] == alarm
    assert len(again["trials"]) == 400 and all(t["calls"] == 0 < t["cache_hits"] for t in again["trials"])


def test_the_plan_runs_the_rule_with_its_final_look(longctx_runner: Any) -> None:
    write_planned(longctx_runner.pytester)
    run = longctx_runner.run("--longctx-plan", "true", "--longctx-samples", "200", "--longctx-threshold",
                             "*:max-drop=0", model="anthropic/claude-sonnet-5")
    out = run.result.stdout.str()
    assert run.ret == 0, out
    alarm = run.plan_record["plan"]["sequential"]["alarms"][0]
    a1, a2 = split(0.05)
    assert alarm["level"] == pytest.approx(a1) and alarm["final_level"] == pytest.approx(a2)
    assert f"or at the design's end at fixed-test p < {a2:.3g}" in out
    assert alarm["hold_back"] and f"(held back while the fixed test on the items so far fails at {a2:.3g})" in out
    cases = alarm["cases"]
    assert cases["no change"]["fails"] <= 0.05 and cases["drop 0.05"]["fails"] > cases["no change"]["fails"]


def test_the_plans_estimate_holds_a_clear_back_as_the_gate_does() -> None:
    """The plan's figures are the rule with the clear's hold-back (a clear also needs the fixed test at a2 on the
    items so far) on the plan's own seeded draws. On 400 one-trial items at max-drop=0 with no change it binds: 3 of
    the plan's 1,000 runs fail, none with clears never held back (20,000 runs: 0.40% against 0.15%)."""
    import zlib
    from types import SimpleNamespace

    from pytest_longctx.gate_spec import parse_threshold
    from pytest_longctx.results.power import Design
    from pytest_longctx.results.sequential_plan import RUNS, plan_sequential

    items, threshold = 400, parse_threshold("experiment=lrt:max-drop=0")
    evidence = SimpleNamespace(design=lambda matches, by_item: Design(items, items, 1),
                               experiments_matching=lambda matches: ["lrt"], tokens=lambda name: (4_000_000, 4_000),
                               samples=lambda name: 20)
    plan = plan_sequential(evidence, {}, [threshold], 0.05, None, None, None, lambda i, o: (3 * i + 15 * o) / 1e6)
    fails = plan["alarms"][0]["cases"]["no change"]["fails"]
    a1, a2 = split(0.05)
    rng = np.random.default_rng(zlib.crc32(f"0|{threshold.text}".encode()))  # the plan's draws for this alarm
    x, regressed, improved = draw_drops(rng, RUNS, items, 1, 0.85, 0.04, 0.5, 0.0, counts=True)
    final = paired_p(x, 1, regressed, improved, 0.0)
    held = simulate(x, 0.0, 0.05, a1, 0.1, 20, final_level=a2, final_p=final, counts=(regressed, improved))[1]
    never = simulate(x, 0.0, 0.05, a1, 0.1, 20, final_level=a2, final_p=final)[1]
    assert fails == round(float(held.mean()), 3) == 0.003 and float(never.mean()) == 0.0  # 3 runs held back
