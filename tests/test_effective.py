"""Effective context length: 'cannot decide' beyond the tested lengths or between measured and nominal tokens,
NoLiMa's relative bar beside RULER's absolute one, and the paired difference of two runs' effective lengths."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.results.effective import effective_length, paired_difference
from pytest_longctx.results.evidence import LengthAxis
from tests.test_gating import gate, run

TOKENS = LengthAxis("context_tokens", tokens="measured")
#: nominal -> measured tokens: about 1% under, as a tokenizer that counts a little differently gives
MEASURED = {32000: 31680, 64000: 63360, 128000: 126720}


def qa(accuracy: dict[int, float], items: int = 40, experiment: str = "qa") -> list[dict[str, Any]]:
    """``items`` questions asked at every nominal length; the first ``accuracy * items`` answered right."""
    out = []
    for nominal, share in accuracy.items():
        for i in range(items):
            out.append({"nodeid": f"t::{experiment}[{nominal}-{i}]", "experiment": experiment,
                        "params": {"context_tokens": nominal}, "sample": i, "item": f"q{i}", "cluster": f"q{i}",
                        "outcome": "correct" if i < share * items else "incorrect", "expected": 1,
                        "detail": {"measured": MEASURED[nominal]}})
    return out


PERFECT = {32000: 1.0, 64000: 1.0, 128000: 1.0}


@pytest.mark.parametrize("reading", ["", "/shown", "/point"])
def test_beyond_the_longest_tested_length_is_cannot_decide_not_an_alarm(reading: str) -> None:
    """A model that passed every tested length (up to 128K nominal) is not shown below 200K: the run cannot say."""
    result = gate(run(qa(PERFECT)), f"experiment=qa:min-effective-length=200000{reading}", lengths={"qa": TOKENS})
    assert result["status"] == "error" and result["exit_code"] == 11
    assert "200,000 tokens is beyond the longest tested length (126,720 tokens), which passed: the run cannot " \
           "say; test a length of at least 200,000 tokens" in result["errors"][0]


@pytest.mark.parametrize("reading", ["", "/shown", "/point"])
def test_between_measured_and_nominal_tokens_is_cannot_decide(reading: str) -> None:
    """126,720 measured tokens for a 128,000 nominal cell: a perfect model does not fail '=128000'."""
    result = gate(run(qa(PERFECT)), f"experiment=qa:min-effective-length=128000{reading}", lengths={"qa": TOKENS})
    assert result["status"] == "error" and result["checks"][0]["verdict"] == "error"
    assert "128,000 tokens lies between the measured (126,720) and the nominal (128,000) length of the tested " \
           "context_tokens=128000, which passed" in result["errors"][0]
    shorter = gate(run(qa(PERFECT)), f"experiment=qa:min-effective-length=126000{reading}", lengths={"qa": TOKENS})
    assert shorter["status"] == "pass"


def test_between_nominal_and_measured_of_a_shorter_length_that_passed_is_cannot_decide() -> None:
    """The model passed 32K and 64K and failed 128K: '=64000' falls in 64K's measured-to-nominal gap."""
    record = run(qa({32000: 1.0, 64000: 1.0, 128000: 0.2}))
    gap = gate(record, "experiment=qa:min-effective-length=64000", lengths={"qa": TOKENS})
    assert gap["status"] == "error" and "between the measured (63,360) and the nominal (64,000)" in gap["errors"][0]


def test_a_model_that_fails_below_the_asked_length_still_fails() -> None:
    """Failing at 64K is evidence against 128K (and against 200K): the alarm still fires, no 'cannot decide'."""
    record = run(qa({32000: 1.0, 64000: 0.3, 128000: 0.2}))
    for asked in (128000, 200000):
        result = gate(record, f"experiment=qa:min-effective-length={asked}", lengths={"qa": TOKENS})
        assert result["status"] == "fail" and result["checks"][0]["p"] < 0.01, result


def test_relative_bar_beside_the_absolute_one() -> None:
    """Accuracy 0.60, 0.55, 0.40: below RULER's 0.85 everywhere (0), but 0.55 keeps >= 85% of 0.60 (0.51)."""
    found = effective_length(qa({32000: 0.6, 64000: 0.55, 128000: 0.4}), TOKENS, 0.85, seed=3)
    assert found is not None and found.tokens == 0
    data = found.to_json()
    relative = data["relative"]
    assert (relative["tokens"], relative["share"], relative["threshold"]) == (63360, 0.85, pytest.approx(0.51))
    assert relative["low"] <= 63360 <= relative["high"]
    assert [lv["nominal"] for lv in data["levels"]] == [32000, 64000, 128000]


def test_paired_difference_of_two_runs_effective_lengths() -> None:
    before = qa(PERFECT)
    same = paired_difference(qa(PERFECT), before, TOKENS, 0.85, seed=1)
    assert same is not None and (same["diff"], same["low"], same["high"], same["clusters"]) == (0, 0, 0, 40)
    worse = paired_difference(qa({32000: 1.0, 64000: 1.0, 128000: 0.5}), before, TOKENS, 0.85, seed=1)
    assert worse is not None and worse["diff"] == 63360 - 126720
    assert worse["low"] <= worse["diff"] <= worse["high"] < 0
    assert worse == paired_difference(qa({32000: 1.0, 64000: 1.0, 128000: 0.5}), before, TOKENS, 0.85, seed=1)
    other_items = [{**t, "cluster": f"z{t['cluster']}"} for t in before]
    assert paired_difference(qa(PERFECT), other_items, TOKENS, 0.85, seed=1) is None  # no shared item
