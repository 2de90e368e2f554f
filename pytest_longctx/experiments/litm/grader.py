"""Lost in the Middle's grader for the local test server (``pytest_longctx_graders``).

``litm-qa`` (search results or closed book): right: the first gold answer of the ``litm-key`` file
(qa_data/nq-open-oracle.jsonl.gz); wrong: another question's answer. ``litm-kv``: right: the asked key's value in
the prompt's JSON; wrong: a neighbouring record's value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_longctx.util.grading import AnswerKey, Keyed, load_key, normalize, pick, tail, task, wrong_answer

_QA = ("Write a high-quality answer for the given question using only the provided search results",
       r"\n\nQuestion: (.*)\nAnswer:")
_CLOSED_BOOK = r"^Question: (.*)\nAnswer:"
_KV = ("Extract the value corresponding to the specified key in the JSON object below.",
       r"JSON data:\n(?P<records>.*)\n\nKey: \"(?P<key>.*)\"\nCorresponding value:")


def _item(index: int, row: dict[str, Any], where: str) -> Keyed:
    answers = row.get("answers")
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise ValueError(f"graded: {where}: 'answers' must be a list of strings")
    return Keyed(f"nq-open-{index}", tuple(answers))  # the experiment's item id


def _match(prediction: str, gold: str) -> bool:
    """best_subspan_em for one gold answer: normalised gold inside the normalised prediction."""
    return normalize(gold) in normalize(prediction)


def _qa(prompt: str, key: AnswerKey, pattern: str) -> Mapping[str, Any]:
    keyed = key.find(tail(prompt, pattern, "litm").group(1))
    return task("litm-qa", keyed.id, keyed.answers[0], wrong_answer(prompt, key, keyed.answers, _match))


def _kv(prompt: str) -> Mapping[str, Any]:
    found = tail(prompt, _KV[1], "litm key-value", re.S)
    try:
        records: list[tuple[str, str]] = json.loads(found.group("records"), object_pairs_hook=list)
    except json.JSONDecodeError as exc:
        raise ValueError(f"graded: a litm key-value prompt whose records are not JSON ({exc.msg})") from None
    asked = found.group("key")
    at = next((i for i, (k, _) in enumerate(records) if k == asked), None)
    if at is None or len(records) < 2:
        raise ValueError(f"graded: a litm key-value prompt without the key it asks ({asked!r}) among others")
    near = [str(records[i][1]) for i in (at - 1, at + 1) if 0 <= i < len(records)]
    return task("litm-kv", f"kv-{asked}", str(records[at][1]), pick(prompt, near))


def make_grader(settings: Mapping[str, str]) -> Callable[[str], Mapping[str, Any] | None]:
    key = load_key(settings, "litm-key", _item)

    def grade(prompt: str) -> Mapping[str, Any] | None:
        if prompt.startswith(_QA[0]):
            return _qa(prompt, key, _QA[1])
        if prompt.startswith(_KV[0]):
            return _kv(prompt)
        if re.match(_CLOSED_BOOK + r"\s*$", prompt):  # the whole prompt: no other experiment's can match
            return _qa(prompt, key, _CLOSED_BOOK)
        return None

    return grade
