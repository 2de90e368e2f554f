"""One planned request out and its answer in: debited in the ledger, sent, settled, stored for the waiting test.

The prefetch dispatcher's lanes (:mod:`~pytest_longctx.dispatch.prefetch`) call :meth:`Sender.send` for each
planned request they take; every outcome reaches the waiting test through the cache or the work folder
(:mod:`~pytest_longctx.dispatch.workdir`): an answer, an error (never cached), or nothing when the budget refused it
(the dispatcher then stops, and the ``stopped`` file says why).
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from pytest_longctx.backends.base import Backend, Completion, Request
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.ledger import BudgetRefused, Ledger, Ticket, settle, watching
from pytest_longctx.dispatch.policy import PlannedRequest
from pytest_longctx.dispatch.workdir import kept_path, mark_sent, write_error
from pytest_longctx.errors import BackendError, FatalBackendError
from pytest_longctx.util.fsutil import atomic_write_text


@dataclass
class Progress:
    """Counters the dispatcher updates and the controller prints."""

    total: int = 0
    done: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The producer: when the dispatcher started tailing the plan, and when it queued its first and last request.
    started: float | None = None
    first_planned: float | None = None
    last_planned: float | None = None
    #: Seconds the answered requests took, summed (their mean is the latency the lanes saw).
    latency_s: float = 0.0
    #: Planned requests not sent because every sequential alarm covering them was settled first.
    dropped: int = 0

    def rates(self, concurrency: int) -> dict[str, float] | None:
        """The plan's production rate (requests/s, first to last planned request) beside what C lanes need
        (C / mean latency); None before two requests were planned and one answered."""
        first, last = self.first_planned, self.last_planned
        if first is None or last is None or self.total < 2 or last <= first or not self.done:
            return None
        latency = self.latency_s / self.done
        return {"planned": self.total, "plan_s": round(last - first, 3),
                "first_planned_after_s": round(first - (self.started or first), 3),
                "plan_requests_per_s": round((self.total - 1) / (last - first), 1),
                "mean_latency_s": round(latency, 3), "lanes_need_requests_per_s": round(concurrency / latency, 1)}


def rate_note(rates: dict[str, float]) -> str:
    """One line for the terminal: the producer's rate against the lanes' need."""
    verdict = ("the plan keeps ahead of them" if rates["plan_requests_per_s"] >= rates["lanes_need_requests_per_s"]
               else "the plan falls behind them")
    return (f"prefetch: the plan produced {rates['planned']:,} requests at {rates['plan_requests_per_s']:,.1f}/s "
            f"(first after {rates['first_planned_after_s']:.1f}s); the lanes need C / latency = "
            f"{rates['lanes_need_requests_per_s']:,.1f}/s (mean latency {rates['mean_latency_s']:.2f}s): {verdict}")


class Sender:
    """Sends planned requests one at a time (each lane awaits :meth:`send`), for one backend and work folder."""

    def __init__(self, backend: Backend, cache: ResponseCache, work: Path, progress: Progress,
                 ledger: Ledger | None = None) -> None:
        self.backend, self.cache, self.work, self.progress, self.ledger = backend, cache, work, progress, ledger
        #: A fatal error (a refused key, a dead endpoint): every later request ends with it, none is sent.
        self.fatal: str | None = None
        #: Why the ledger refused a request (the budget is reached): nothing more is sent.
        self.refused: str | None = None
        #: Requests sent so far.
        self.started = 0

    async def send(self, planned: PlannedRequest) -> None:
        """Send ``planned`` and store its answer (or write its error); nothing when the budget refuses it."""
        key = planned.key
        if self.fatal is not None:
            write_error(self.work, key, self.fatal, True)
            return
        request = Request.from_json(planned.request)
        ticket: Ticket | None = None
        if self.ledger is not None and (ticket := self._reserve(self.ledger, request)) is None:
            return  # refused by the budget: its waiting test ends skipped with the reason
        self.started += 1
        try:
            with watching(self.ledger, ticket):  # each attempt the API sees is counted (retries too)
                completion = await self.backend.complete(request)
        except BudgetRefused as exc:  # a retry the budget no longer covers: a budget stop like a refused request
            self.refused = str(exc)
            return
        except FatalBackendError as exc:
            self._release(ticket, failed=True)
            self.fatal = str(exc)
            write_error(self.work, key, str(exc), True)
            return
        except asyncio.CancelledError:  # abandoned by a stop: sent, no answer; its estimate stays counted
            if self.ledger is not None and ticket is not None:
                self.ledger.abandon(ticket)
            raise
        except Exception as exc:  # every failure must reach the waiting test
            self._release(ticket, failed=True)
            message = str(exc) if isinstance(exc, BackendError) else f"prefetch: {type(exc).__name__}: {exc}"
            self._failed(key, message)
            return
        if self.ledger is not None and ticket is not None:
            settle(self.ledger, ticket, completion)
        if self._store(planned, completion):
            with self.progress.lock:
                self.progress.done += 1
                self.progress.input_tokens += completion.input_tokens
                self.progress.output_tokens += completion.output_tokens
                self.progress.latency_s += completion.latency_s

    def _store(self, planned: PlannedRequest, completion: Completion) -> bool:
        """Into the cache (else kept in the work folder for this run); False when neither could hold it."""
        key = planned.key
        mark_sent(self.work, key)  # marked before it is stored: a waiter finding it counts a request sent
        try:
            self.cache.put(key, completion.to_json(), {"provider": self.backend.provider, "model": self.backend.model,
                                                        "template": planned.request.get("template", "")})
        except OSError as exc:  # kept for this run's tests in the work folder (see Waiter.wait)
            try:
                atomic_write_text(kept_path(self.work, key), json.dumps(completion.to_json(), ensure_ascii=False))
            except OSError:
                self._failed(key, "prefetch: answer received, but neither the cache nor the work folder could "
                             f"store it ({exc.strerror or exc})")
                return False
        return True

    def _failed(self, key: str, message: str) -> None:
        write_error(self.work, key, message, False)
        with self.progress.lock:
            self.progress.failed += 1

    def _reserve(self, ledger: Ledger, request: Request) -> Ticket | None:
        """Debit the ledger; None when the budget refuses: nothing more is sent, the requests in flight finish,
        then the waiting tests end skipped with why (the ``stopped`` file)."""
        if self.refused is not None:
            return None
        tokens = 0
        if ledger.budgeted():
            tokens = self.backend.count_tokens(request.text())
        try:
            return ledger.reserve(f"{self.backend.provider}/{self.backend.model}", tokens, request.max_tokens,
                                       cache_write=bool(request.cache_prefix))
        except BudgetRefused as exc:  # drained: the answers in flight are paid for, so they are stored and used
            self.refused = str(exc)
            return None

    def _release(self, ticket: Ticket | None, *, failed: bool) -> None:
        if self.ledger is not None and ticket is not None:
            self.ledger.release(ticket, failed=failed)
