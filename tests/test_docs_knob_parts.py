"""The docs knob conditions' parts on plain values and the shipped folder: abstention, distractor insertion, overlap,
the QA file's new fields, and the graded server's reading of the new prompts."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.corpus.tokens import TiktokenCounter
from pytest_longctx.errors import UsageError
from pytest_longctx.experiments.docs import knobs
from pytest_longctx.experiments.docs.experiment import DocsExperiment
from pytest_longctx.experiments.docs.grader import make_grader
from pytest_longctx.experiments.docs.overlap import FLAG_ABOVE, content_overlap, flagged
from pytest_longctx.experiments.docs.qa_file import load_qa, parse_item

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "docs"
COUNT = TiktokenCounter().count


@pytest.fixture(scope="module")
def docs() -> DocsExperiment:
    return DocsExperiment.load(FIXTURES, count_tokens=COUNT, budget=8_000, label="fixtures/docs")


@pytest.mark.parametrize(("reply", "said"), [
    ("Not in the documents.", True), ("The documents do not mention it.", True), ("I don't know", True),
    ("Unknown.", True), ("It is not stated in the documents", True), ("Canal Street station", False),
    ("Notably, Canal Street station", False), ("Pedalworks Ltd\nnot in the documents", False)])
def test_abstention_is_read_from_the_first_line(reply: str, said: bool) -> None:
    assert knobs.abstained(reply) is said


def test_shipped_qa_file_has_reviewed_distractors_and_low_overlap_paraphrases(docs: DocsExperiment) -> None:
    items = load_qa(FIXTURES / "longctx-qa.jsonl")
    lured, paraphrased = knobs.with_distractors(items), knobs.with_paraphrase(items, "required")
    assert len(lured) == 14 and len({it.doc for it in lured}) == 14  # one item a document, 4 distractors each
    assert len(paraphrased) == 28 and all(it.paraphrase and not it.paraphrase.flagged for it in paraphrased)
    for item in lured:  # a distractor never holds the gold, and its own answer is in it
        for d in item.distractors:
            assert all(f" {g.lower()} " not in f" {d.text.lower()} " for g in item.golds)
            assert d.answer.lower() in d.text.lower()
    measured = {it.id: docs.overlap_of(it, "low-overlap") for it in paraphrased}
    assert all(it.paraphrase and it.paraphrase.content_overlap == measured[it.id]["content_overlap"]
               and it.paraphrase.bm25 == measured[it.id]["bm25"] for it in paraphrased)  # the file says what it is
    literal = [docs.overlap_of(it, "literal")["content_overlap"] for it in paraphrased]
    low = [m["content_overlap"] for m in measured.values()]
    assert sum(literal) / len(literal) > 0.4 and sum(low) / len(low) < 0.05 and max(low) <= FLAG_ABOVE


def test_content_overlap_and_the_flag() -> None:
    assert content_overlap("Who built Tollerton Mill in 1787?", "The mill was built in 1787 by Josiah.") == 0.75
    assert content_overlap("the of and", "anything") == 0.0
    assert flagged(0.5) and not flagged(FLAG_ABOVE) and not flagged(None)


def test_new_fields_round_trip_and_bad_ones_are_one_line_errors() -> None:
    row = {"doc": "a.md", "question": "Q?", "answer": "A", "distractors": [{"text": "B is it.", "answer": "B"}],
           "paraphrase": {"question": "P?", "status": "approved", "content_overlap": 0.1, "bm25": 1.5}}
    item = parse_item(row, "f:1")
    again = parse_item(json.loads(json.dumps(item.to_json())), "f:1")
    assert again.distractors == item.distractors and again.paraphrase == item.paraphrase
    with pytest.raises(UsageError, match=r"^f:2: 'distractors' must be a list"):
        parse_item({**row, "distractors": ["B is it."]}, "f:2")
    with pytest.raises(UsageError, match=r"^f:3: paraphrase status 'ok' is not one of"):
        parse_item({**row, "paraphrase": {"question": "P?", "status": "ok"}}, "f:3")


def test_unanswerable_context_is_the_same_without_the_answer_document(docs: DocsExperiment) -> None:
    item = knobs.pick(docs.items, 0, docs.seed, "unanswerable")
    stack = docs.whole(item)
    present, removed = docs.render(stack), knobs.without_answer(stack)
    assert f"[Document: {item.doc}]" in present and f"[Document: {item.doc}]" not in removed
    assert present.replace(docs.blocks[item.doc], "").replace("\n\n\n\n", "\n\n").strip() == removed.strip()
    assert knobs.removed_detail(stack)["n_docs"] == len(stack.units) - 1


def test_distractors_go_to_the_same_places_whatever_their_count(docs: DocsExperiment) -> None:
    item = knobs.with_distractors(docs.items)[0]
    room = knobs.distractor_tokens(item, docs.distractor_tokens)
    stack = docs.whole(item, room=room)
    assert stack.tokens + room <= docs.budget
    built = {k: knobs.insert(stack, item, k, docs.distractor_tokens, random.Random(7)) for k in (0, 1, 4)}
    assert built[0][0] == docs.render(stack) and built[0][1] == []
    assert built[1][1] == built[4][1][:1]
    assert all(d.text in built[4][0] for d in item.distractors) and item.distractors[1].text not in built[1][0]
    assert f"[Document: {item.doc}]\n{docs.docs[item.doc].text}" in built[4][0]  # the answer document untouched
    assert knobs.answered_distractor(f"It was {item.distractors[2].answer}.", item, 4) == 2
    assert knobs.answered_distractor(item.distractors[2].answer, item, 1) is None
    assert knobs.answered_distractor(item.answer, item, 4) is None


class _Task:
    """The docs grader's reading of one prompt, as attributes."""

    def __init__(self, grade: Any, prompt: str) -> None:
        found = grade(prompt)
        assert found is not None, prompt[:80]
        self.item, self.right, self.wrong = found["item"], found["right"], found["wrong"]


