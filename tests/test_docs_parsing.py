"""Reading models' JSON: generation replies (recorded malformed outputs) and judge verdicts."""

from __future__ import annotations

import pytest

from pytest_longctx.experiments.docs.generate import QAParseError, parse_qa_reply
from pytest_longctx.experiments.docs.jsonish import json_values
from pytest_longctx.experiments.docs.judge import judge_oracle, judge_request, parse_verdict

PAIRS = [("Who built Tollerton Mill?", "Josiah Penhallow"), ("When did it open as a museum?", "1978")]

# Replies as models actually write them (shapes seen from small and large models).
GOOD_REPLIES = {
    "clean": '[{"question": "Who built Tollerton Mill?", "answer": "Josiah Penhallow"}, '
             '{"question": "When did it open as a museum?", "answer": "1978"}]',
    "fenced": '```json\n[\n  {"question": "Who built Tollerton Mill?", "answer": "Josiah Penhallow"},\n'
              '  {"question": "When did it open as a museum?", "answer": "1978"}\n]\n```',
    "prose around": 'Sure! Here are two questions:\n\n[{"question": "Who built Tollerton Mill?", '
                    '"answer": "Josiah Penhallow"}, {"question": "When did it open as a museum?", "answer": "1978"}]'
                    '\n\nLet me know if you want more {or fewer} questions.',
    "trailing commas": '[{"question": "Who built Tollerton Mill?", "answer": "Josiah Penhallow",}, '
                       '{"question": "When did it open as a museum?", "answer": "1978",},]',
    "wrapper object": '{"questions": [{"Question": "Who built Tollerton Mill?", "Answer": "Josiah Penhallow"}, '
                      '{"q": "When did it open as a museum?", "a": 1978}]}',
    "one object per line": '{"question": "Who built Tollerton Mill?", "answer": "Josiah Penhallow"}\n'
                           '{"question": "When did it open as a museum?", "answer": "1978"}',
    "single quotes": "[{'question': 'Who built Tollerton Mill?', 'answer': 'Josiah Penhallow'}, "
                     "{'question': 'When did it open as a museum?', 'answer': '1978'}]",
    "curly quotes": "[{“question”: “Who built Tollerton Mill?”, “answer”: “Josiah Penhallow”}, "
                    "{“question”: “When did it open as a museum?”, “answer”: “1978”}]",
    "bare keys": '[{question: "Who built Tollerton Mill?", answer: "Josiah Penhallow"}, '
                 '{question: "When did it open as a museum?", answer: "1978"}]',
    "truncated list": '[{"question": "Who built Tollerton Mill?", "answer": "Josiah Penhallow"}, '
                      '{"question": "When did it open as a museum?", "answer": "1978"}, {"question": "What riv',
}


@pytest.mark.parametrize("name", sorted(GOOD_REPLIES))
def test_generation_reply_shapes_parse(name: str) -> None:
    assert parse_qa_reply(GOOD_REPLIES[name]).pairs == PAIRS


def test_single_object_is_one_pair() -> None:
    parsed = parse_qa_reply('Here it is: {"question": "Who built Tollerton Mill?", "answer": "Josiah Penhallow"}')
    assert parsed.pairs == PAIRS[:1]


def test_bad_items_are_reported_not_dropped_silently() -> None:
    reply = ('[{"question": "Who built Tollerton Mill?", "answer": "Josiah Penhallow"}, {"question": "No answer?"}, '
             '"just a string", {"question": "Who built Tollerton Mill?", "answer": "Josiah Penhallow"}]')
    parsed = parse_qa_reply(reply)
    assert parsed.pairs == PAIRS[:1]
    assert parsed.problems == ["item 2: missing answer", "item 3: not an object (str)",
                               "item 4: repeats an earlier question"]


@pytest.mark.parametrize("reply, reason", [
    ("I'm sorry, I cannot write questions about this document.", "no JSON found"),
    ("", "no JSON found"),
    ("[]", "empty list"),
    ('[{"question": "Who?"}, {"answer": "Ann"}]', "item 1: missing answer; item 2: missing question"),
    ('{"question": "Why?", "answer": "' + "very " * 20 + 'long"}', "answer longer than"),
    ('[{"question": "Who built', "no JSON found"),
])
def test_unusable_replies_raise_with_a_reason(reply: str, reason: str) -> None:
    with pytest.raises(QAParseError, match=reason):
        parse_qa_reply(reply)


def test_json_values_keeps_text_inside_strings() -> None:
    assert json_values("{'q': 'Is it true?', 'a': true}") == [{"q": "Is it true?", "a": True}]
    assert json_values('{"q": "a } inside", "a": "[x]"}') == [{"q": "a } inside", "a": "[x]"}]


@pytest.mark.parametrize("reply, verdict", [
    ('{"correct": true}', True),
    ('{"correct": false}', False),
    ('```json\n{"correct": true}\n```', True),
    ('The answer matches the gold answer.\n{"correct": true}', True),
    ('{"Correct": "false"}', False),
    ('{"correct": "yes",}', True),
    ('{"verdict": "incorrect"}', False),
    ("[{\"correct\": 1}]", True),
    ("true", True),
    ("Incorrect.", False),
    ("Correct", True),
    ("", None),
    ("I am not sure whether this is right, it depends on the units.", None),
    ('{"correct": "maybe"}', None),
    ('{"score": 0.5}', None),
    ("no idea", None),  # prose
    ("Yes and no", None),
    ("Incorrect. The answer names a different year.", False),
    ("Correct: both give 1978", True),
    ("correctness cannot be judged", None),
])
def test_parse_verdict(reply: str, verdict: bool | None) -> None:
    assert parse_verdict(reply) is verdict


def test_judge_oracle_and_request() -> None:
    oracle = judge_oracle(True)
    assert parse_verdict(oracle.answer) is True and parse_verdict(oracle.wrong[0]) is False
    request = judge_request("Who built the mill?", "Josiah Penhallow", "  Josiah  ")
    assert request.template == "docs-judge@1"
    assert "Gold answer: Josiah Penhallow" in request.messages[0].content
    assert "Answer to grade: Josiah" in request.messages[0].content

