"""The docs experiment's grader for the local test server (``pytest_longctx_graders``): the answer prompts (longctx,
source); right: the ``docs-key`` answer (the QA file, or the folder holding longctx-qa.jsonl); wrong: another item's
answer. ``docs-judge``: the judge prompts (longctx, source), never graded: always judged right (gold a word-aligned
part of the answer)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_longctx.util.grading import AnswerKey, Keyed, contains, key_text, load_key, squash, tail, task, wrong_answer

QA_FILE = "longctx-qa.jsonl"
_ANSWER = ("Answer the question using the documents below.", "\nQuestion: (.*)\nAnswer with a short phrase "
           "from the documents, on one line, and nothing else.")
_SOURCE_ANSWER = ("Using only the context provided, answer the question in a few words.", r"\nQuestion: (.*)\nAnswer:")
_JUDGE = ("You are grading an answer to a question about a document.",
          r"\nQuestion: (?P<q>.*?)\nGold answer: (?P<gold>.*?)\nAnswer to grade: (?P<answer>.*?)\n\nThe answer is")
_JUDGE_SOURCE = ("For the question provided, return a JSON object with a `correct` key",
                 r"\nQuestion: (?P<q>.*?)\nAnswer: (?P<answer>.*?)\nGold standard answer: (?P<gold>.*)\nJSON:")


def _item(index: int, row: dict[str, Any], where: str) -> Keyed:
    question = key_text(row, "question", where)
    aliases = row.get("aliases") or []
    return Keyed(str(row.get("id") or question), (key_text(row, "answer", where), *map(str, aliases)))


def _answer(prompt: str, key: AnswerKey, pattern: str) -> Mapping[str, Any]:
    keyed = key.find(tail(prompt, pattern, "docs").group(1))
    return task("docs", keyed.id, keyed.answers[0], wrong_answer(prompt, key, keyed.answers, contains))


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
    key = load_key(settings, "docs-key", _item, folder_file=QA_FILE)

    def grade(prompt: str) -> Mapping[str, Any] | None:
        for opening, pattern in (_ANSWER, _SOURCE_ANSWER):
            if prompt.startswith(opening):
                return _answer(prompt, key, pattern)
        if prompt.startswith(_JUDGE[0]):
            return _judge(prompt, _JUDGE[1], split=True)
        if prompt.startswith(_JUDGE_SOURCE[0]):
            return _judge(prompt, _JUDGE_SOURCE[1], split=False)
        return None

    return grade
