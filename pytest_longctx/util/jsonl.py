"""Reading JSONL files whose every line is a JSON object; bad lines are one-line errors naming file:line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pytest_longctx.errors import UsageError


class BadLine(ValueError):
    """A line that is not a JSON object: its number and the JSON error (``None``: valid JSON, but not an object).

    Each caller words its own one-line error from it (a usage error, the test server's ``graded:`` error).
    """

    def __init__(self, lineno: int, json_error: str | None) -> None:
        self.lineno = lineno
        self.json_error = json_error
        super().__init__(f"line {lineno}: {json_error or 'not a JSON object'}")


def json_objects(lines: Iterable[str], comments: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line (and, with ``comments``, none starting ``//``); raises BadLine."""
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or (comments and line.lstrip().startswith("//")):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadLine(lineno, exc.msg) from None
        if not isinstance(obj, dict):
            raise BadLine(lineno, None)
        yield lineno, obj


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of ``path``."""
    try:
        return list(json_objects(path.read_text(encoding="utf-8").splitlines()))
    except BadLine as bad:
        what = f"invalid JSON ({bad.json_error})" if bad.json_error is not None else "expected a JSON object"
        raise UsageError(f"{path}:{bad.lineno}: {what}; fix or remove the line") from None