def _keys() -> Any:
    return make_grader({"docs-key": str(FIXTURES)})


def recognise(prompt: str, grade: Any) -> _Task:
    return _Task(grade, prompt)


def test_graded_server_reads_the_abstention_prompt(docs: DocsExperiment) -> None:
    item = knobs.pick(docs.items, 0, docs.seed, "unanswerable")
    stack = docs.whole(item)
    keys = _keys()
    there = recognise(knobs.abstain_request(item.question, docs.render(stack)).messages[0].content, keys)
    gone = recognise(knobs.abstain_request(item.question, knobs.without_answer(stack)).messages[0].content, keys)
    assert (there.right, gone.right) == (item.answer, knobs.ABSTAIN_REPLY) and there.item == gone.item == item.id
    assert not knobs.abstained(gone.wrong) and gone.wrong != item.answer  # hallucinating: another item's answer


def test_graded_server_answers_paraphrases_and_falls_for_inserted_distractors(docs: DocsExperiment) -> None:
    keys = _keys()
    item = next(it for it in knobs.with_distractors(docs.items) if it.paraphrase)
    stack = docs.whole(item, room=knobs.distractor_tokens(item, docs.distractor_tokens))
    context, _ = knobs.insert(stack, item, 1, docs.distractor_tokens, random.Random(1))
    task = recognise(docs.question(item, context).messages[0].content, keys)
    assert task.right == item.answer and task.wrong == item.distractors[0].answer
    asked = recognise(docs.question(docs.paraphrased(item), docs.render(stack)).messages[0].content, keys)
    assert asked.item == item.id and asked.right == item.answer
    assert recognise(docs.question(item, docs.render(stack)).messages[0].content, keys).wrong not in {
        d.answer for d in item.distractors}  # none inserted: another item's answer


