"""litm-qa's block design (``--longctx-litm-design blocks``, a remote model's default): its construction, its option,
and a run on two workers against the local Messages-API server whose pooled alarm counts the questions."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.experiments.litm.data import corpus_file, load_questions
from pytest_longctx.experiments.litm.design import block_design
from tests.corpus_data import ROOT, find_for_tests
from tests.design_checks import assert_design
from tests.passkey_api import MODEL
from tests.test_litm_eval import ends_model

EVALS = ROOT / "evals" / "litm"


def _order(n: int, seed: int = 0) -> list[int]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def test_each_question_at_one_count_and_every_count_keeps_its_trials() -> None:
    design = block_design(_order(2655), [10, 20, 30], 180)
    assert {n: len(qs) for n, qs in design.blocks.items()} == {10: 180, 20: 180, 30: 180}
    assert all(len(set(qs)) == 180 for qs in design.blocks.values())  # distinct questions in a cell
    where: dict[int, list[int]] = defaultdict(list)
    for n, qs in design.blocks.items():
        for q in qs:
            where[q].append(n)
    assert all(len(counts) == 1 for counts in where.values())  # one number of documents a question
    assert design.items() == len(where) == 540
    assert len(design.baselines) == len(set(design.baselines)) == 180
    assert set(design.baselines) <= set(where)  # the baselines pair with the position cells
    assert Counter(where[q][0] for q in design.baselines) == {10: 60, 20: 60, 30: 60}
    assert design.question(0, 5) == design.question(1, 5) == design.baselines[5]
    assert design.question(20, 7) == design.blocks[20][7] and design.question(20, 180) is None


def test_two_counts_a_question_pairs_the_counts_in_balance() -> None:
    design = block_design(_order(2655), [10, 20, 30], 180, counts_per_block=2)
    assert all(len(qs) == len(set(qs)) == 180 for qs in design.blocks.values())
    where: dict[int, tuple[int, ...]] = defaultdict(tuple)
    for n, qs in design.blocks.items():
        for q in qs:
            where[q] += (n,)
    assert design.items() == 270 and all(len(c) == 2 for c in where.values())
    assert Counter(where.values()) == {(10, 20): 90, (10, 30): 90, (20, 30): 90}


def test_the_design_is_seeded_and_deterministic_and_short_pools_say_so() -> None:
    make = lambda order: block_design(order, [30, 10, 20], 50)  # noqa: E731
    assert make(_order(500, 1)) == make(_order(500, 1))  # every worker builds the same design
    assert make(_order(500, 1)) != make(_order(500, 2))  # another seed asks other questions
    small = block_design(_order(40), [10, 20], 30)
    assert {n: len(set(qs)) for n, qs in small.blocks.items()} == {10: 30, 20: 30}  # a question at a second count
    assert small.items() == 40 and all(len(qs) == 30 for qs in small.blocks.values())
    tiny = block_design(_order(10), [10, 20], 30)
    assert all(len(qs) == 10 for qs in tiny.blocks.values()) and tiny.question(10, 10) is None
    assert block_design(_order(500), [10], 50, baselines=False).baselines == ()


@pytest.mark.parametrize(("model", "args", "design"), [
    (MODEL, [], "blocks"),
    ("fake/perfect", [], "full"),
    (MODEL, ["--longctx-protocol", "source"], "full"),
    (MODEL, ["--longctx-litm-design", "full"], "full"),
    ("fake/perfect", ["--longctx-litm-design", "blocks"], "blocks"),
])
def test_the_design_option_defaults_to_blocks_for_a_remote_model(pytester: pytest.Pytester, model: str,
                                                                  args: list[str], design: str) -> None:
    assert_design(pytester, "litm", model, args, design)


@pytest.fixture(scope="module")
def litm_data_dir(pytestconfig: pytest.Config) -> Path:
    path = find_for_tests(pytestconfig, corpus_file("qa"))
    find_for_tests(pytestconfig, corpus_file("kv-75"))
    return path.parents[1]


@pytest.mark.e2e
def test_a_blocks_run_on_two_workers_asks_its_design_and_the_pooled_alarm_counts_questions(
        longctx_runner: Any, api: Any, litm_data_dir: Path) -> None:
    """The remote default through ``pytest evals/litm -n 2`` (10 and 20 documents, 75 keys, 6 a cell), then a run of
    the same model compared with it under the recipe's litm alarm: every cell keeps its 6 trials, a question is
    asked at one number of documents at every gold position, the baselines take questions from both, the U curve is
    the server model's, and the alarm's clusters are the questions and rows asked."""
    questions = load_questions(litm_data_dir / corpus_file("qa").file)
    api(ends_model({q.question: q.answers for q in questions}))
    common = (str(EVALS), "--longctx-data-dir", str(litm_data_dir), "--longctx-samples", "6",
              "--longctx-litm-documents", "10,20", "--longctx-litm-keys", "75", "-n", "2")
    first = longctx_runner.run(*common, model=MODEL, report_dir="first")
    assert first.ret == 0, first.result.stdout.str()
    record = first.record
    assert record["settings"]["litm_design"] == "blocks"
    assert record["settings"]["defaults"]["litm-qa"]["conditions"]["design"] == "blocks"
    expected = {(0, None): 0, (1, 0): 6, (10, 0): 6, (10, 4): 0, (10, 9): 6,
                (20, 0): 6, (20, 4): 0, (20, 9): 0, (20, 14): 0, (20, 19): 6}
    for (documents, position), correct in expected.items():
        cell = first.cell("litm-qa", documents=documents, gold_position=position)
        assert (cell["n"], cell["correct"], cell["errors"]) == (6, correct, 0), cell
    asked: dict[tuple[int, int], set[str]] = defaultdict(set)  # (documents, sample) -> questions
    counts: dict[str, set[int]] = defaultdict(set)
    for t in record["trials"]:
        if t["experiment"] == "litm-qa":
            asked[t["params"]["documents"], t["sample"]].add(t["item"])
            counts[t["item"]].add(t["params"]["documents"])
    assert all(len(items) == 1 for items in asked.values())  # paired: one question at every position of a count
    ten = {next(iter(asked[10, i])) for i in range(6)}
    twenty = {next(iter(asked[20, i])) for i in range(6)}
    assert len(ten) == len(twenty) == 6 and not ten & twenty  # 12 questions, each at one count
    baselines = {next(iter(asked[0, i])) for i in range(6)}
    assert baselines == {next(iter(asked[1, i])) for i in range(6)}  # closed-book and oracle ask the same
    assert len(baselines & ten) == len(baselines & twenty) == 3  # taken from both blocks in turn
    compared = longctx_runner.run(*common, "--longctx-compare", str(first.report_dir / "longctx.json"),
                                  "--longctx-threshold", "experiment=litm-*:max-drop=0", model=MODEL,
                                  report_dir="second")
    assert compared.ret == 0, compared.result.stdout.str()
    check = compared.record["gate"]["checks"][0]
    rows = {t["item"] for t in compared.record["trials"] if t["experiment"] == "litm-kv"}
    assert check["clusters"] == 12 + len(rows) and len(rows) == 6  # the questions and rows, not the trials
    assert check["n"] == 6 * (len(expected) + 4)
