"""What batch mode asks of a provider's batch API (``Provider.batch_api``, loaded by name from the registry).

:mod:`~pytest_longctx.dispatch.batch` writes each batch's body from ``head``, items joined by ``sep`` and ``tail``
within ``max_requests`` and ``max_bytes``, submits it, polls its status and streams its results; Anthropic's Message
Batches API is one (``backends/anthropic_batch.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from pytest_longctx.backends.base import Completion, Request

#: ``pause(seconds)`` between polls of the open batches (it may raise ``WaitStopped``: the run stopped).
Pause = Callable[[float], None]


class BatchStatus(Protocol):
    """A batch's processing status: ended or not, its request counts, and ``gone`` (the API no longer has it)."""

    @property
    def ended(self) -> bool: ...

    @property
    def counts(self) -> dict[str, int]: ...

    @property
    def gone(self) -> bool: ...


class BatchApi(Protocol):
    """One provider's batch API, built with its SDK client and the run's seed."""

    head: bytes
    sep: bytes
    tail: bytes
    max_requests: int
    max_bytes: int

    def item(self, model: str, key: str, request: Request) -> bytes:
        """``request`` as one item of a batch body (``ValueError``: it cannot go through this API)."""
        ...

    def submit(self, body: Path) -> str:
        """Upload a batch body; its batch id."""
        ...

    def status(self, batch_id: str) -> BatchStatus: ...

    def results(self, batch_id: str) -> Iterator[tuple[str, str, Completion | None, str]]:
        """An ended batch's results: ``(key, ending, completion or None, why)`` each."""
        ...