def test_generate_paraphrase_measures_flags_and_review_approves(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``generate --paraphrase`` through the CLI with fake/perfect (it echoes the question: flagged unless the literal
    question was low already), then ``review --approve-paraphrase``."""
    from pytest_longctx.experiments.docs.__main__ import main

    folder = tmp_path / "docs"
    folder.mkdir()
    names = ("tollerton-mill-history.md", "skerrow-rock-log.txt")
    for name in names:
        shutil.copy(FIXTURES / name, folder / name)
    rows = [json.loads(line) for line in (FIXTURES / "longctx-qa.jsonl").read_text().splitlines()]
    kept = [{k: v for k, v in r.items() if k != "paraphrase"} for r in rows
            if r["doc"] in names and int(r["id"].rsplit("/", 1)[1]) <= 3]
    (folder / "longctx-qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    assert main(["generate", str(folder), "--model", "fake/perfect", "--no-cache", "--paraphrase"]) == 0
    items = {it.id: it for it in load_qa(folder / "longctx-qa.jsonl")}
    assert all(it.paraphrase and it.paraphrase.status == "pending" for it in items.values())
    mill = items["tollerton-mill-history/1"].paraphrase
    assert mill and mill.question == "In other words: Who built Tollerton Mill in 1787?" and mill.flagged
    assert mill.content_overlap == 0.667 and mill.generated_by == "fake/perfect (docs-paraphrase@1)"  # 4 of 6 words
    assert "tollerton-mill-history/1: pending paraphrase, content overlap 0.667, BM25" in capsys.readouterr().out
    assert main(["generate", str(folder), "--model", "fake/perfect", "--no-cache", "--paraphrase"]) == 0  # none left
    assert main(["review", str(folder), "--approve-paraphrase", "tollerton-mill-history/1"]) == 0
    out = capsys.readouterr().out
    assert "P: In other words: Who built Tollerton Mill in 1787?  [paraphrase approved, content overlap 0.667" in out
    reviewed = {it.id: it for it in load_qa(folder / "longctx-qa.jsonl")}
    assert [it.id for it in knobs.with_paraphrase(list(reviewed.values()), "required")] == ["tollerton-mill-history/1"]
    assert main(["review", str(folder), "--reject-paraphrase", "nope/1"]) == 2
    assert "error: no paraphrase for item id(s) nope/1" in capsys.readouterr().err


def test_a_low_overlap_rewrite_is_not_flagged() -> None:
    from pytest_longctx.experiments.docs.documents import load_documents
    from pytest_longctx.experiments.docs.paraphrase import Rewrite, attach, parse_paraphrase

    docs = {d.name: d for d in load_documents(FIXTURES)}
    item = next(it for it in load_qa(FIXTURES / "longctx-qa.jsonl") if it.id == "tollerton-mill-history/1")
    question = parse_paraphrase('Sure: {"paraphrase": "Whose work produced the grinding works long ago?"}')
    assert question == "Whose work produced the grinding works long ago?"
    assert parse_paraphrase("Who raised it?\nthanks") == "Who raised it?" and parse_paraphrase("no") is None
    lines = attach([Rewrite(item, question), Rewrite(item, error="model call failed: 500")], docs, "me")
    assert item.paraphrase and item.paraphrase.content_overlap == 0.0 and not item.paraphrase.flagged
    assert lines[1] == "FAILED tollerton-mill-history/1: model call failed: 500"


def test_knob_prompts(snapshot) -> None:  # type: ignore[no-untyped-def]
    """The abstention prompt (answer document removed), a distractor context, a paraphrased question and the
    paraphrase generation request, for fixed seeds: a template change shows up as a reviewed diff."""
    from pytest_longctx.experiments.docs.overlap import answer_passage, sentences
    from pytest_longctx.experiments.docs.paraphrase import paraphrase_request

    small = DocsExperiment.load(FIXTURES, count_tokens=COUNT, budget=1500)
    item = next(it for it in knobs.with_distractors(small.items) if it.paraphrase)
    stack = small.whole(item, room=knobs.distractor_tokens(item, small.distractor_tokens))
    lured, _ = knobs.insert(stack, item, 4, small.distractor_tokens, small.rng_for(item, "distractors"))
    passage = answer_passage(sentences(item.doc, small.docs[item.doc].text), item.doc, item.golds)
    assert passage is not None
    assert knobs.abstain_request(item.question, knobs.without_answer(stack)).to_json() == snapshot(name="abstain")
    assert small.question(item, lured).to_json() == snapshot(name="distractors")
    assert small.question(small.paraphrased(item), small.render(stack)).to_json() == snapshot(name="paraphrased")
    assert paraphrase_request(item, passage.text).to_json() == snapshot(name="paraphrase-generate")
