"""The docs experiment's grader for the local test server (``pytest_longctx_graders``): the answer prompts (longctx,
source), asked by the question or its paraphrase; right: the ``docs-key`` answer (the QA file, or the folder holding
longctx-qa.jsonl); wrong: the answer of an item's distractor sentence found in the prompt, else another item's
answer. The abstention prompt: right is the key's answer when the prompt holds the item's document
(``[Document: NAME]``), else the reply the prompt asks for; wrong: another item's answer. ``docs-judge``: the
judge prompts (longctx, source), never graded: always judged right (gold a word-aligned part of the answer)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_longctx.util.grading import (
    AnswerKey,
    Keyed,
    contains,
    key_text,
    load_key,
    pick,
    squash,
    tail,
    task,
    wrong_answer,
)

QA_FILE = "longctx-qa.jsonl"
_ANSWER = ("Answer the question using the documents below.", "\nQuestion: (.*)\nAnswer with a short phrase "
           "from the documents, on one line, and nothing else.")
_SOURCE_ANSWER = ("Using only the context provided, answer the question in a few words.", r"\nQuestion: (.*)\nAnswer:")
_ABSTAIN = ("Answer the question using only the documents below. They may not contain the answer.",
            "\nQuestion: (.*)\nAnswer with a short phrase from the documents, on one line, and nothing else. "
            "If the documents do not answer the question, reply: (.*)")
_JUDGE = ("You are grading an answer to a question about a document.",
          r"\nQuestion: (?P<q>.*?)\nGold answer: (?P<gold>.*?)\nAnswer to grade: (?P<answer>.*?)\n\nThe answer is")
_JUDGE_SOURCE = ("For the question provided, return a JSON object with a `correct` key",
                 r"\nQuestion: (?P<q>.*?)\nAnswer: (?P<answer>.*?)\nGold standard answer: (?P<gold>.*)\nJSON:")


@dataclass(frozen=True)
class _Item(Keyed):
    """A docs item: its document, its distractor sentences as (text, answer) and its low-overlap paraphrase."""

    doc: str = ""
    distractors: tuple[tuple[str, str], ...] = ()
    paraphrase: str = ""


def _item(index: int, row: dict[str, Any], where: str) -> Keyed:
    question = key_text(row, "question", where)
    aliases = row.get("aliases") or []
    lures = tuple((str(d.get("text")), str(d.get("answer"))) for d in row.get("distractors") or []
                  if isinstance(d, dict))
    paraphrase = row.get("paraphrase")
    asked = paraphrase.get("question") if isinstance(paraphrase, dict) else None
    return _Item(str(row.get("id") or question), (key_text(row, "answer", where), *map(str, aliases)),
                 str(row.get("doc") or ""), lures, asked if isinstance(asked, str) else "")


def _with_paraphrases(key: AnswerKey) -> AnswerKey:
    """The low-overlap question asks the same item: it is looked up too."""
    for item in list(key.items.values()):
        if isinstance(item, _Item) and item.paraphrase:
            key.items.setdefault(squash(item.paraphrase), item)
    return key


def _answer(prompt: str, key: AnswerKey, pattern: str) -> Mapping[str, Any]:
    keyed = key.find(tail(prompt, pattern, "docs").group(1))
    lures = [answer for text, answer in getattr(keyed, "distractors", ()) if text in prompt]
    return task("docs", keyed.id, keyed.answers[0],
                pick(prompt, lures) if lures else wrong_answer(prompt, key, keyed.answers, contains))


def _abstain(prompt: str, key: AnswerKey) -> Mapping[str, Any]:
    found = tail(prompt, _ABSTAIN[1], "docs")
    keyed = key.find(found.group(1))
    there = f"[Document: {getattr(keyed, 'doc', '')}]" in prompt
    return task("docs", keyed.id, keyed.answers[0] if there else found.group(2),
                wrong_answer(prompt, key, keyed.answers, contains))


def _judge(prompt: str, pattern: str, split: bool) -> Mapping[str, Any]:
    found = re.search(pattern, prompt, re.S)
    if found is None:
        raise ValueError(f"graded: a docs judge prompt without question, gold and answer: {prompt!r:.120}")
    gold = found.group("gold")
    golds = gold.split(" / ") if split else [gold]
    verdict = any(contains(found.group("answer"), g) for g in golds)
    return task("docs-judge", squash(found.group("q")), json.dumps({"correct": verdict}),
                json.dumps({"correct": not verdict}), graded=False)


def make_grader(settings: Mapping[str, str]) -> Callable[[str], Mapping[str, Any] | None]:
    key = _with_paraphrases(load_key(settings, "docs-key", _item, folder_file=QA_FILE))

    def grade(prompt: str) -> Mapping[str, Any] | None:
        for opening, pattern in (_ANSWER, _SOURCE_ANSWER):
            if prompt.startswith(opening):
                return _answer(prompt, key, pattern)
        if prompt.startswith(_ABSTAIN[0]):
            return _abstain(prompt, key)
        if prompt.startswith(_JUDGE[0]):
            return _judge(prompt, _JUDGE[1], split=True)
        if prompt.startswith(_JUDGE_SOURCE[0]):
            return _judge(prompt, _JUDGE_SOURCE[1], split=False)
        return None

    return grade
