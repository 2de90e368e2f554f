"""Reading JSONL files whose every line is a JSON object; bad lines are one-line errors naming file:line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_longctx.errors import UsageError


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of ``path``."""
    out: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{lineno}: invalid JSON ({exc.msg}); fix or remove the line") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{path}:{lineno}: expected a JSON object; fix or remove the line")
        out.append((lineno, obj))
    return out
