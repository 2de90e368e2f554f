"""A batch whose create answer was lost (``LostBatch``: a dropped connection, a body cut short): the API may have
made it and will bill it, so it is not created again (:mod:`~pytest_longctx.dispatch.batch`), and what it may cost is
counted and recorded here.

Its requests stay sent in the run's ledger, failed and ``unread``, each at its estimate (input tokens counted now if
the run reserved them without: only a budget needs them up front; output at ``max_tokens``), beside the requests a
stop abandoned (``abandoned_usd``). The record's ``batch.lost`` names the requests by the ``custom_id`` each had in the
body (no batch id came back), so they can be set beside the provider's own list of batches and its bill.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_longctx.backends.base import Request
from pytest_longctx.dispatch.ledger import Ledger, Ticket
from pytest_longctx.dispatch.plan import read_plan


def is_lost(exc: BaseException) -> bool:
    """Whether a create failed with its answer lost (the API may have made the batch: ``billing`` unknown)."""
    return getattr(exc, "billing", None) == "unknown"


def count_lost(ledger: Ledger | None, tickets: dict[str, Ticket], keys: list[str], size: int, plan_file: Path,
               why: str) -> dict[str, Any]:
    """The lost batch's requests (``keys``, their tickets taken from ``tickets``) counted unread in ``ledger`` at
    their estimates; the record's ``batch.lost``: ``requests``, ``bytes``, ``possible_usd``, ``custom_ids``, ``why``."""
    held = {key: tickets.pop(key) for key in keys if key in tickets}
    counted: list[Ticket] = []
    if ledger is not None and held:
        from pytest_longctx.corpus.tokens import TiktokenCounter

        counter = TiktokenCounter()
        for planned in read_plan(plan_file):
            ticket = held.pop(planned.key, None)
            if ticket is None:
                continue
            request = Request.from_json(planned.request)
            usd = ledger.estimate(ticket.model, counter.count(request.text()), request.max_tokens,
                                  cache_write=bool(request.cache_prefix), batch=True)
            counted.append(replace(ticket, usd=max(usd, ticket.usd)))
        counted += held.values()  # (not in the plan: as reserved)
        ledger.unread(counted)
    return {"requests": len(keys), "bytes": size, "possible_usd": round(sum(t.usd for t in counted), 6),
            "custom_ids": sorted(keys), "why": why}
