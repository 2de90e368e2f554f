"""The Message Batches adapter (``backends/anthropic_batch.py``) against the local Messages-API server: its calls
go through the retry loop every backend shares, with the same verdicts as live requests."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_longctx.backends.anthropic_batch import AnthropicBatches
from pytest_longctx.backends.base import Request
from pytest_longctx.backends.retry import BASE_ENV
from pytest_longctx.errors import FatalBackendError
from pytest_longctx.server import FaultPlan
from tests.passkey_api import api  # noqa: F401  (fixture)

REQUEST = Request.user("The pass key is 48213. What is the pass key? Reply with the number only.", max_tokens=12,
                       template="batch-passkey@1")


def test_transient_faults_of_a_submit_are_retried_then_answers_are_collected(api: Any,  # noqa: F811
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BASE_ENV, "0.01")
    srv = api(faults=FaultPlan(sequence=("529", "500"), endpoints=("batches.create",)), batch_delay=3600.0)
    batches = AnthropicBatches()
    batch_id = batches.submit("claude-test", [("k1", REQUEST), ("k2", REQUEST)])
    assert srv.stats.endpoints.get("batches.create") == 3  # two faults, then the batch
    ended, line = batches.poll(batch_id)
    assert not ended and line.startswith(f"longctx batch: {batch_id} in_progress:")
    assert srv.batches.end_now() == 1
    assert batches.poll(batch_id)[0]
    results = {key: (completion.text if completion else error) for key, completion, error in batches.results(batch_id)}
    assert results == {"k1": "48213", "k2": "48213"}


def test_an_auth_error_stops_at_once(api: Any) -> None:  # noqa: F811
    srv = api(faults=FaultPlan(sticky="auth"))
    with pytest.raises(FatalBackendError, match="stopping the run"):
        AnthropicBatches().submit("claude-test", [("k1", REQUEST)])
    assert srv.stats.endpoints.get("batches.create") == 1  # no retry fixes a refused key
