"""The run's one ledger of money and requests, debited where requests leave, before they are sent.

Every path that sends a request to a model (a test's own request in :class:`~pytest_longctx.dispatch.client.
ModelClient`, the prefetch dispatcher's lanes, each Message Batch, every model of a several-model run, the docs
judge) first :meth:`Ledger.reserve` s it: its estimated price at the price of the model it calls (input from the
request's token count, output at its ``max_tokens``; a marked prompt-cache prefix at the cache-write price) is
counted as spent while it is in flight. When the budget (``--longctx-budget``) would be passed, the request is
refused instead (:class:`BudgetRefused`) and not sent, so a run ends with at most its budget plus what was in
flight; a batch is cut to what the budget leaves. An answer :meth:`Ledger.settle` s the reservation to the usage
the API reported; a failure :meth:`Ledger.release` s it (sent, counted as a failed request, no tokens billed).

Each attempt the API saw is a request here (the SDK's retries are off; the backends' one retry loop tells
:class:`Attempts`, set around ``Backend.complete`` by :func:`watching`): an attempt answered with an error is a
failed request and costs nothing (the API bills no error); one whose answer was lost (a timeout, a dropped
connection, a body cut short: ``unread``) may have been billed, so its estimate stays spent (``abandoned_usd``,
beside the requests a stop abandoned); one that never reached the API (connection refused) is no request. A retry
goes out only while the budget still covers the request's reservation on top of what was spent.

The workers (xdist processes), the prefetch thread and the batch thread share it: a JSON file in the run's
folder (beside its stop file), changed under an exclusive ``fcntl`` lock and replaced atomically, so a reader
without the lock sees a whole state. The controller creates it (:meth:`Ledger.create`, with the budget and each
model's price) and reads it for the progress line, the record, the HTML and the partial report alike: the counts
there are what was sent, not what the trials saw (response-cache hits are counted apart, at zero).
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_longctx.backends import ATTEMPT_WATCH, Price, Verdict
from pytest_longctx.backends.base import Completion
from pytest_longctx.backends.prompt_cache import billed_input
from pytest_longctx.util.fsutil import atomic_write_text

#: Per model: what was sent, answered, failed and refused, the tokens the API reported, and dollars.
COUNTERS = ("requests", "answered", "failed", "abandoned", "unread", "refused", "input_tokens", "output_tokens",
            "cache_creation_input_tokens", "cache_read_input_tokens")


class BudgetRefused(Exception):
    """The budget would be passed by this request: it is not sent (the run stops as a budget stop)."""


@dataclass(frozen=True)
class Ticket:
    """A reservation: which model, and the dollars counted for it while in flight."""

    id: str
    model: str
    usd: float
    batch: bool = False


def empty_model() -> dict[str, Any]:
    """``usd``: dollars of the answered requests; ``abandoned_usd``: the estimates of the requests sent whose answer
    was never read (``abandoned`` in flight by a stop, or ``unread``: lost to a timeout, a dropped connection or a
    body cut short): the API may bill them, so the budget counts them. ``failed`` counts every attempt answered with
    an error (a retried request counts once per attempt, as the API saw it) and the unread ones."""
    return {**dict.fromkeys(COUNTERS, 0), "usd": 0.0, "abandoned_usd": 0.0}


@dataclass
class Ledger:
    """One process's handle on the run's ledger file (see the module docstring)."""

    path: Path
    _ids: Iterator[int] = field(default_factory=itertools.count, repr=False)
    _prices: dict[str, Price] | None = field(default=None, repr=False)
    _budget: float | None = field(default=None, repr=False)

    @classmethod
    def create(cls, path: Path, budget: float | None, prices: Mapping[str, Price | None]) -> Ledger:
        """The controller, before any request may go out: an empty ledger with the budget and the prices of the
        models the run may call (None: price unknown, counted at $0 and said so)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {"budget": budget, "prices": {m: p.to_json() for m, p in prices.items() if p is not None},
                 "unpriced": sorted(m for m, p in prices.items() if p is None), "models": {}, "in_flight": {},
                 "stop": None}
        atomic_write_text(path, json.dumps(state))
        return cls(path)

    @classmethod
    def beside(cls, stop_file: str | Path | None) -> Ledger | None:
        """The ledger of the run whose stop file is ``stop_file`` (None when that run keeps none)."""
        if not stop_file:
            return None
        path = Path(f"{stop_file}.ledger")
        return cls(path) if path.is_file() else None

    def read(self) -> dict[str, Any]:
        """The whole state, without the lock (files are replaced atomically)."""
        data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        return data

    @contextmanager
    def _change(self) -> Iterator[dict[str, Any]]:
        with (self.path.parent / f"{self.path.name}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = self.read()
                yield state
                atomic_write_text(self.path, json.dumps(state))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def price(self, model: str) -> Price | None:
        """``model``'s price as the controller wrote it (None: price unknown, counted at $0)."""
        self._load()
        assert self._prices is not None
        return self._prices.get(model)

    def budgeted(self) -> bool:
        """Whether the run has a budget (then each request's estimate needs its token count)."""
        self._load()
        return self._budget is not None

    def _load(self) -> None:
        if self._prices is None:
            state = self.read()
            self._prices = {m: Price.from_json(p) for m, p in state["prices"].items()}
            self._budget = state.get("budget")

    def estimate(self, model: str, input_tokens: int, max_tokens: int, *, cache_write: bool = False,
                 batch: bool = False) -> float:
        """What a request may cost before it is answered: input at ``input_tokens`` (all written to the prompt
        cache when it marks a prefix: the dearest case), output at ``max_tokens``."""
        price = self.price(model)
        if price is None:
            return 0.0
        written = input_tokens if cache_write else 0
        return price.usd(input_tokens - written, max_tokens, written, ttl_1h=batch and cache_write, batch=batch)

    def reserve(self, model: str, input_tokens: int, max_tokens: int, *, cache_write: bool = False,
                batch: bool = False) -> Ticket:
        """Count a request as sent and its estimate as spent, or raise :class:`BudgetRefused` (nothing counted but
        the refusal) when the budget would be passed."""
        usd = self.estimate(model, input_tokens, max_tokens, cache_write=cache_write, batch=batch)
        ticket = Ticket(f"{os.getpid()}-{next(self._ids)}", model, usd, batch)
        refused = None
        with self._change() as state:
            entry = state["models"].setdefault(model, empty_model())
            budget = state.get("budget")
            committed = spent(state)
            if state.get("stop") or (budget is not None and committed + usd > budget):
                entry["refused"] += 1
                if not state.get("stop"):
                    state["stop"] = (f"--longctx-budget: the budget is ${budget:,.2f}; ${committed:,.2f} spent or "
                                     f"in flight, and the next request (to {model}, up to ${usd:,.2f}) would pass it")
                refused = str(state["stop"])
            else:
                entry["requests"] += 1
                state["in_flight"][ticket.id] = usd
        if refused is not None:  # raised once the refusal is written
            raise BudgetRefused(refused)
        return ticket

    def settle(self, ticket: Ticket, input_tokens: int, output_tokens: int, written: int = 0, read: int = 0,
               *, ttl_1h: bool = False) -> float:
        """The answer came: its real usage (``input_tokens`` as the API reports it: after the cache breakpoint)
        replaces the estimate. Returns its dollars."""
        price = self.price(ticket.model)
        usd = price.usd(input_tokens, output_tokens, written, read, ttl_1h=ttl_1h, batch=ticket.batch) if price else 0.0
        with self._change() as state:
            state["in_flight"].pop(ticket.id, None)
            entry = state["models"].setdefault(ticket.model, empty_model())
            entry["answered"] += 1
            entry["input_tokens"] += input_tokens
            entry["output_tokens"] += output_tokens
            entry["cache_creation_input_tokens"] += written
            entry["cache_read_input_tokens"] += read
            entry["usd"] += usd
        return usd

    def release(self, ticket: Ticket, *, failed: bool = True) -> None:
        """No answer (an error, or a cancelled request): nothing billed; ``failed`` counts it as a failed request,
        else it was never sent. A request whose attempts were counted one by one (:class:`Attempts`) has ended
        already: nothing more is counted."""
        with self._change() as state:
            if ticket.id not in state["in_flight"]:
                return
            state["in_flight"].pop(ticket.id)
            entry = state["models"].setdefault(ticket.model, empty_model())
            if failed:
                entry["failed"] += 1
            else:
                entry["requests"] -= 1

    def abandon(self, ticket: Ticket) -> None:
        """A stop abandoned the request in flight: sent, never answered here; its estimate stays spent (between two
        attempts nothing is out: the reservation just ends)."""
        with self._change() as state:
            if ticket.id not in state["in_flight"]:
                return
            state["in_flight"].pop(ticket.id)
            if ticket.id in state.setdefault("retrying", []):
                state["retrying"].remove(ticket.id)
                return
            entry = state["models"].setdefault(ticket.model, empty_model())
            entry["abandoned"] += 1
            entry["abandoned_usd"] += ticket.usd

    def attempt_failed(self, ticket: Ticket, billing: str, last: bool) -> None:
        """One attempt of ``ticket``'s request failed; ``billing`` (:attr:`Verdict.billing`) says what the API may
        bill for it (see the module docstring); ``last``: the request ends with it (its reservation ends)."""
        with self._change() as state:
            entry = state["models"].setdefault(ticket.model, empty_model())
            retrying = state.setdefault("retrying", [])
            if billing == "unsent":
                entry["requests"] -= 1
            else:
                entry["failed"] += 1
            if billing == "unknown":
                entry["unread"] += 1
                entry["abandoned_usd"] += ticket.usd
            if last:
                state["in_flight"].pop(ticket.id, None)
            elif ticket.id not in retrying:
                retrying.append(ticket.id)

    def unread(self, tickets: list[Ticket]) -> None:
        """Requests sent whose answer was lost (a batch create's, :class:`~pytest_longctx.backends.anthropic_batch.
        LostBatch`): failed and ``unread``, each ticket's estimate kept spent (the API may bill them); in one change."""
        with self._change() as state:
            for ticket in tickets:
                state["in_flight"].pop(ticket.id, None)
                entry = state["models"].setdefault(ticket.model, empty_model())
                entry["failed"] += 1
                entry["unread"] += 1
                entry["abandoned_usd"] += ticket.usd

    def attempt_again(self, ticket: Ticket) -> None:
        """Another attempt of ``ticket``'s request goes out: one more request; raises :class:`BudgetRefused` (the
        request then ends) when what was spent already passes the budget with its reservation still counted."""
        refused = None
        with self._change() as state:
            entry = state["models"].setdefault(ticket.model, empty_model())
            retrying = state.setdefault("retrying", [])
            if ticket.id in retrying:
                retrying.remove(ticket.id)
            budget, committed = state.get("budget"), spent(state)
            if budget is not None and committed > budget:
                entry["refused"] += 1
                state["in_flight"].pop(ticket.id, None)
                state["stop"] = state.get("stop") or (
                    f"--longctx-budget: the budget is ${budget:,.2f}; ${committed:,.2f} spent or in flight, answers "
                    f"lost on the way counted, and a retry of a request to {ticket.model} would pass it")
                refused = str(state["stop"])
            else:
                entry["requests"] += 1
        if refused is not None:
            raise BudgetRefused(refused)

    def stop_reason(self) -> str | None:
        """Why the ledger refuses every request now (the budget was reached), or None."""
        reason = self.read().get("stop")
        return str(reason) if reason else None


def spent(state: Mapping[str, Any]) -> float:
    """Dollars settled plus dollars in flight."""
    return (sum(float(m["usd"]) + float(m.get("abandoned_usd", 0.0)) for m in state["models"].values())
            + sum(float(v) for v in state["in_flight"].values()))


def totals(state: Mapping[str, Any]) -> dict[str, Any]:
    """Every model's counters added up, with the dollars settled and in flight."""
    out = empty_model()
    for entry in state["models"].values():
        for name in (*COUNTERS, "usd", "abandoned_usd"):
            out[name] += entry.get(name, 0)
    out["in_flight_usd"] = sum(state["in_flight"].values())
    return out


def as_usage(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A ledger entry (one model's, or the totals) as the record's usage figures: what was sent and billed."""
    sent_input = int(entry.get("input_tokens", 0))
    written, read = int(entry.get("cache_creation_input_tokens", 0)), int(entry.get("cache_read_input_tokens", 0))
    return {"calls": int(entry.get("requests", 0)), "answered": int(entry.get("answered", 0)),
            "failed": int(entry.get("failed", 0)), "abandoned": int(entry.get("abandoned", 0)),
            "unread": int(entry.get("unread", 0)),
            "refused": int(entry.get("refused", 0)), "sent_input_tokens": sent_input,
            "paid_input_tokens": sent_input + written + read, "paid_output_tokens": int(entry.get("output_tokens", 0)),
            "cache_creation_input_tokens": written, "cache_read_input_tokens": read,
            "billed_input_tokens": round(billed_input(sent_input, written, read)),
            "usd": round(float(entry.get("usd", 0.0)), 6),
            "abandoned_usd": round(float(entry.get("abandoned_usd", 0.0)), 6)}


def settle(ledger: Ledger, ticket: Ticket, completion: Completion, *, ttl_1h: bool = False) -> float:
    """Settle ``ticket`` to what ``completion`` reports (its ``input_tokens`` count the cache's tokens too)."""
    written, read = completion.cache_creation_input_tokens, completion.cache_read_input_tokens
    return ledger.settle(ticket, max(0, completion.input_tokens - written - read), completion.output_tokens, written,
                         read, ttl_1h=ttl_1h)


@dataclass
class Attempts:
    """The ledger's watch on one request's attempts (a :class:`~pytest_longctx.backends.retry.AttemptWatch`)."""

    ledger: Ledger
    ticket: Ticket

    def failed(self, verdict: Verdict, last: bool) -> None:
        self.ledger.attempt_failed(self.ticket, verdict.billing, last)

    def again(self) -> None:
        self.ledger.attempt_again(self.ticket)


@contextmanager
def watching(ledger: Ledger | None, ticket: object) -> Iterator[None]:
    """Around ``Backend.complete``: every attempt of the request ``ticket`` reserved is counted in ``ledger`` as the
    API sees it (nothing without a ledger or a ticket)."""
    if ledger is None or not isinstance(ticket, Ticket):
        yield
        return
    token = ATTEMPT_WATCH.set(Attempts(ledger, ticket))
    try:
        yield
    finally:
        ATTEMPT_WATCH.reset(token)
