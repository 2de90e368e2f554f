"""One multiple-choice trial from start to finish, shared by the qa experiment and its controls."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from pytest_longctx import Oracle, Trial
from pytest_longctx.experiments.qa import source
from pytest_longctx.experiments.qa.mcqa import Shuffled, build_request, ideal_output, shuffle_options
from pytest_longctx.experiments.qa.questions import Question
from pytest_longctx.experiments.qa.scoring import extract_choice


def option_rng(seed: int, key: str) -> random.Random:
    """Option order depends on the asked item only (the question id, ``#k`` on its k-th repeat in a cell), as the
    study drew one permutation per question: every prompt variant, position and size, and every model that asks
    the question, sees the same order."""
    return random.Random(f"{seed}|options|{key}")


async def ask_mc(trial: Trial, question: Question, context: str, *, prompt: str = "plain",
                 examples: Sequence[Shuffled] = (), detail: dict[str, Any] | None = None,
                 scoring: str = "generate", protocol: str = "longctx", variant: str = "none",
                 key: str | None = None) -> tuple[str | None, str]:
    """Ask one shuffled question over ``context``; record expected/given letters; return (given, expected).

    ``protocol="source"`` sends the study's own prompt for ``prompt`` × ``variant`` (the examples name)
    and reads the answer as the study did. ``key`` names the draw (default: the question id).
    """
    trial.record(item=question.id)  # before asking: also on an errored or planned trial
    item = shuffle_options(question, option_rng(trial.run_seed, key or question.id))
    if protocol == "source":
        return await _ask_source(trial, question, item, context, prompt, variant, examples, detail or {})
    request = build_request(context, item, prompt, examples, scoring)
    if request.choices:  # likelihood scoring: the answer is a bare letter after the "<answer>" prefill
        oracle = Oracle(item.letter + "</answer>", tuple(x + "</answer>" for x in item.wrong_letters()))
    else:
        oracle = Oracle(ideal_output(item.letter, prompt, question.evidence),
                        tuple(ideal_output(x, prompt, question.evidence) for x in item.wrong_letters()))
    trial.expect(item.letter, says=oracle.answer, wrong=oracle.wrong)
    raw = await trial.ask(request)
    given = extract_choice(raw, item.options)
    trial.record(item=question.id, expected=item.letter, answer=given, section=question.section_id,
                 kind=question.kind, question=question.question, options=list(item.options),
                 unreadable=given is None, examples=[e.question.id for e in examples],
                 tokenizer=trial.tokenizer, scoring="logprob" if request.choices else "generate",
                 protocol=protocol, template=request.template, **(detail or {}))
    return given, item.letter


async def _ask_source(trial: Trial, question: Question, item: Shuffled, context: str, prompt: str, variant: str,
                      examples: Sequence[Shuffled], detail: dict[str, Any]) -> tuple[str | None, str]:
    request = source.build_request(context, item, prompt, variant, examples)
    oracle = Oracle(source.ideal_output(item.letter, prompt, question.evidence),
                    tuple(source.ideal_output(x, prompt, question.evidence) for x in item.wrong_letters()))
    trial.expect(item.letter, says=oracle.answer, wrong=oracle.wrong)
    raw = await trial.ask(request)
    parsed = source.parse_answer(raw[len(request.prefill or ""):])
    given = parsed if parsed in item.letters() else None
    trial.record(item=question.id, expected=item.letter, answer=given, section=question.section_id,
                 kind=question.kind, question=question.question, options=list(item.options),
                 unreadable=parsed == "_", source_parse=parsed, examples=[e.question.id for e in examples],
                 tokenizer=trial.tokenizer, scoring="generate", protocol="source", template=request.template,
                 **detail)
    return given, item.letter
