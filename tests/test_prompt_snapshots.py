"""Rendered prompts and built contexts for fixed seeds. A template change shows up as a snapshot diff.

Update deliberately with ``pytest tests/test_prompt_snapshots.py --snapshot-update`` and review the diff.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.experiments.lrt.files import build_file, build_source_file
from pytest_longctx.experiments.lrt.prompts import lrt_request
from pytest_longctx.experiments.qa import source
from pytest_longctx.experiments.qa.experiment import QaData
from pytest_longctx.experiments.qa.federal_register import load_issue
from pytest_longctx.experiments.qa.mcqa import EXAMPLES, PROMPTS, build_request, example_count, shuffle_options
from pytest_longctx.experiments.qa.questions import load_questions
from tests.corpus_data import QUESTIONS, ROOT


def _load(tmp_path_factory: pytest.TempPathFactory, fr_xml: Path, protocol: str) -> QaData:
    counter = TiktokenCounter()
    tmp = tmp_path_factory.mktemp("qa")
    issue = load_issue(fr_xml, "2024-02-12", counter, tmp)
    return QaData.load(issue, load_questions(QUESTIONS), counter.count, counter.name, tmp, 0, "fake/perfect",
                       protocol=protocol)


@pytest.fixture(scope="module")
def qa(tmp_path_factory: pytest.TempPathFactory, fr_xml: Path) -> QaData:
    return _load(tmp_path_factory, fr_xml, "longctx")


@pytest.fixture(scope="module")
def qa_source(tmp_path_factory: pytest.TempPathFactory, fr_xml: Path) -> QaData:
    return _load(tmp_path_factory, fr_xml, "source")


def _shots(qa: QaData, collage, question, examples: str, rng: random.Random) -> list:
    if examples.startswith("context"):
        return qa.context_examples(collage, question, example_count(examples), rng)
    if examples.startswith("general"):
        general = load_questions(ROOT / "fixtures" / "qa" / "general_examples.jsonl")
        return [shuffle_options(q, rng) for q in general]
    return []


def _inputs(qa: QaData, examples: str) -> tuple[str, Any, list]:
    """A prompt's fixed inputs: the rendered collage, the shuffled question and the examples (a seed each)."""
    question = qa.question(0, 1500)
    collage = qa.collage(question, 1500, "middle", random.Random(0))
    shots = _shots(qa, collage, question, examples, random.Random(1))
    return qa.render(collage), shuffle_options(question, random.Random(2)), shots


@pytest.mark.parametrize("examples", EXAMPLES)
@pytest.mark.parametrize("prompt", PROMPTS)
def test_mcqa_prompt(snapshot, qa: QaData, prompt: str, examples: str) -> None:
    context, question, shots = _inputs(qa, examples)
    assert build_request(context, question, prompt, shots).to_json() == snapshot


@pytest.mark.parametrize("examples", EXAMPLES)
@pytest.mark.parametrize("prompt", PROMPTS)
def test_source_qa_prompt(snapshot, qa_source: QaData, prompt: str, examples: str) -> None:
    """Every prompt variant of the study (--longctx-protocol source), on a small collage of raw chunks."""
    context, question, shots = _inputs(qa_source, examples)
    assert source.build_request(context, question, prompt, examples, shots).to_json() == snapshot


def test_source_baseline_prompt(snapshot, qa_source: QaData) -> None:
    """The study's right-section baseline (and wrong-section control) prompt: one raw chunk, prefilled answer."""
    question = qa_source.question(0, 1500)
    text = qa_source.pieces[question.section_id].text
    request = source.build_request(text, shuffle_options(question, random.Random(2)), "plain", "none")
    assert request.to_json() == snapshot


def test_lrt_file(snapshot) -> None:
    for mode in ("none", "full", "block-4"):
        file = build_file(20, mode, random.Random(0))
        assert lrt_request(file).to_json() == snapshot(name=mode)


def test_lrt_source_file(snapshot) -> None:
    """The source protocol's prompt: the README's header, line format and instruction, word for word."""
    for mode, lines in (("none", 20), ("full", 20), ("block-10", 40)):
        file = build_source_file(lines, mode, random.Random(0))
        assert lrt_request(file).to_json() == snapshot(name=mode)


DOCS = ROOT / "fixtures" / "docs"


@pytest.mark.parametrize("protocol", ["longctx", "source"])
def test_docs_prompts(snapshot, protocol: str) -> None:
    """The docs experiment's generation, answer and judge prompts (source: the write-up's, word for word)."""
    from pytest_longctx.experiments.docs.experiment import DocsExperiment
    from pytest_longctx.experiments.docs.generate import generation_request
    from pytest_longctx.experiments.docs.judge import judge_request

    docs = DocsExperiment.load(DOCS, count_tokens=TiktokenCounter().count, budget=1500, protocol=protocol)
    item = docs.item_for(0)
    generate = generation_request(docs.docs[item.doc], 2, protocol)
    answer = docs.question(item, docs.render(docs.at_depth(item, 50)))
    if protocol == "source":
        from pytest_longctx.experiments.docs.source import judge_request as source_judge

        judge = source_judge(item.question, item.answer, "It was " + item.answer + ".")
    else:
        judge = judge_request(item.question, " / ".join(item.golds), "It was " + item.answer + ".")
    assert generate.to_json() == snapshot(name="generate")
    assert answer.to_json() == snapshot(name="answer")
    assert judge.to_json() == snapshot(name="judge")


def test_qa_generation_prompt(snapshot, qa: QaData) -> None:
    """The few-shot prompt that asks a Claude model for one section's five questions (longctx-qa generate)."""
    from pytest_longctx.experiments.qa.generate_prompt import build_request as generation_request
    from pytest_longctx.experiments.qa.generate_prompt import load_examples, pick_examples

    sections = {s.id: s.text for s in qa.issue.sections}
    examples = load_examples(load_questions(QUESTIONS), sections)
    target = next(s for s in qa.issue.sections if s.id not in {e.section_id for e in examples[:3]} and s.tokens < 1500)
    request = generation_request(target.id, target.text, "2024-02-12", pick_examples(examples, target.id))
    assert request.template == "fr-qa-generate@1" and len(request.messages) == 5
    assert request.to_json() == snapshot
