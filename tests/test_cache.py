"""The response cache: keys, atomic entries, corrupt entries, and what ModelClient stores (never errors)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.backends.base import Completion, Message, Request, request_key
from pytest_longctx.backends.fake import FakeBackend, Oracle
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.client import ModelClient
from pytest_longctx.dispatch.skips import Planned
from pytest_longctx.errors import BackendError, NotCachedError

KEY = "ab" + "0" * 62
COMPLETION = {"text": "42", "input_tokens": 10, "output_tokens": 1, "latency_s": 0.5, "stop_reason": "end_turn",
              "choice_logprobs": {}}


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_put_get_roundtrip(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    assert cache.get(KEY) is None and KEY not in cache
    cache.put(KEY, COMPLETION, {"provider": "anthropic", "model": "claude-x", "template": "qa@1"})
    assert KEY in cache
    assert cache.path(KEY) == tmp_path / "ab" / f"{KEY}.json"
    assert cache.get(KEY) == COMPLETION
    assert _files(tmp_path) == [cache.path(KEY)]  # no temporary file left behind
    entry = json.loads(cache.path(KEY).read_text(encoding="utf-8"))
    assert entry["format"] == 1 and entry["key"] == KEY and entry["meta"]["template"] == "qa@1"


def test_put_replaces_an_entry(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put(KEY, COMPLETION, {})
    cache.put(KEY, {**COMPLETION, "text": "43"}, {})
    assert cache.get(KEY)["text"] == "43"  # type: ignore[index]
    assert len(_files(tmp_path)) == 1


def test_failed_put_leaves_the_old_entry_and_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ResponseCache(tmp_path)
    cache.put(KEY, COMPLETION, {})

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        cache.put(KEY, {**COMPLETION, "text": "half"}, {})
    monkeypatch.undo()
    assert cache.get(KEY) == COMPLETION
    assert _files(tmp_path) == [cache.path(KEY)]


def test_concurrent_writers_and_readers_never_see_a_partial_entry(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    texts = {f"answer {i} " + "x" * 20_000 for i in range(8)}
    seen: list[object] = []

    def write(text: str) -> None:
        for _ in range(20):
            cache.put(KEY, {**COMPLETION, "text": text}, {})

    def read() -> None:
        for _ in range(200):
            got = cache.get(KEY)
            seen.append(None if got is None else got["text"])

    threads = [threading.Thread(target=write, args=(t,)) for t in texts]
    threads += [threading.Thread(target=read) for _ in range(4)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert [str(w.message) for w in caught] == []  # no reader ever saw a corrupt (half-written) entry
    assert set(seen) <= texts | {None}
    assert cache.get(KEY)["text"] in texts  # type: ignore[index]
    assert _files(tmp_path) == [cache.path(KEY)]


@pytest.mark.parametrize("content", [
    "{not json",
    "",
    json.dumps({"format": 99, "completion": COMPLETION}),
    json.dumps({"format": 1, "completion": "text"}),
    json.dumps(["a", "list"]),
], ids=["truncated", "empty", "format", "completion", "list"])
def test_corrupt_entry_warns_and_reads_as_missing(tmp_path: Path, content: str) -> None:
    cache = ResponseCache(tmp_path)
    path = cache.path(KEY)
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    with pytest.warns(UserWarning, match="longctx cache: corrupt entry"):
        assert cache.get(KEY) is None


def test_request_key_covers_everything_that_shapes_the_answer() -> None:
    base = Request.user("hello", max_tokens=16, template="t@1")
    key = request_key("anthropic", "claude-x", base)
    assert key == request_key("anthropic", "claude-x", Request.user("hello", max_tokens=16, template="t@1"))
    assert len(key) == 64 and int(key, 16) >= 0
    variants = [
        replace(base, messages=(Message("user", "hello!"),)),
        replace(base, system="be brief"),
        replace(base, max_tokens=17),
        replace(base, temperature=0.5),
        replace(base, stop=("\n",)),
        replace(base, prefill="The answer is"),
        replace(base, template="t@2"),
        replace(base, choices=("A", "B")),
    ]
    keys = {request_key("anthropic", "claude-x", v) for v in variants}
    keys |= {request_key("anthropic", "claude-y", base), request_key("openai", "claude-x", base)}
    assert len(keys) == len(variants) + 2 and key not in keys


class CountingBackend:
    """A non-fake backend (so the client caches it) that fails the first ``failures`` calls."""

    provider = "stub"
    model = "counting"
    context_window = 1000
    tokenizer = "chars"

    def __init__(self, failures: int = 0) -> None:
        self.calls = 0
        self.failures = failures

    async def complete(self, request: Request) -> Completion:
        self.calls += 1
        if self.calls <= self.failures:
            raise BackendError("stub: injected failure")
        return Completion(text=f"answer {self.calls}", input_tokens=3, output_tokens=2)

    def count_tokens(self, text: str) -> int:
        return len(text)

    async def aclose(self) -> None:
        return None


def _complete(client: ModelClient, request: Request, oracle: Oracle | None = None) -> Completion:
    return asyncio.run(client.complete(request, oracle))


def test_client_never_caches_errors(tmp_path: Path) -> None:
    backend = CountingBackend(failures=1)
    client = ModelClient(backend, ResponseCache(tmp_path))  # type: ignore[arg-type]
    request = Request.user("q")
    with pytest.raises(BackendError):
        _complete(client, request)
    assert _files(tmp_path) == []
    first = _complete(client, request)
    assert (first.text, first.cache_hit) == ("answer 2", False)
    second = _complete(client, request)
    assert (second.text, second.cache_hit, backend.calls) == ("answer 2", True, 2)
    assert len(_files(tmp_path)) == 1


def test_client_with_fake_error_caches_nothing(tmp_path: Path) -> None:
    client = ModelClient(FakeBackend("error"), ResponseCache(tmp_path))
    for _ in range(2):
        with pytest.raises(BackendError, match="injected backend failure"):
            _complete(client, Request.user("q"), Oracle("a"))
    assert _files(tmp_path) == []


def test_client_refresh_and_replay(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    backend = CountingBackend()
    _complete(ModelClient(backend, cache), Request.user("q"))  # type: ignore[arg-type]
    refreshed = _complete(ModelClient(backend, cache, cache_mode="refresh"), Request.user("q"))  # type: ignore[arg-type]
    assert (refreshed.text, refreshed.cache_hit, backend.calls) == ("answer 2", False, 2)
    replay = ModelClient(backend, cache, cache_mode="replay")  # type: ignore[arg-type]
    assert _complete(replay, Request.user("q")).text == "answer 2"
    with pytest.raises(NotCachedError, match="replay mode"):
        _complete(replay, Request.user("never asked"))
    assert backend.calls == 2
    off = ModelClient(backend, cache, cache_mode="off")  # type: ignore[arg-type]
    assert _complete(off, Request.user("q")).text == "answer 3"


def test_client_plan_mode_sends_nothing(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    backend = CountingBackend()
    _complete(ModelClient(backend, cache), Request.user("cached", max_tokens=7, template="p@1"))  # type: ignore[arg-type]
    planner = ModelClient(backend, cache, plan=True)  # type: ignore[arg-type]
    entries: list[dict[str, Any]] = []
    for text in ("cached", "new prompt"):
        with pytest.raises(Planned) as excinfo:
            _complete(planner, Request.user(text, max_tokens=7, template="p@1"))
        entries.append(excinfo.value.entry)
    assert backend.calls == 1
    assert [(e["cached"], e["input_tokens"], e["max_tokens"], e["template"]) for e in entries] == [
        (True, len("cached"), 7, "p@1"), (False, len("new prompt"), 7, "p@1")]
    assert entries[0]["model"] == "stub/counting" and len(_files(tmp_path)) == 1
