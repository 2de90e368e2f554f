"""Canonical JSON bytes (sorted keys, no spaces, UTF-8), with long strings escaped at byte speed.

``json.dumps(..., ensure_ascii=False)`` escapes a string one character at a time: ~3 ms for a 70,000-token
prompt, more than hashing it. Long strings are escaped here with a handful of byte replacements instead
(``\\``, ``"``, and the control characters JSON writes as ``\\n`` and the like), and spliced into the JSON of
everything else. The bytes are exactly ``json.dumps(obj, sort_keys=True, separators=(",", ":"),
ensure_ascii=False).encode()`` (``tests/test_canonical_json.py`` checks it on generated values), so a cache key
made from them is the key made before.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Strings at least this long are escaped by :func:`_escape`; shorter ones are left to ``json.dumps``.
LONG = 1024
#: Control characters JSON writes as ``\\u00XX``: a string holding one is left to ``json.dumps`` whole.
_ODD = bytes(c for c in range(32) if c not in (8, 9, 10, 12, 13))
_NOT_ODD = bytes(c for c in range(256) if c not in _ODD)
_SHORT_ESCAPES = ((b"\\", b"\\\\"), (b'"', b'\\"'), (b"\n", b"\\n"), (b"\r", b"\\r"), (b"\t", b"\\t"),
                  (b"\x08", b"\\b"), (b"\x0c", b"\\f"))
#: Stands for the i-th long string in the JSON of everything else (``\\u0000`` cannot come from a short string
#: without a NUL in it, and a skeleton where a marker is not unique is not used).
_MARK = "\x00longctx-long-{}\x00"


def canonical_json(obj: Any) -> bytes:
    """``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` as UTF-8, faster."""
    return b"".join(canonical_parts(obj))


def canonical_sha256(obj: Any) -> str:
    """The sha256 (hex) of :func:`canonical_json`, without joining its parts into one more copy of a long text."""
    digest = hashlib.sha256()
    for part in canonical_parts(obj):
        digest.update(part)
    return digest.hexdigest()


def canonical_parts(obj: Any) -> list[bytes]:
    """:func:`canonical_json` in consecutive parts (each long string's body is one)."""
    longs: list[str] = []
    skeleton = json.dumps(_swap_long(obj, longs), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if not longs:
        return [skeleton.encode("utf-8")]
    marks = [json.dumps(_MARK.format(i)) for i in range(len(longs))]
    if any(skeleton.count(mark) != 1 for mark in marks):  # a short string looks like a marker: do it the slow way
        return [json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")]
    parts: list[bytes] = []
    done = 0
    for at, i in sorted((skeleton.index(mark), i) for i, mark in enumerate(marks)):  # sorted keys reorder them
        parts += [skeleton[done:at].encode("utf-8"), b'"', _escape(longs[i]), b'"']
        done = at + len(marks[i])
    parts.append(skeleton[done:].encode("utf-8"))
    return parts


def _swap_long(obj: Any, longs: list[str]) -> Any:
    """``obj`` with every string of :data:`LONG` characters or more replaced by its marker (and kept in ``longs``)."""
    if isinstance(obj, str):
        if len(obj) < LONG:
            return obj
        longs.append(obj)
        return _MARK.format(len(longs) - 1)
    if isinstance(obj, dict):
        return {k: _swap_long(v, longs) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_swap_long(v, longs) for v in obj]
    return obj


def _escape(text: str) -> bytes:
    """The UTF-8 bytes of ``text``'s JSON string body, as ``json.dumps(text, ensure_ascii=False)[1:-1]`` has them."""
    data = text.encode("utf-8")  # multi-byte sequences hold no ASCII byte, so replacing ASCII bytes is safe
    if data.translate(None, _NOT_ODD):
        return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")
    for raw, escaped in _SHORT_ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data
