"""Long-context QA on your own documents (--longctx-docs DIR; default fixtures/docs).

Cells are paired: sample i asks the same reviewed question (a seeded order of the items) in every
depth and size cell, with the same distractor documents, so cells compare with McNemar. Under a remote
model's default ``--longctx-docs-design blocks`` every item is asked at every depth and at a balanced
subset of the sizes, in both arms (pytest_longctx/experiments/docs/design.py). The
context is made of whole documents: the answer document exactly once, among the folder's other
documents as distractors. The model answers in one line. The first line is scored by the primary
scorer (--longctx-docs-scorer, default best-subspan match); exact match, token F1 and an LLM
judge's verdict (and its agreement with subspan) are recorded beside it.

* Position: the context is filled up to the budget (--longctx-docs-context: the model's window
  less room for question and answer, capped by the folder's size); the answer document sits at
  the document boundary nearest the requested token depth.
* Context size: the answer document alone (0%) up to the whole budget (100%), the answer at a
  random boundary. The long-context arm reads every document; the rag arm reads the BM25 top-4
  of the same documents cut into ~200-token chunks (retrieval recall is recorded).

``--longctx-protocol source`` runs Snorkel's write-up: its prompts, one QA pair per document, every
pair at every depth and size, the LLM judge as the scorer (pytest_longctx/experiments/docs/source.py).
"""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.docs.scorers import first_line

pytestmark = pytest.mark.longctx("docs")


async def test_position(longctx, longctx_judge, docs, depth: int) -> None:
    item = docs.item_for(longctx.sample)
    longctx.record(item=item.id, protocol=docs.protocol)  # also on an errored or planned trial
    stack = docs.at_depth(item, depth)
    longctx.expect(item.answer, wrong=docs.wrong_answers(item, longctx.rng))
    answer = await longctx.ask(docs.question(item, docs.render(stack)))
    longctx.record(answer=first_line(answer), tokenizer=longctx.tokenizer,
                   **stack.detail())
    graded = await docs.grade(longctx, longctx_judge, item, answer)
    assert graded.correct, f"{graded.scorer}: expected {item.answer!r}"


async def test_context_size(longctx, longctx_judge, docs, docs_design, context_fraction: int, arm: str) -> None:
    sample = longctx.sample if docs_design is None else docs_design.sample(context_fraction, longctx.sample)
    if sample is None:
        pytest.skip(f"the docs block design gives {context_fraction}% fewer than {longctx.sample + 1} items")
    item = docs.item_for(sample)
    longctx.record(item=item.id, protocol=docs.protocol)  # also on an errored or planned trial
    stack = docs.of_size(item, context_fraction)
    context, retrieval = docs.retrieve(stack, item) if arm == "rag" else (docs.render(stack), {})
    longctx.expect(item.answer, wrong=docs.wrong_answers(item, longctx.rng))
    answer = await longctx.ask(docs.question(item, context))
    longctx.record(answer=first_line(answer), tokenizer=longctx.tokenizer,
                   **stack.detail(), **retrieval)
    graded = await docs.grade(longctx, longctx_judge, item, answer)
    assert graded.correct, f"{graded.scorer}: expected {item.answer!r}"
