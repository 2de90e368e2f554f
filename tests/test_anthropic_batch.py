"""The Message Batches adapter (``backends/anthropic_batch.py``) against the local Messages-API server: batch items
as sent, bodies streamed from a file, the API's limits, every ending of a request, and the retry loop every
backend shares (the same verdicts as live requests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.backends.anthropic_batch import MAX_BYTES, MAX_REQUESTS, AnthropicBatches
from pytest_longctx.backends.base import Request
from pytest_longctx.backends.retry import BASE_ENV
from pytest_longctx.errors import BackendError, FatalBackendError
from pytest_longctx.server import FaultPlan
from tests.passkey_api import api  # noqa: F401  (fixture)

REQUEST = Request.user("The pass key is 48213. What is the pass key? Reply with the number only.", max_tokens=12,
                       template="batch-passkey@1")
MODEL = "claude-test"


def body(batches: AnthropicBatches, tmp_path: Path, keys: list[str], request: Request = REQUEST) -> Path:
    path = tmp_path / "body.json"
    path.write_bytes(batches.head + batches.sep.join(batches.item(MODEL, k, request) for k in keys) + batches.tail)
    return path


def test_an_item_is_the_request_as_the_api_takes_it_with_a_one_hour_cache() -> None:
    prefix = "A long shared context. " * 20
    request = Request.user(prefix + "Question?", max_tokens=5, cache_prefix=len(prefix), temperature=0.5)
    item = json.loads(AnthropicBatches(client=object()).item(MODEL, "k_1-A", request))
    assert item["custom_id"] == "k_1-A"
    params = item["params"]
    assert (params["model"], params["max_tokens"], params["temperature"]) == (MODEL, 5, 0.5)
    first, rest = params["messages"][0]["content"]
    assert first == {"type": "text", "text": prefix, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    assert rest == {"type": "text", "text": "Question?"}
    for bad in ("", "a" * 65, "a b", "ключ"):
        with pytest.raises(ValueError, match="not a valid custom_id"):
            AnthropicBatches(client=object()).item(MODEL, bad, request)


def test_limits_are_the_apis_unless_the_environment_lowers_them(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (AnthropicBatches(client=object()).max_requests, AnthropicBatches(client=object()).max_bytes) == (
        MAX_REQUESTS, MAX_BYTES) == (100_000, 256_000_000)
    monkeypatch.setenv("LONGCTX_BATCH_MAX_BYTES", "4_000")
    monkeypatch.setenv("LONGCTX_BATCH_MAX_REQUESTS", "3")
    assert (AnthropicBatches(client=object()).max_requests, AnthropicBatches(client=object()).max_bytes) == (3, 4000)
    monkeypatch.setenv("LONGCTX_BATCH_MAX_BYTES", "300000000")
    with pytest.raises(ValueError, match=r"\$LONGCTX_BATCH_MAX_BYTES: expected a whole number from 1 to"):
        AnthropicBatches(client=object())


def test_transient_faults_of_a_submit_are_retried_then_answers_are_collected(api: Any,  # noqa: F811
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            tmp_path: Path) -> None:
    monkeypatch.setenv(BASE_ENV, "0.01")
    srv = api(faults=FaultPlan(sequence=("529", "500"), endpoints=("batches.create",)), batch_delay=3600.0)
    batches = AnthropicBatches()
    path = body(batches, tmp_path, ["k1", "k2"])
    batch_id = batches.submit(path)
    assert srv.stats.endpoints.get("batches.create") == 3  # two faults, then the batch: the body sent each time
    assert srv.stats.batch_bytes == [path.stat().st_size] and srv.stats.batch_requests == [2]
    status = batches.status(batch_id)
    assert not status.ended and status.counts == {"processing": 2, "succeeded": 0, "errored": 0, "canceled": 0,
                                                  "expired": 0}
    assert srv.batches.end_now() == 1
    assert batches.status(batch_id).ended
    results = {key: (ending, completion.text if completion else why)
               for key, ending, completion, why in batches.results(batch_id)}
    assert results == {"k1": ("succeeded", "48213"), "k2": ("succeeded", "48213")}


def test_every_ending_comes_back_with_its_reason(api: Any, tmp_path: Path) -> None:  # noqa: F811
    srv = api(batch_delay=0.0, batch_error_rate=0.25, batch_expire_rate=0.25, seed=3)
    batches = AnthropicBatches()
    keys = [f"k{i}" for i in range(40)]
    batch_id = batches.submit(body(batches, tmp_path, keys))
    status = batches.status(batch_id)
    results = {key: (ending, why) for key, ending, _, why in batches.results(batch_id)}
    assert sorted(results) == sorted(keys)
    endings = {e: sum(1 for ending, _ in results.values() if ending == e) for e in ("succeeded", "errored", "expired")}
    assert status.ended and status.counts == {"processing": 0, "canceled": 0, **endings}
    assert min(endings.values()) > 0 and sum(endings.values()) == 40
    assert {why for ending, why in results.values() if ending == "errored"} == {"api_error: Internal server error"}
    assert {why for ending, why in results.values() if ending == "expired"} == {""}
    assert srv.stats.endpoints.get("batches.results") == 1


def test_the_servers_limits_are_refused_as_the_api_refuses_them(api: Any, tmp_path: Path) -> None:  # noqa: F811
    srv = api(batch_max_bytes=2_000, batch_max_requests=3)
    batches = AnthropicBatches()
    with pytest.raises(BackendError, match=r"413 request_too_large.*2,000 for a message batch"):
        batches.submit(body(batches, tmp_path, [f"k{i}" for i in range(30)]))
    with pytest.raises(BackendError, match="at most 3 requests, got 4"):
        batches.submit(body(batches, tmp_path, [f"k{i}" for i in range(4)]))
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"requests": [{"custom_id": "not valid!", "params": {}}]}))
    with pytest.raises(BackendError, match=r"custom_id: String should match pattern"):
        batches.submit(raw)
    assert srv.stats.endpoints.get("batches.create") == 3 and srv.stats.batch_bytes == []  # refused, not retried
    assert srv.stats.errors == {"request_too_large": 1, "invalid_request_error": 2}
    assert batches.status(batches.submit(body(batches, tmp_path, ["k1", "k2", "k3"]))).counts["processing"] == 3


def test_an_auth_error_stops_at_once(api: Any, tmp_path: Path) -> None:  # noqa: F811
    srv = api(faults=FaultPlan(sticky="auth"))
    batches = AnthropicBatches()
    with pytest.raises(FatalBackendError, match="stopping the run"):
        batches.submit(body(batches, tmp_path, ["k1"]))
    assert srv.stats.endpoints.get("batches.create") == 1  # no retry fixes a refused key


def test_the_waiting_line_is_rewritten_on_a_terminal_and_printed_per_change_elsewhere() -> None:
    from pytest_longctx.dispatch.batch_progress import StatusLine, progress_text, size_text

    counts = {"processing": 1_190, "succeeded": 8, "errored": 1, "canceled": 0, "expired": 1}
    assert progress_text(2, 1, counts, 65) == ("longctx batch: 2 batches submitted, 1 ended; requests: 1,190 "
                                               "processing, 8 succeeded, 1 errored, 1 expired; 1m05s")
    assert progress_text(1, 0, {"canceled": 3}, 7300).endswith("0 expired, 3 canceled; 2h01m")
    assert [size_text(n) for n in (812, 5_084, 145_213_000)] == ["812 B", "5.1 kB", "145.2 MB"]
    for tty, expected in [(True, "\rwaiting 1\rwaiting 22\rwaiting 22\rwaiting 3 \ndone\n"),
                          (False, "waiting 1\nwaiting 22\nwaiting 3\ndone\n")]:
        written: list[str] = []
        line = StatusLine(written.append, tty)
        for text, key in [("waiting 1", 1), ("waiting 22", 2), ("waiting 22", 2), ("waiting 3", 3)]:
            line.update(text, key)  # the same figures again: rewritten in place, or nothing printed
        line.line("done")
        assert "".join(written) == expected
