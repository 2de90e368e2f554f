"""Finding JSON in a model's reply: code fences, prose around it, trailing commas, quirks.

Models asked for JSON often wrap it in a fenced block, explain it before or after, leave a trailing
comma, use single or curly quotes, or stop mid-list. :func:`json_values` returns every object or
list it can recover, in order; callers decide what shape they need.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*:)")
#: A quoted string (kept as is) or a JSON keyword outside strings (turned into Python's).
_PY_WORDS = re.compile(r"('(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\")|\b(true|false|null)\b")
_PY = {"true": "True", "false": "False", "null": "None"}
_CURLY = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'"})


def json_values(text: str) -> list[Any]:
    """Every JSON object or list recoverable from ``text``, outermost first, in reading order.

    A truncated list still yields the complete objects inside it.
    """
    out: list[Any] = []
    i = 0
    while i < len(text):
        if text[i] not in "{[":
            i += 1
            continue
        end = _balanced_end(text, i)
        value = _loads(text[i:end + 1]) if end is not None else None
        if value is None:
            i += 1
            continue
        out.append(value)
        i = end + 1  # type: ignore[operator]
    return out


def _balanced_end(text: str, start: int) -> int | None:
    """Index of the bracket closing ``text[start]`` (double-quoted strings respected), or None."""
    depth = 0
    in_string = False
    escaped = False
    for j in range(start, len(text)):
        ch = text[j]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return j
    return None


def _loads(candidate: str) -> Any:
    """Parse one candidate with increasingly lenient repairs; None when nothing works."""
    attempts = [candidate]
    fixed = _TRAILING_COMMA.sub(r"\1", candidate.translate(_CURLY))
    attempts.append(fixed)
    attempts.append(_BARE_KEY.sub(r'\1"\2"\3', fixed))
    for attempt in attempts:
        try:
            return json.loads(attempt)
        except json.JSONDecodeError:
            continue
    # Single-quoted, Python-literal style: {'question': 'Who?', 'answer': 'Ann'}
    for attempt in (fixed, _PY_WORDS.sub(lambda m: m[1] or _PY[m[2]], fixed)):
        try:
            value = ast.literal_eval(attempt)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, (dict, list)):
            return value
    return None
