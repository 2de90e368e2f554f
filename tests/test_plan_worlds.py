"""A plan that says which world it describes (issue 38.7).

The plan's detectable drop and items-needed figures assume an agreement between the candidate and the compared
run: versions of one model (the agreement the compared run's own comparison shows, else the default), or, for a
candidate of another family, also unrelated models (answers independent given each item's difficulty). The
unrelated figure is checked by seeded simulation of the gate's own paired test on that data model
(``draw_drops`` at its largest discordance); the labels on the plan's output, unit and end to end.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_longctx.experiments.docs.summary import folder_lines
from pytest_longctx.gate_spec import parse_threshold
from pytest_longctx.reporting.decision import power_lines
from pytest_longctx.results.eprocess import draw_drops, paired_p
from pytest_longctx.results.evidence import Evidence
from pytest_longctx.results.power import (
    Assumptions,
    Design,
    PlanEvidence,
    detectable_drop,
    family,
    plan_power,
    unrelated,
)
from pytest_longctx.server.graded import Graded
from tests.lrt_runs import LRT, ROOT, run_lrt


@pytest.mark.parametrize(("a", "b", "same"), [
    ("anthropic/claude-sonnet-4-5", "anthropic/claude-sonnet-4-5-20250929", True),
    ("anthropic/claude-sonnet-4-5", "anthropic/claude-sonnet-4-6", True),
    ("anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-5", False),
    ("anthropic/claude-sonnet-4-5", "openai/gpt-4o", False),
    ("openai/gpt-4o", "openai/gpt-4o-mini", False),
])
def test_family(a: str, b: str, same: bool) -> None:
    assert (family(a) == family(b)) is same


def test_unrelated_models_disagree_as_independent_answers_do() -> None:
    a = Assumptions(0.85, 0.04, 0.5)
    far = unrelated(a)
    assert far.discordance == pytest.approx(2 * 0.85 * 0.15 * 0.5) and far.diff_icc == 0.0
    assert (far.accuracy, far.icc) == (a.accuracy, a.icc)
    assert unrelated(Assumptions(0.85, 0.3, 0.5)).discordance == 0.3  # never below what was measured


@pytest.mark.parametrize(("items", "per_item"), [(200, 1), (60, 5), (100, 4)])
def test_the_unrelated_figure_has_its_power_on_unrelated_models(items: int, per_item: int) -> None:
    """Unrelated models (draw_drops with every answer redrawn: independent given the item's propensity): the
    versions' detectable drop is seen well under 80% of the time, the unrelated figure about 80%."""
    a = Assumptions(0.85, 0.04, 0.5)
    design = Design.of_sizes([per_item] * items)
    versions, far = detectable_drop(design, 0.05, a), detectable_drop(design, 0.05, unrelated(a))
    assert versions is not None and far is not None and far > 1.2 * versions
    rng = np.random.default_rng(387)
    power = {}
    for name, drop in (("versions", versions), ("unrelated", far)):
        x, regressed, improved = draw_drops(rng, 2000, items, per_item, 0.85, 2 * 0.85 * 0.15, 0.5, drop,
                                            counts=True)
        power[name] = float((paired_p(x, per_item, regressed, improved, 0.0) < 0.05).mean())
    assert power["versions"] < 0.7 and 0.75 <= power["unrelated"] <= 0.9, power


def _power(candidate: str, compared: str) -> dict[str, Any]:
    evidence = PlanEvidence()
    for item in range(40):
        for cell in range(3):
            evidence.add({"trial": {"experiment": "qa", "params": {"cell": cell}, "item": f"q{item}"}})
    baseline = {"settings": {"model": compared}, "trials": []}
    return plan_power(evidence, {"qa": Evidence("qa", "item")}, [parse_threshold("*:max-drop=0")], 0.05, baseline,
                      None, lambda i, o: 0.0, candidate=candidate)


def test_a_plan_for_a_version_says_which_agreement_it_assumes() -> None:
    power = _power("anthropic/claude-sonnet-4-6", "anthropic/claude-sonnet-4-5")
    qa = power["experiments"]["qa"]
    assert not power["other_family"] and "unrelated" not in qa
    assert qa["world"] == "versions of one model: the default agreement"
    lines = power_lines(power)
    assert all("unrelated" not in line for line in lines)
    assert any(line.startswith("  qa: 120 trials") and "(versions of one model: the default agreement)" in line
               for line in lines), lines


def test_a_plan_for_another_family_prints_both_figures_labelled() -> None:
    power = _power("anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-5")
    qa = power["experiments"]["qa"]
    assert power["other_family"] and qa["unrelated"]["drop"] > qa["drop"]
    lines = power_lines(power)
    assert any("candidate anthropic/claude-haiku-4-5 is of another family" in line for line in lines)
    line = next(line for line in lines if line.startswith("  qa:"))
    assert (f"if versions of one model: the default agreement: a drop of {qa['drop']:.3f}" in line
            and f"if unrelated models (answers independent given item difficulty, 0.128 discordant): a drop of "
                f"{qa['unrelated']['drop']:.3f}" in line), line
    threshold = next(line for line in lines if line.startswith("  threshold *:max-drop=0"))
    assert "if unrelated models" in threshold


def test_the_docs_folder_line_gives_both_worlds() -> None:
    power = _power("anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-5")
    docs = {**power["experiments"]["qa"], "clusters": 194, "trials": 194 * 6}
    docs["unrelated"] = {**docs["unrelated"], "assumptions": unrelated(Assumptions()).to_json()}
    record = {"settings": {}, "plan": {"power": {**power, "experiments": {"docs": docs}}}}
    [line] = folder_lines(record)
    assert "(if versions of one model: the default agreement) a drop of" in line
    assert "; if unrelated models (unrelated models: answers independent" in line
    assert "194 items detect a drop of" in line and line.count("needs about") == 2


def test_a_plan_against_a_run_of_another_family_end_to_end(pytester: pytest.Pytester, api: Any) -> None:
    """A real plan of evals/lrt against a compared run of ``claude-prod`` on the local server: a candidate of
    the same family gets one labelled figure, one of another family both."""
    api(Graded("claude-prod=0.85,seed=1"))
    code, _, out = run_lrt(pytester, "claude-prod", "prod", "--longctx-cache", "off", "--longctx-samples", "10",
                           dist=("-p", "no:xdist"))
    assert code == 0, out
    said = {}
    for model in ("claude-prod-2", "claude-other"):
        report = pytester.path / f"plan-{model}"
        result = pytester.runpytest_subprocess(
            str(ROOT / "evals" / "lrt"), "-p", "no:cacheprovider", "-p", "no:xdist", "--longctx-model",
            f"anthropic/{model}", "--longctx-report-dir", str(report), "--longctx-cache", "off", *LRT,
            "--longctx-samples", "10", "--longctx-plan", "true", "--longctx-compare",
            str(pytester.path / "prod" / "longctx.json"), "--longctx-threshold", "experiment=lrt:max-drop=0")
        assert result.ret == 0, result.stdout.str() + result.stderr.str()
        plan = json.loads(Path(report / "longctx-plan.json").read_text(encoding="utf-8"))
        said[model] = (plan["plan"]["power"], result.stdout.str())
    power, out = said["claude-prod-2"]
    assert not power["other_family"] and "unrelated" not in power["experiments"]["lrt"]
    assert "lrt: 200 trials" in out and "(versions of one model: the default agreement)" in out
    assert "if unrelated models" not in out
    power, out = said["claude-other"]
    lrt = power["experiments"]["lrt"]
    assert power["other_family"] and lrt["unrelated"]["drop"] > lrt["drop"]
    assert "is of another family than the compared run's anthropic/claude-prod" in out
    assert f"if versions of one model: the default agreement: a drop of {lrt['drop']:.3f}" in out
    far = lrt["unrelated"]
    assert (f"if unrelated models (answers independent given item difficulty, "
            f"{far['assumptions']['discordance']:.3f} discordant): a drop of {far['drop']:.3f}") in out


def test_the_needle_pairs_line_gives_both_worlds() -> None:
    from pytest_longctx.experiments.needle.report import pairs_line

    power = _power("anthropic/claude-haiku-4-5", "anthropic/claude-sonnet-4-5")
    needle = {**power["experiments"]["qa"], "clusters": 30, "trials": 120}
    needle["unrelated"] = {**needle["unrelated"], "assumptions": unrelated(Assumptions()).to_json()}
    [line] = pairs_line({"plan": {"power": {**power, "experiments": {"needle": needle}}}})
    assert "pairs if versions of one model: the default agreement; about " in line, line
    assert "pairs if unrelated models asked equally often" in line, line
    same = {k: v for k, v in needle.items() if k != "unrelated"}
    [line] = pairs_line({"plan": {"power": {**power, "experiments": {"needle": same}}}})
    assert "pairs (versions of one model: the default agreement) asked" in line and "unrelated" not in line
