"""Lost in the Middle (Liu et al., 2023; TACL 2024), multi-document QA (``litm-qa``): does accuracy depend on where
the relevant document sits?

An NQ-Open question and ``documents`` Wikipedia passages, exactly one of which (the gold passage, at index
``gold_position``) holds the answer; the others are the passages most relevant to the question (BM25) that hold
no answer. Closed-book (``documents=0``) and oracle (``1``) cells bracket it. The paper's prompts, greedy decoding,
100 new tokens; an answer is right when a normalised gold answer occurs in it (best_subspan_em). Trial *i* of every
cell asks the same question (paired); under a remote model's default ``--longctx-litm-design blocks`` a question
is asked at one number of documents at every gold position (and some in the baselines), so three times the
questions share the trials (pytest_longctx/experiments/litm/design.py). See pytest_longctx/experiments/litm/;
key-value retrieval is in test_litm_kv.py.
"""

from __future__ import annotations

import pytest

from pytest_longctx import Trial
from pytest_longctx.experiments.litm.contexts import DISTRACTORS_NOTE, Bm25, qa_documents
from pytest_longctx.experiments.litm.data import sample_order
from pytest_longctx.experiments.litm.design import LitmDesign
from pytest_longctx.experiments.litm.metric import best_subspan_em
from pytest_longctx.experiments.litm.prompts import check_fits, qa_request


@pytest.mark.longctx("litm-qa")
async def test_litm_qa(longctx: Trial, litm_qa_pool: Bm25, litm_qa_design: LitmDesign | None, documents: int,
                       gold_position: int | None) -> None:
    questions = litm_qa_pool.questions
    if litm_qa_design is not None:  # the block design: this number of documents asks its own questions
        index = litm_qa_design.question(documents, longctx.sample)
        if index is None:
            pytest.skip(f"the litm block design has no question {longctx.sample + 1} for {documents} documents "
                        f"(NQ-Open has {len(questions)} questions)")
        question = questions[index]
    elif longctx.sample >= len(questions):
        pytest.skip(f"NQ-Open has {len(questions)} questions; trial {longctx.sample} would repeat one")
    else:
        question = questions[sample_order(len(questions), longctx.run_seed, "qa")[longctx.sample]]
    docs = qa_documents(question, litm_qa_pool, documents, gold_position or 0, longctx.run_seed) if documents else []
    request = qa_request(question.question, [(d.title, d.text) for d in docs])
    longctx.record(item=f"nq-open-{question.index}", template=request.template, distractors=DISTRACTORS_NOTE)
    tokens = check_fits(longctx, request, "--longctx-litm-documents")
    wrong = tuple(d.text.split(".")[0] for d in docs if not d.gold)[:3] or ("I don't know.",)
    longctx.expect(list(question.answers), says=question.answers[0], wrong=wrong)
    answer = await longctx.ask(request)
    longctx.record(answer=answer.strip(), question=question.question,
                   gold_title=question.title, titles=[d.title for d in docs], context_tokens=tokens)
    assert best_subspan_em(answer, question.answers), f"no gold answer {list(question.answers)} in the answer"
