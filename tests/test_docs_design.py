"""docs' block design (``--longctx-docs-design blocks``, a remote model's default): its construction, its option,
what a folder's items detect (``results/power.items_power`` and the summary line), and a run on two workers against
the local Messages-API server whose pooled alarm counts the items."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.experiments.docs.design import block_design, fractions_per_item, size_cell_items
from pytest_longctx.experiments.docs.summary import folder_lines
from pytest_longctx.results.power import (
    Assumptions,
    Design,
    concentrated,
    detectable_drop,
    detectable_share,
    items_power,
)
from pytest_longctx.server.graded import Graded

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "fixtures" / "docs"
MODEL = "anthropic/claude-sonnet-4-5"
FRACTIONS = [0, 25, 50, 75, 100]


def _where(items: int) -> dict[int, list[int]]:
    design = block_design(items, FRACTIONS)
    where: dict[int, list[int]] = defaultdict(list)
    for fraction, asked in design.sizes.items():
        for i in asked:
            where[i].append(fraction)
    return where


def test_the_shipped_folder_asks_each_item_at_two_sizes_in_balanced_pairs() -> None:
    design = block_design(140, FRACTIONS)
    assert design.fractions_per_item == 2 and design.per_size_cell() == 56
    assert all(len(v) == len(set(v)) == 56 for v in design.sizes.values())  # distinct items, 56 a size cell
    where = _where(140)
    assert len(where) == 140 and all(len(f) == 2 for f in where.values())  # every item at two sizes
    pairs = Counter(tuple(sorted(f)) for f in where.values())
    assert len(pairs) == 10 and set(pairs.values()) == {14}  # every pair of sizes, 14 items each
    assert design.sample(50, 0) == design.sizes[50][0] and design.sample(50, 56) is None


@pytest.mark.parametrize(("items", "k", "per_cell"), [
    (10, 5, 10), (50, 5, 50), (60, 5, 60), (70, 4, 56), (100, 3, 60), (140, 2, 56), (200, 2, 80), (400, 2, 160)])
def test_every_size_cell_keeps_fifty_items_or_all_of_them(items: int, k: int, per_cell: int) -> None:
    assert fractions_per_item(items, 5) == k and size_cell_items(items, 5) == per_cell
    design = block_design(items, FRACTIONS)
    assert all(len(v) == len(set(v)) == per_cell for v in design.sizes.values())
    assert {len(f) for f in _where(items).values()} <= {k, k + 1} and len(_where(items)) == items
    assert design == block_design(items, FRACTIONS)  # deterministic: every worker builds the same one


@pytest.mark.e2e
@pytest.mark.parametrize(("model", "args", "collected"), [
    (MODEL, [], 5 * 140 + 10 * 56),  # every item at every depth, 2 of 5 sizes in both arms
    (MODEL, ["--longctx-docs-design", "full"], 15 * 140),
    (MODEL, ["--longctx-samples", "20"], 15 * 20),  # 20 items: every size keeps them all
    (MODEL, ["--longctx-protocol", "source"], 15 * 14),  # the write-up: one pair a document, everywhere
    ("fake/perfect", [], 15 * 40),
])
def test_collection_of_the_designs(pytester: pytest.Pytester, model: str, args: list[str], collected: int) -> None:
    result = pytester.runpytest_subprocess(str(ROOT / "evals" / "docs" / "test_docs.py"), "--collect-only", "-q", "-p",
                                           "no:cacheprovider", "--longctx-model", model, *args)
    result.stdout.fnmatch_lines([f"{collected} tests collected*"])


def test_items_power_is_the_plans_formula_and_the_items_needed_are_the_fewest() -> None:
    a = Assumptions()
    found = items_power(140, 9, 0.0125)
    design = Design.of_sizes([9] * 140)
    assert found["diffuse"] == round(detectable_drop(design, 0.0125, a) or 0, 4)
    assert found["concentrated"] == concentrated(design, 0.0125, a)
    need = found["items_needed"]
    assert need is not None and need > 140  # the concentrated shape needs more than the shipped folder

    def sees(g: int) -> bool:
        d = Design.of_sizes([9] * g)
        share = detectable_share(d, 0.0125, a)
        return (detectable_drop(d, 0.0125, a) or 1) <= 0.05 and share is not None and share * a.accuracy <= 0.05

    assert sees(need) and not sees(need - 1)
    assert items_power(140, 9, 0.05)["items_needed"] < need  # a laxer level needs fewer
    assert items_power(140, 9, 0.0125, {"icc": 0.5, "diff_icc": 0.5})["items_needed"] > need  # correlated: more


def test_the_summary_says_what_the_folder_detects_and_how_many_items_to_generate() -> None:
    record = {"settings": {"alpha": 0.05, "thresholds": ["experiment=docs:max-drop=0", "experiment=qa:max-drop=0",
                                                         "experiment=qa:max-drop=0.02/shown"],
                           "docs_folder": {"items": 140, "documents": 14}},
              "trials": [{"experiment": "docs", "item": f"d/{i}"} for i in range(140) for _ in range(9)]}
    [line] = folder_lines(record)
    need = items_power(140, 9, 0.025)["items_needed"]
    assert line.startswith("docs items: 140 reviewed items asked 9 times each detect a drop of ")
    assert "at one-sided alpha 0.025" in line and f"needs about {need} items" in line
    more = -(-(need - 140) // 14)
    assert f"({more} more a document, `longctx-docs generate DIR --model SPEC --all --per-doc {more}`" in line
    plan = {"settings": {}, "plan": {"power": {"alpha": 0.05, "experiments": {"docs": {
        "clusters": 300, "trials": 2700, "assumptions": Assumptions().to_json()}}}}}
    assert "these are enough" in folder_lines(plan)[0]
    assert folder_lines({"settings": {}, "trials": []}) == []


@pytest.mark.e2e
def test_a_blocks_run_on_two_workers_asks_its_design_and_the_pooled_alarm_counts_items(
        pytester: pytest.Pytester, api: Any) -> None:
    """70 of the shipped items through ``pytest evals/docs -n 2`` at a remote model's default, answered by the
    graded server, then the same model compared with it under the recipe's docs alarm: every item at the 5 depths,
    at 4 of the 5 sizes in both arms (56 a size cell), both arms of a size ask the same items, and the alarm's
    clusters are the 70 items."""
    api(Graded(f"accuracy=0.8,flip=0.05,seed=3,docs-key={DOCS}"))

    def run(name: str, *args: str) -> tuple[int, dict[str, Any], str]:
        report = pytester.path / name
        result = pytester.runpytest_subprocess(
            str(ROOT / "evals" / "docs" / "test_docs.py"), "-p", "no:cacheprovider", "-n", "2", "--longctx-model",
            MODEL,
            "--longctx-report-dir", str(report), "--longctx-cache", "off", "--longctx-docs-judge", "false",
            "--longctx-cache-dir", str(pytester.path / "cache"), "--longctx-samples", "70", *args, timeout=600)
        out = result.stdout.str() + result.stderr.str()
        assert (report / "longctx.json").is_file(), out
        return int(result.ret), json.loads((report / "longctx.json").read_text(encoding="utf-8")), out

    code, first, out = run("first")
    assert code == 0, out
    assert first["settings"]["docs_design"] == "blocks"
    assert first["settings"]["defaults"]["docs"]["conditions"]["fractions_per_item"] == 4
    trials = first["trials"]
    assert len(trials) == 70 * 5 + 56 * 10 and not [t for t in trials if t["outcome"] == "error"]
    depths: dict[int, set[str]] = defaultdict(set)
    sizes: dict[tuple[int, str], list[str]] = defaultdict(list)
    for t in trials:
        if "depth" in t["params"]:
            depths[t["params"]["depth"]].add(t["item"])
        else:
            sizes[t["params"]["context_fraction"], t["params"]["arm"]].append(t["item"])
    assert len(depths) == 5 and all(len(v) == 70 for v in depths.values())  # every item at every depth
    everyone = next(iter(depths.values()))
    assert all(len(v) == len(set(v)) == 56 and set(v) <= everyone for v in sizes.values())
    for fraction in FRACTIONS:  # the arms of a size ask the same items: the arm contrast is paired
        assert set(sizes[fraction, "long-context"]) == set(sizes[fraction, "rag"])
    assert "docs items: 70 of the folder's 140 reviewed items asked 13 times each detect" in out  # 5 + 4 x 2
    assert "the folder has them (`--longctx-samples 1" in out
    code, second, out = run("second", "--longctx-compare", str(pytester.path / "first" / "longctx.json"),
                            "--longctx-threshold", "experiment=docs:max-drop=0")
    assert code == 0, out
    check = second["gate"]["checks"][0]
    assert check["clusters"] == 70 and check["n"] == len(trials)
