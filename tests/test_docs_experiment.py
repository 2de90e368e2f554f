"""The docs experiment's session object on the shipped folder: real prompts, real token counts."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.backends.fake import FakeBackend
from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.dispatch.client import ModelClient
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.docs.experiment import DocsExperiment
from pytest_longctx.experiments.docs.judge import JudgeError
from pytest_longctx.session.trial import Trial

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "docs"
COUNT = TiktokenCounter().count


@pytest.fixture(scope="module")
def docs() -> DocsExperiment:
    return DocsExperiment.load(FIXTURES, count_tokens=COUNT, budget=199_488, label="fixtures/docs")


def context_of(request: Request) -> str:
    text = request.messages[0].content
    return text.split("\n\n", 1)[1].rsplit("\n\nQuestion: ", 1)[0]


def test_load_counts_tokens_once_per_document(docs: DocsExperiment) -> None:
    assert len(docs.docs) == 14 and len(docs.items) == 140
    assert docs.counts == {name: COUNT(block) for name, block in docs.blocks.items()}
    assert docs.budget == sum(docs.counts.values()) + docs.sep_tokens * 13  # capped by the folder
    assert set(docs.fixtures) == {"docs:fixtures/docs", "docs-qa:fixtures/docs/longctx-qa.jsonl"}


@pytest.mark.parametrize("depth", [0, 25, 50, 75, 100])
def test_answer_document_once_at_the_requested_token_depth(docs: DocsExperiment, depth: int) -> None:
    for sample in range(8):
        item = docs.item_for(sample)
        stack = docs.at_depth(item, depth)
        context = context_of(docs.question(item, docs.render(stack)))
        answer_block = docs.blocks[item.doc]
        assert context.count(answer_block) == 1
        assert all(context.count(docs.blocks[name]) == 1 for name in stack.docs)
        assert sorted(stack.docs) == sorted(docs.docs)  # the whole folder fits the fake's window
        before, after = context.split(answer_block)
        # Depth measured with the tokenizer on the real text, within half of the largest document.
        rest = COUNT(before + after)
        measured = 100 * COUNT(before) / rest
        half_doc = 100 * (max(docs.counts.values()) / 2 + docs.sep_tokens + 2) / rest
        assert abs(measured - depth) <= half_doc, (sample, measured)
        assert abs(measured - stack.depth) <= 1.0


def test_window_budget_limits_the_context(tmp_path: Path) -> None:
    small = DocsExperiment.load(FIXTURES, count_tokens=COUNT, budget=1500)
    for sample in range(10):
        item = small.item_for(sample)
        stack = small.at_depth(item, 50)
        assert COUNT(small.render(stack)) <= 1500 + 10 and stack.docs.count(item.doc) == 1
        sized = small.of_size(item, 0)
        assert sized.docs == (item.doc,)
    with pytest.raises(UsageError, match=r"more than the docs context budget of 300 \(--longctx-docs-context\)"):
        DocsExperiment.load(FIXTURES, count_tokens=COUNT, budget=300)


def test_rag_context_is_top_k_chunks_of_the_same_documents(docs: DocsExperiment) -> None:
    item = docs.item_for(3)
    stack = docs.of_size(item, 50)
    context, detail = docs.retrieve(stack, item)
    assert len(detail["retrieved"]) == 4 and detail["top_k"] == 4
    assert {cid.split("#")[0] for cid in detail["retrieved"]} <= set(stack.docs)
    assert context.count("[Document: ") == 4
    assert detail["retrieval_recall"] in (0, 1)


def test_fake_wrong_answers_are_other_documents_answers(docs: DocsExperiment) -> None:
    item = docs.items[0]
    wrong = docs.wrong_answers(item, random.Random(0))
    others = {it.answer for it in docs.items if it.doc != item.doc}
    assert len(wrong) == 3 and set(wrong) <= others


class Scripted:
    provider, model, context_window, tokenizer = "scripted", "judge", 8192, "words"

    def __init__(self, reply: str) -> None:
        self.reply = reply

    async def complete(self, request: Request) -> Completion:
        return Completion(text=self.reply)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def aclose(self) -> None:
        return None


def trial(client: ModelClient) -> Trial:
    return Trial(experiment="docs", params={}, sample=0, seed=1, client=client, nodeid="t")


def grade(docs: DocsExperiment, judge_reply: str, answer: str, scorer: str = "subspan") -> tuple[bool, Trial]:
    docs = DocsExperiment(**{**docs.__dict__, "scorer": scorer})
    t = trial(ModelClient(FakeBackend("perfect"), None))
    t.raw = answer
    graded = asyncio.run(docs.grade(t, ModelClient(Scripted(judge_reply), None), docs.items[0], answer))
    return graded.correct, t


def test_grade_records_every_scorer_and_judge_agreement(docs: DocsExperiment) -> None:
    gold = docs.items[0].answer
    correct, t = grade(docs, '{"correct": false}', f"It is {gold}.\nbecause ...")
    assert correct and t.raw.startswith("It is")  # the judge's reply is not the trial's raw answer
    assert {k: t.detail[k] for k in ("em", "subspan", "judge", "judge_agree", "scorer")} == {
        "em": False, "subspan": True, "judge": False, "judge_agree": False, "scorer": "subspan"}
    assert 0 < t.detail["f1"] < 1 and len(t.completions) == 1


def test_unreadable_judge_is_null_not_wrong(docs: DocsExperiment) -> None:
    correct, t = grade(docs, "Well, it depends on how you read the question, I suppose.", docs.items[0].answer)
    assert correct and t.detail["judge"] is None and t.detail["judge_agree"] is None
    assert t.detail["judge_reply"].startswith("Well, it depends")


def test_unreadable_judge_is_an_error_when_the_judge_is_the_primary_scorer(docs: DocsExperiment) -> None:
    with pytest.raises(JudgeError, match="judge reply has no verdict"):
        grade(docs, "no idea", docs.items[0].answer, scorer="judge")
    assert grade(docs, '{"correct": false}', docs.items[0].answer, scorer="judge")[0] is False


def test_judge_with_the_models_own_client_keeps_the_answer_as_raw(docs: DocsExperiment) -> None:
    client = ModelClient(FakeBackend("perfect"), None)
    t = trial(client)
    item = docs.items[0]
    rng = random.Random(0)
    t.expect(item.answer, wrong=docs.wrong_answers(item, rng))
    answer = asyncio.run(t.ask(docs.question(item, docs.render(docs.at_depth(item, 50)))))
    graded = asyncio.run(docs.grade(t, client, item, answer))
    assert graded.correct and t.raw == item.answer and t.detail["judge"] is True and len(t.completions) == 2


def test_no_approved_items_is_a_usage_error(tmp_path: Path) -> None:
    for name in ("tollerton-mill-history.md", "skerrow-rock-log.txt"):
        (tmp_path / name).write_text((FIXTURES / name).read_text())
    (tmp_path / "longctx-qa.jsonl").write_text(
        '{"doc": "tollerton-mill-history.md", "question": "Who built Tollerton Mill?", "answer": "Josiah Penhallow"}\n')
    with pytest.raises(UsageError, match=r"no approved QA items \(1 pending\); approve some with"):
        DocsExperiment.load(tmp_path, count_tokens=COUNT, budget=8000)
    assert len(DocsExperiment.load(tmp_path, count_tokens=COUNT, budget=8000, review="optional").items) == 1
    (tmp_path / "longctx-qa.jsonl").unlink()
    with pytest.raises(UsageError, match=r"no QA file; run `longctx-docs generate"):
        DocsExperiment.load(tmp_path, count_tokens=COUNT, budget=8000)


# -- paired cells and the source protocol ----------------------------------------------------------

def test_sample_i_asks_item_i_in_every_cell_with_the_same_distractors(docs: DocsExperiment) -> None:
    items = [docs.item_for(i) for i in range(len(docs.items))]
    assert sorted(it.id for it in items) == sorted(it.id for it in docs.items)  # each item once, no replacement
    again = DocsExperiment.load(FIXTURES, count_tokens=COUNT, budget=199_488)
    assert [again.item_for(i).id for i in range(5)] == [it.id for it in items[:5]]  # seeded, not per process
    other = DocsExperiment(**{**docs.__dict__, "seed": 1})
    assert [other.item_for(i).id for i in range(5)] != [it.id for it in items[:5]]
    small = DocsExperiment.load(FIXTURES, count_tokens=COUNT, budget=1500)
    item = small.item_for(0)
    depths = [small.at_depth(item, d) for d in (0, 50, 100)]
    assert len({frozenset(s.docs) for s in depths}) == 1  # only the answer's position changes
    assert depths[0].gold_index == 0 and depths[-1].gold_index == len(depths[-1].docs) - 1
    assert small.of_size(item, 50) == small.of_size(item, 50)  # long-context and rag arms see one stack
    assert set(small.of_size(item, 25).docs) <= set(small.of_size(item, 100).docs)


def test_source_protocol_one_pair_per_document_plain_documents_and_its_prompts() -> None:
    src = DocsExperiment.load(FIXTURES, count_tokens=COUNT, budget=199_488, protocol="source")
    assert len(src.items) == len(src.docs) == 14 and len({it.doc for it in src.items}) == 14
    assert src.scorer == "judge" and src.use_judge
    item = src.item_for(0)
    request = src.question(item, src.render(src.at_depth(item, 50)))
    text = request.messages[0].content
    assert request.template == "docs-source-answer@1" and "[Document: " not in text
    assert text.startswith("Using only the context provided") and text.endswith(f"Question: {item.question}\nAnswer:")
    t = trial(ModelClient(FakeBackend("perfect"), None))
    judge = Scripted('{"correct": true}')
    graded = asyncio.run(src.grade(t, ModelClient(judge, None), item, "It is " + item.answer))
    assert graded.correct and graded.scorer == "judge" and t.detail["protocol"] == "source"
