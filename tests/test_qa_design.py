"""qa's incomplete block design (``--longctx-qa-design blocks``, a remote model's default): its construction, its
option, and whole runs against the local Messages-API server with ``-n 2``, compared item by item."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.experiments.qa.design import block_design
from pytest_longctx.experiments.qa.mcqa import EXAMPLES, PROMPTS
from pytest_longctx.results.pairing import pair_runs
from pytest_longctx.server.graded import Graded
from tests.design_checks import assert_design

ROOT = Path(__file__).resolve().parent.parent
QA_KEY = ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl"
VARIANTS = [f"{p}/{e}" for p in PROMPTS for e in EXAMPLES]
SIZES = (2_000, 8_000, 70_000, 95_000)


def _order(n: int) -> list[str]:
    return [f"q{i:03d}" for i in range(n)]


def test_every_cell_gets_its_questions_and_each_question_one_block() -> None:
    short = set(_order(395)[::3])  # a third of the sections are too long for 2,000 tokens
    design = block_design(_order(395), lambda q, s: s > 2_000 or q not in short, VARIANTS, SIZES, SIZES, 20)
    assert len(design.cells) == 8 * 4 + 4 and not design.short_cells()
    assert all(len(qs) == 20 == len(set(qs)) for qs in design.cells.values())  # distinct questions, 20 a cell
    blocks: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    for cell, questions in design.cells.items():
        for q in questions:
            blocks[q].append(cell)
    assert design.items() == len(blocks) == 4 * -(-8 * 20 // 3) + 4 * 20 // 2  # 216 position + 40 depth questions
    for q, cells in blocks.items():
        kinds = {kind for kind, _, _ in cells}
        assert len(kinds) == 1, q  # a question is in one block
        if kinds == {"position"}:
            assert len(cells) <= 3 and len({size for _, _, size in cells}) == 1  # 3 variants at one size
        else:
            assert len(cells) == 2 and len({size for _, _, size in cells}) == 2  # 2 depth sizes
        assert not (q in short and any(size == 2_000 for _, _, size in cells))  # only where it fits
    together: Counter[tuple[str, str]] = Counter()
    for cells in blocks.values():
        variants = sorted(v for kind, v, _ in cells if kind == "position")
        together.update((a, b) for i, a in enumerate(variants) for b in variants[i + 1:])
    assert len(together) == 28 and max(together.values()) - min(together.values()) <= 4  # every pair, about 23x
    assert sum(1 for cells in blocks.values() if len(cells) == 3) == 4 * (8 * 20 // 3)  # all but one a size


def test_the_design_is_deterministic_and_says_when_questions_run_out() -> None:
    make = lambda n: block_design(_order(n), lambda q, s: True, VARIANTS, SIZES, SIZES, 20)  # noqa: E731
    assert make(395) == make(395)
    small = make(50)
    assert small.short_cells() and small.items() == 50
    assert small.to_json()["short_cells"]


@pytest.mark.parametrize(("model", "args", "design"), [
    ("anthropic/claude-sonnet-4-5", [], "blocks"),
    ("fake/perfect", [], "full"),
    ("anthropic/claude-sonnet-4-5", ["--longctx-protocol", "source"], "full"),
    ("anthropic/claude-sonnet-4-5", ["--longctx-qa-design", "full"], "full"),
])
def test_the_design_option_defaults_to_blocks_for_a_remote_model(pytester: pytest.Pytester, model: str,
                                                                  args: list[str], design: str) -> None:
    assert_design(pytester, "qa", model, args, design)


def run(pytester: pytest.Pytester, model: str, name: str, data_dir: Path, *args: str) -> tuple[int, dict[str, Any]]:
    report = pytester.path / name
    result = pytester.runpytest_subprocess(
        str(ROOT / "evals" / "qa"), "-p", "no:cacheprovider", "-n", "2", "--longctx-model", f"anthropic/{model}",
        "--longctx-report-dir", str(report), "--longctx-cache", "off", "--longctx-cache-dir",
        str(pytester.path / "cache"), "--longctx-data-dir", str(data_dir), "--longctx-context-sizes", "2000,8000",
        "--longctx-samples", "8", *args, timeout=600)
    path = report / "longctx.json"
    assert path.is_file(), result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    return int(result.ret), json.loads(path.read_text(encoding="utf-8"))


def _asked(record: dict[str, Any]) -> dict[tuple[str, int], str]:
    """(cell, sample) -> the question it asked, over the qa trials of a run."""
    return {(json.dumps(t["params"], sort_keys=True), t["sample"]): t["item"]
            for t in record["trials"] if t["experiment"] == "qa"}


@pytest.mark.e2e
def test_a_blocks_run_on_two_workers_asks_its_design_and_a_compare_pairs_item_by_item(
        pytester: pytest.Pytester, api: Any, fr_xml: Path) -> None:
    """Two models run the remote default design (2,000 and 8,000 tokens, 8 questions a cell) with ``-n 2``; the
    second is compared with the first. Each run asks what the design says (distinct questions in each cell, each
    question in one block), both asked the same question at every (cell, sample), and the comparison pairs every
    qa trial on its question."""
    api(Graded(f"claude-prod=0.85,claude-next=0.85,flip=0.05,seed=5,rho=0.7,qa-key={QA_KEY}"))
    code, prod = run(pytester, "claude-prod", "prod", fr_xml.parent, "--longctx-qa-design", "blocks")
    assert code == 0
    assert prod["settings"]["defaults"]["qa"]["conditions"]["design"] == "blocks"
    code, nxt = run(pytester, "claude-next", "next", fr_xml.parent, "--longctx-compare",
                    str(pytester.path / "prod" / "longctx.json"), "--longctx-threshold", "experiment=qa:max-drop=0")
    assert code in (0, 10), nxt["gate"]
    asked = _asked(prod)
    # 2 sizes x 8 variants x 3 positions + 2 sizes x 5 depths cells, 8 questions each
    assert len(asked) == (2 * 8 * 3 + 2 * 5) * 8
    assert asked == _asked(nxt)  # the same design in both runs, whatever worker ran a trial
    per_cell: dict[str, list[str]] = defaultdict(list)
    blocks: dict[str, set[str]] = defaultdict(set)
    for (cell, _), item in asked.items():
        per_cell[cell].append(item)
        params = json.loads(cell)
        kind = "depth" if "depth" in params else "position"
        blocks[item].add(f"{kind}|{params.get('prompt', 'plain')}/{params.get('examples', 'none')}|"
                         f"{params['context_tokens']}")
    assert all(len(items) == len(set(items)) == 8 for items in per_cell.values())
    for item, cells in blocks.items():  # a position block: up to 3 variants at one size; a depth block: 2 sizes
        kinds = {c.split("|")[0] for c in cells}
        sizes = {c.split("|")[2] for c in cells}
        assert len(kinds) == 1, (item, cells)
        assert (len(cells) <= 3 and len(sizes) == 1) if kinds == {"position"} else len(sizes) <= 2, (item, cells)
    depth = [cells for cells in blocks.values() if next(iter(cells)).startswith("depth")]
    # both depth sizes for most questions; a section too long for 2,000 tokens gives one-size blocks (its questions
    # come together now, so up to five of them)
    assert sum(len(cells) for cells in depth) == 2 * 8 and sum(len(cells) == 2 for cells in depth) >= 5
    assert len(blocks) - len(depth) == 2 * -(-8 * 8 // 3)  # 44 position questions (and 8-10 depth questions)
    check = nxt["gate"]["checks"][0]
    assert check["clusters"] == len(blocks) and check["n"] == len(asked)
    pairing = pair_runs([t for t in nxt["trials"] if t["experiment"] == "qa"],
                        [t for t in prod["trials"] if t["experiment"] == "qa"])
    assert len(pairing.pairs) == len(asked) and not pairing.unpaired_here and not pairing.unpaired_there
    for _, now, before in pairing.pairs:  # same question, same context, same option order
        assert now["item"] == before["item"] and now["expected"] == before["expected"]
        assert now["detail"]["gold_offset"] == before["detail"]["gold_offset"]


@pytest.mark.e2e
@pytest.mark.parametrize(("model", "args", "collected"), [
    ("anthropic/claude-sonnet-4-5", [], 5 * 140 + 10 * 56),  # every reviewed item, at every depth (docs blocks)
    ("anthropic/claude-sonnet-4-5", ["--longctx-docs-design", "full"], 15 * 140),  # every item in every cell
    ("anthropic/claude-sonnet-4-5", ["--longctx-samples", "20"], 15 * 20),
    ("fake/perfect", [], 15 * 40),  # the core's default, capped by the items
])
def test_docs_asks_every_reviewed_item_of_a_remote_model(pytester: pytest.Pytester, model: str, args: list[str],
                                                         collected: int) -> None:
    result = pytester.runpytest_subprocess(str(ROOT / "evals" / "docs" / "test_docs.py"), "--collect-only", "-q", "-p",
                                           "no:cacheprovider", "--longctx-model", model, *args)
    result.stdout.fnmatch_lines([f"{collected} tests collected*"])


def test_a_sections_questions_share_one_size_and_so_one_context() -> None:
    """``section_of`` (what a run passes): a section's questions come together and go to one size (two depth
    sizes), so qa's one context per section, size and position serves all of them; each question keeps its block
    (three variants at every position) and every cell its 20 questions, as without it."""
    order = _order(395)
    section = {q: f"sec{int(q[1:]) * 7 % 79:02d}" for q in order}  # 79 sections of 5, spread over the order
    short = {q for q in order if section[q] < "sec20"}  # a quarter of the sections do not fit 2,000 tokens
    fits = lambda q, s: s > 2_000 or q not in short  # noqa: E731
    plain = block_design(order, fits, VARIANTS, SIZES, SIZES, 20)
    design = block_design(order, fits, VARIANTS, SIZES, SIZES, 20, section_of=section.__getitem__)
    assert all(len(qs) == 20 == len(set(qs)) for qs in design.cells.values())
    blocks: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    for cell, questions in design.cells.items():
        for q in questions:
            blocks[q].append(cell)
    assert design.items() == len(blocks) <= plain.items() + 8  # about as many questions as before
    sizes_of: dict[tuple[str, str], set[int]] = defaultdict(set)
    for q, cells in blocks.items():
        kinds = {kind for kind, _, _ in cells}
        assert len(kinds) == 1 and (kinds != {"position"} or len({s for _, _, s in cells}) == 1)
        sizes_of[next(iter(kinds)), section[q]].update(size for _, _, size in cells)
    # a section's position questions share one size but where that size filled up (at most one more a size)
    spread = [len(s) for (kind, _), s in sizes_of.items() if kind == "position"]
    assert sum(n > 1 for n in spread) <= len(SIZES) and max(spread) <= 2
    contexts = lambda d: len({(s, section[q]) for (kind, _, s), qs in d.cells.items()  # noqa: E731
                              if kind == "position" for q in qs})
    assert contexts(design) * 3 <= contexts(plain)  # a third of the contexts (or fewer) for the same trials
    first = {section[q]: i for i, q in reversed(list(enumerate(order)))}
    per_cell = design.cells["position", VARIANTS[0], 8_000]  # sections in the order the pool first names them
    assert [first[section[q]] for q in per_cell] == sorted(first[section[q]] for q in per_cell)
