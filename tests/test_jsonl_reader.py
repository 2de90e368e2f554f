"""One JSON-lines reader (``util/jsonl.json_objects``), each caller wording its own one-line error."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from pytest_longctx.errors import UsageError
from pytest_longctx.util.grading import key_rows
from pytest_longctx.util.jsonl import BadLine, json_objects, read_jsonl


def test_objects_with_their_line_numbers_skipping_blank_lines_and_with_comments_on_comment_lines() -> None:
    lines = ['{"a": 1}', "", "  // a note", '{"b": 2}']
    with pytest.raises(BadLine) as bad:
        list(json_objects(lines))
    assert (bad.value.lineno, bad.value.json_error) == (3, "Expecting value")
    assert list(json_objects(lines, comments=True)) == [(1, {"a": 1}), (4, {"b": 2})]


@pytest.mark.parametrize(("text", "usage", "graded"), [
    ('{"a": 1}\n{oops', "invalid JSON (Expecting property name enclosed in double quotes); fix or remove the line",
     "not JSON (Expecting property name enclosed in double quotes)"),
    ('{"a": 1}\n[1, 2]', "expected a JSON object; fix or remove the line", "expected a JSON object"),
])
def test_a_bad_line_is_a_usage_error_for_the_cli_and_a_graded_error_for_the_server(tmp_path: Path, text: str,
                                                                                    usage: str, graded: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as error:
        read_jsonl(path)
    assert str(error.value) == f"{path}:2: {usage}"
    with pytest.raises(ValueError) as error:
        list(key_rows(path))
    assert str(error.value) == f"graded: {path}:2: {graded}"


def test_an_answer_key_may_be_gzipped_and_carry_comments(tmp_path: Path) -> None:
    path = tmp_path / "key.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write('// the key\n{"question": "Q?"}\n')
    assert list(key_rows(path)) == [(2, {"question": "Q?"})]
    with pytest.raises(UsageError, match=r"rows.jsonl:1: invalid JSON"):
        (tmp_path / "rows.jsonl").write_text("// not for the CLI reader\n", encoding="utf-8")
        read_jsonl(tmp_path / "rows.jsonl")
