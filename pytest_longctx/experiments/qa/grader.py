"""The qa experiment's grader for the local test server (``pytest_longctx_graders``): the last
``<question>``/``<options>`` (longctx) or ``<Question>``/``<Answers>`` (the study's source prompts) of the prompt, so
worked examples before it never count; right: the letter whose option is the ``qa-key`` file's answer; wrong:
another letter. Item: the question's id in the key."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_longctx.util.grading import AnswerKey, Keyed, key_text, load_key, pick, squash, task

_OPTIONS = re.compile(r"<question>(.*?)</question>\s*<options>\n(.*?)\n</options>", re.S)
_SOURCE_QUESTION = re.compile(r"<Question>\n(.*?)\n</Question>", re.S)
_SOURCE_ANSWERS = re.compile(r"<Answers>\n(.*?)\n</Answers>", re.S)
_OPTION_SPLIT = re.compile(r"\n(?=[A-D]\. )")


def _item(index: int, row: dict[str, Any], where: str) -> Keyed:
    return Keyed(key_text(row, "id", where), (key_text(row, "answer", where),))


def _options(block: str) -> list[tuple[str, str]]:
    """``[(letter, text)]`` of an option list: ``A. ...`` lines, or the source's ``['A. ...', ...]`` list."""
    parts: list[str]
    if block.startswith("["):
        try:
            parsed = ast.literal_eval(block)
        except (ValueError, SyntaxError):
            raise ValueError(f"graded: an option list that is not a list: {block[:80]!r}") from None
        parts = [str(p) for p in parsed]
    else:
        parts = _OPTION_SPLIT.split(block)
    options = [(p[0], p[3:]) for p in parts if len(p) >= 3 and p[0] in "ABCD" and p[1:3] == ". "]
    if len(options) != len(parts) or not options:
        raise ValueError(f"graded: options not in the 'A. text' form: {block[:80]!r}")
    return options


def _choice(question: str, block: str, key: AnswerKey) -> tuple[str, str, list[str]]:
    """``(item id, right letter, wrong letters)`` of one multiple-choice question."""
    keyed = key.find(question)
    options = _options(block)
    right = [letter for letter, text in options if squash(text) == squash(keyed.answers[0])]
    if len(right) != 1:
        raise ValueError(f"graded: {keyed.id}: the key's answer is {len(right)} of the prompt's options")
    return keyed.id, right[0], [letter for letter, _ in options if letter != right[0]]


def _longctx(prompt: str, key: AnswerKey) -> Mapping[str, Any]:
    at = prompt.rfind("<question>")  # the question asked comes after any worked example
    found = _OPTIONS.match(prompt, at)
    if found is None:
        raise ValueError(f"graded: a qa prompt whose last question has no options: {prompt[at:at + 80]!r}")
    item, right, wrong = _choice(found.group(1), found.group(2), key)
    pad = "<scratchpad>\n\"The passage of the record that answers it.\"\n</scratchpad>\n" \
        if "<scratchpad></scratchpad>" in prompt else ""
    return task("qa", item, f"{pad}<answer>{right}</answer>", f"{pad}<answer>{pick(prompt, wrong)}</answer>")


def _last(pattern: re.Pattern[str], prompt: str, opening: str) -> str:
    """The last ``opening`` block of the prompt, read by ``pattern``."""
    found = pattern.match(prompt, max(prompt.rfind(opening), 0))
    if found is None:
        raise ValueError(f"graded: a source qa prompt without a {opening} block")
    return found.group(1)


def _source(prompt: str, key: AnswerKey) -> Mapping[str, Any]:
    question = _last(_SOURCE_QUESTION, prompt, "<Question>")
    item, right, wrong = _choice(question, _last(_SOURCE_ANSWERS, prompt, "<Answers>"), key)
    if "<scratchpad></scratchpad>" in prompt:
        pad = "<scratchpad>\nThe passage of the record that answers it.\n</scratchpad>\n"
        return task("qa", item, f"{pad}<Answer>{right}</Answer>", f"{pad}<Answer>{pick(prompt, wrong)}</Answer>")
    return task("qa", item, f"\n<Answer>\n{right}\n</Answer>", f"\n<Answer>\n{pick(prompt, wrong)}\n</Answer>")


def make_grader(settings: Mapping[str, str]) -> Callable[[str], Mapping[str, Any] | None]:
    key = load_key(settings, "qa-key", _item)

    def grade(prompt: str) -> Mapping[str, Any] | None:
        if "<options>" in prompt and "<question>" in prompt:
            return _longctx(prompt, key)
        if "<Answers>" in prompt and "<Question>" in prompt:
            return _source(prompt, key)
        return None

    return grade
