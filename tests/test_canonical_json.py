"""The fast canonical JSON is byte for byte ``json.dumps(sort_keys, compact, ensure_ascii=False)``: cache keys
made before and after it are the same keys."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_longctx.backends.base import Message, Request, request_key, shared_prefix_end
from pytest_longctx.util import canonical
from pytest_longctx.util.canonical import canonical_json

#: Characters JSON escapes in every way it does (short escapes, \\u00XX, none), non-ASCII, and a marker's text.
TEXT = st.lists(st.sampled_from([*'ab "\\/\n\r\t\x08\x0c\x00\x01\x1f\x7féü日😀\u2028', "\x00longctx-long-0\x00"]),
                max_size=12).map("".join)
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                      max_leaves=12)


def reference(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(VALUES, st.sampled_from([0, 1, 3]))
def test_canonical_json_is_json_dumps(value: Any, long: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(canonical, "LONG", long)  # treat (almost) every string as long, so the splice path runs
        assert canonical_json(value) == reference(value)


def test_a_long_prompt_gives_the_key_it_always_had() -> None:
    """A request of the qa shape (a long record in the first turn, a prefill) against the original recipe."""
    record = "".join(f'Section {i}: "quoted" text — 12\\34\n\n\tindented\r\n' for i in range(3000))
    request = Request(messages=(Message("user", "Please read\n<Government Record>\n" + record + "\n</Government "
                                        "Record>\nQuestion?"), Message("assistant", "Based on")),
                      max_tokens=3000, stop=("\n\nHuman:",), prefill="Based on", template="study-one-chunk@1",
                      cache_prefix=40)
    body = request.to_json()
    body.pop("cache_prefix")
    payload = {"v": 1, "provider": "anthropic", "model": "claude-sonnet-4-5", "request": body}
    assert request_key("anthropic", "claude-sonnet-4-5", request) == hashlib.sha256(reference(payload)).hexdigest()


@settings(max_examples=200, deadline=None)
@given(st.text("ab\n", max_size=80), st.text("ab\n", max_size=80))
def test_shared_prefix_end_is_the_first_occurrence(text: str, shared: str) -> None:
    at = text.find(shared) if shared else -1
    assert shared_prefix_end(text, shared) == (at + len(shared) if at >= 0 else 0)
    long = "ab" * 40 + shared  # longer than the probe
    at = (text + long).find(long)
    assert shared_prefix_end(text + long, long) == at + len(long)
