"""What breaks today's models, on your own documents (pytest_longctx/experiments/docs/knobs.py).

Each condition pairs within items: sample i asks one item in every cell of its test, in one context of the whole
budget built for that item, and the cells differ only by the knob. Not run on a CPU model (it sits near zero) nor
under ``--longctx-protocol source``.

* Unanswerable (``answer_doc``): the answer document present, or removed from the otherwise identical context;
  the prompt allows "Not in the documents." in both. Right when removed: abstaining. The removed cell's error rate
  is the hallucination rate, reported with its clustered interval beside accuracy on the present cell.
* Distractors (``distractors`` 0 / 1 / 4): the item's reviewed distractor sentences (they share the question's
  words and answer a near question) inserted into other documents. On a miss: which distractor was answered.
* Low overlap (``question_form``): the item's reviewed paraphrase, sharing few content words with its answer
  passage, asked instead of the literal question; both forms' overlap (content words, BM25) is recorded.
"""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.docs import knobs
from pytest_longctx.experiments.docs.scorers import first_line

pytestmark = pytest.mark.longctx("docs")


async def test_unanswerable(longctx, longctx_judge, docs, answer_doc: str) -> None:
    item = knobs.pick(docs.items, longctx.sample, docs.seed, "unanswerable")
    longctx.record(item=item.id, protocol=docs.protocol, answer_doc_present=answer_doc == "present")
    stack = docs.whole(item)
    context = docs.render(stack) if answer_doc == "present" else knobs.without_answer(stack)
    wrong = docs.wrong_answers(item, longctx.rng)
    longctx.expect(item.answer if answer_doc == "present" else knobs.ABSTAIN_REPLY,
                   wrong=wrong if answer_doc == "removed" else (*wrong, knobs.ABSTAIN_REPLY))
    answer = await longctx.ask(knobs.abstain_request(item.question, context))
    abstained = knobs.abstained(answer)
    longctx.record(answer=first_line(answer), tokenizer=longctx.tokenizer, abstained=abstained,
                   **(stack.detail() if answer_doc == "present" else knobs.removed_detail(stack)))
    if answer_doc == "removed":
        assert abstained, f"answered {first_line(answer)!r} though the answer document was removed"
        return
    graded = await docs.grade(longctx, longctx_judge, item, answer)
    assert graded.correct and not abstained, f"{graded.scorer}: expected {item.answer!r}"


async def test_distractors(longctx, longctx_judge, docs, distractors: int) -> None:
    item = knobs.pick(knobs.with_distractors(docs.items), longctx.sample, docs.seed, "distractors")
    longctx.record(item=item.id, protocol=docs.protocol)
    stack = docs.whole(item, room=knobs.distractor_tokens(item, docs.distractor_tokens))
    context, where = knobs.insert(stack, item, distractors, docs.distractor_tokens, docs.rng_for(item, "distractors"))
    lures = tuple(d.answer for d in item.distractors[:distractors])
    longctx.expect(item.answer, wrong=lures or docs.wrong_answers(item, longctx.rng))
    answer = await longctx.ask(docs.question(item, context))
    longctx.record(answer=first_line(answer), tokenizer=longctx.tokenizer, inserted=where,
                   distractor_answered=knobs.answered_distractor(answer, item, distractors), **stack.detail())
    graded = await docs.grade(longctx, longctx_judge, item, answer)
    assert graded.correct, f"{graded.scorer}: expected {item.answer!r}"


async def test_low_overlap(longctx, longctx_judge, docs, question_form: str) -> None:
    item = knobs.pick(knobs.with_paraphrase(docs.items, docs.review), longctx.sample, docs.seed, "low-overlap")
    longctx.record(item=item.id, protocol=docs.protocol)
    stack = docs.whole(item)
    asked = item if question_form == "literal" else docs.paraphrased(item)
    longctx.expect(item.answer, wrong=docs.wrong_answers(item, longctx.rng))
    answer = await longctx.ask(docs.question(asked, docs.render(stack)))
    longctx.record(answer=first_line(answer), tokenizer=longctx.tokenizer, **docs.overlap_of(item, question_form),
                   **stack.detail())
    graded = await docs.grade(longctx, longctx_judge, asked, answer)
    assert graded.correct, f"{graded.scorer}: expected {item.answer!r}"
