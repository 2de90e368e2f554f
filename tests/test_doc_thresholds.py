"""Every threshold example in the docs and the README parses and decides (issue #38 item 8).

The examples are read out of the Markdown (every ``--longctx-threshold '...'`` and ``--threshold '...'``, and the
examples table of docs/ci-gating.md), then decided one by one on a record shaped like the suite's own runs (lrt, qa,
docs and litm-qa cells with their declared evidence and length axes) against a compared run, through the same
``decide`` the run and ``longctx-gate`` use: each gives a pass or a fail, never a gate error. docs/ci-gating.md
once showed ``'*:min-effective-length=32000'``, which exits 11 ("axes differ") on any record with two experiments.
"""

from __future__ import annotations

import copy
import random
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.experiments.docs.plugin import pytest_longctx_evidence as docs_evidence
from pytest_longctx.experiments.litm.plugin import pytest_longctx_evidence as litm_evidence
from pytest_longctx.experiments.lrt.plugin import pytest_longctx_evidence as lrt_evidence
from pytest_longctx.experiments.needle.plugin import pytest_longctx_evidence as needle_evidence
from pytest_longctx.experiments.qa.plugin import pytest_longctx_evidence as qa_evidence
from pytest_longctx.gate_spec import GateSettings, Threshold, parse_threshold
from pytest_longctx.results.aggregate import Aggregator
from pytest_longctx.results.decide import decide
from pytest_longctx.results.evidence import assign_clusters, by_experiment

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([*(ROOT / "docs").glob("*.md"), ROOT / "README.md"])
FLAGGED = re.compile(r"--(?:longctx-)?threshold[ =]'([^']+)'")


def examples() -> list[tuple[str, str]]:
    """(file, expression) for every threshold the docs show, placeholders left out."""
    found: dict[str, str] = {}
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for expr in FLAGGED.findall(text):
            found.setdefault(expr, path.name)
    table = (ROOT / "docs" / "ci-gating.md").read_text(encoding="utf-8").split("| threshold | fails when |", 1)[1]
    for line in table.split("\n\n", 1)[0].splitlines():
        if match := re.match(r"\| `([^`]+)` \|", line):
            found.setdefault(match.group(1), "ci-gating.md (examples table)")
    return sorted((name, expr) for expr, name in found.items() if "SELECTOR" not in expr)


#: (experiment, params, detail key of the context tokens, tokens) of every cell of the record
CELLS = [("lrt", {"lines": lines, "shuffle": "none"}, "context_tokens", tokens)
         for lines, tokens in ((100, 8000), (200, 16000), (400, 32000), (800, 64000))]
CELLS += [("qa", {"context_tokens": tokens}, "context_tokens_actual", tokens - 100) for tokens in (2000, 95000)]
CELLS += [("docs", {"context_fraction": f, "arm": "long-context"}, "context_tokens", int(f * 100_000))
          for f in (0.25, 1.0)]
CELLS += [("litm-qa", {"documents": d, "position": 0}, "context_tokens", d * 500) for d in (10, 20)]
CELLS += [("docs", {"context_fraction": 0.25, "arm": "long-context", "answer_doc": a}, "context_tokens", 25_000)
          for a in ("present", "removed")]
CELLS += [("needle", {"study": "abstention", "tokens": 1000, "variant": "nonliteral", "answerable": a},
           "context_tokens", 1000) for a in ("yes", "no")]
ITEMS = 30


def record(seed: int, accuracy: float) -> dict[str, Any]:
    """A run's record: every cell asks the experiment's 30 items (lrt: each trial its own file)."""
    rnd = random.Random(seed)
    agg = Aggregator()
    for experiment, params, key, tokens in CELLS:
        for i in range(ITEMS):
            item = f"{params}-{i}" if experiment == "lrt" else f"q{i}"
            agg.add({"nodeid": f"{experiment}{params}[{i}]", "experiment": experiment, "params": params,
                     "sample": i, "item": item, "detail": {key: tokens},
                     "outcome": "correct" if rnd.random() < accuracy else "incorrect"})
    declared = evidence()
    trials = agg.trials
    assign_clusters(trials, declared)
    return {"schema": "pytest-longctx/run", "version": 3, "settings": {"seed": 0, "protocol": "longctx"},
            "cells": agg.cells(), "trials": trials, "stopped": None}


def evidence() -> dict[str, Any]:
    return by_experiment([*lrt_evidence(), *qa_evidence(), *docs_evidence(), *litm_evidence(),
                          *needle_evidence()])


def settings(threshold: Threshold) -> GateSettings:
    """The settings ``decide`` reads, as ``longctx-gate`` builds them: one threshold against baseline.json."""
    return GateSettings((threshold,), alpha=0.05, compare=Path("baseline.json"), compare_partial=False,
                        effective_accuracy=0.85, seed=0, samples=ITEMS, samples_all=False, protocol="longctx")


def test_the_docs_show_thresholds_of_every_kind() -> None:
    shown = [parse_threshold(expr) for _, expr in examples()]
    assert {t.kind for t in shown} == {"min", "max-drop", "min-effective-length"}
    assert {t.reading for t in shown} == {"alarm", "shown"} and any(t.each for t in shown)
    assert len(shown) >= 10, shown


@pytest.mark.parametrize(("where", "expr"), examples())
def test_every_threshold_example_in_the_docs_parses_and_decides(where: str, expr: str) -> None:
    threshold = parse_threshold(expr)  # a malformed example is a UsageError here
    baseline, candidate = record(1, 0.93), record(2, 0.9)
    notes: list[str] = []
    result = decide(copy.deepcopy(candidate), settings(threshold), evidence(), baseline, notes)
    (check,) = result.checks
    assert not result.errors and check["verdict"] in ("pass", "fail"), (where, expr, result.errors, check)
    assert result.exit_code in (0, 10) and not [n for n in notes if "could not" in n], notes


def test_a_length_threshold_over_experiments_with_different_axes_cannot_decide() -> None:
    """What the docs' example used to be: '*' pools lrt's lines with qa's tokens, which have no one axis."""
    result = decide(record(2, 0.9), settings(parse_threshold("*:min-effective-length=32000")), evidence(),
                    record(1, 0.93), [])
    assert result.exit_code == 11 and "axes differ" in result.errors[0]
