"""Batch mode: the run's requests go through the provider's batch API (``Provider.batch_api``; Anthropic's
Message Batches API: half price), then tests score them.

Flow (controller, before the workers start), with memory bounded by one request, never by a batch or the study:

1. The child plan run wrote every request of the run to a JSONL file. It is read as a stream, first for the keys
   that are not cached yet (only keys are kept).
2. Keys already in a submitted, uncollected batch (``<cache-dir>/batches/<id>.json``, written right after the batch
   is created) are not submitted again: a run stopped while its batches ran (SIGINT, a timeout, a crash) leaves
   them to the next run, which collects them instead of paying twice.
3. The rest go out one batch at a time: the plan is read again and each request is written to a body file as
   the batch item the API receives, until the next one would pass the provider's limit of requests or bytes
   (100,000 requests or 256 MB for Anthropic); the file is uploaded, its batch recorded, the file deleted.
4. Every open batch is polled each round (progress on one line); an ended one's results are streamed into the
   response cache: ``succeeded`` answers become cache entries; ``errored``, ``canceled`` and ``expired`` requests
   become errors of their trials, with the reason (never wrong answers, never cached, so the next run submits
   exactly those again). A collected batch is marked so, and a re-run downloads nothing twice.

Tests then find their answers in the cache.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.backends.registry import load, provider_of
from pytest_longctx.dispatch.batch_api import BatchApi, BatchStatus, Pause
from pytest_longctx.dispatch.batch_lost import count_lost, is_lost
from pytest_longctx.dispatch.batch_progress import StatusLine, printer, progress_text, size_text
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.ledger import BudgetRefused, Ledger, Ticket, settle
from pytest_longctx.dispatch.plan import read_plan
from pytest_longctx.dispatch.workdir import mark_sent, stopped_path, write_error
from pytest_longctx.errors import UsageError
from pytest_longctx.util.fsutil import atomic_write_text

if TYPE_CHECKING:
    from pytest_longctx.run_settings import Settings

#: Seconds between polls of the open batches ($LONGCTX_BATCH_POLL overrides).
POLL_S = 30.0


@dataclass
class BatchRun:
    """What this run submitted, reused and collected (for the summary and the run record)."""

    submitted: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    #: Batches of earlier runs the API no longer has (their requests were submitted again).
    gone: list[str] = field(default_factory=list)
    requests_submitted: int = 0
    bytes_submitted: int = 0
    #: The batches this run submitted: ``{"id", "requests", "bytes"}`` each.
    batches: list[dict[str, Any]] = field(default_factory=list)
    #: Answers stored in the cache, and requests that ended without one (``endings`` says how).
    collected: int = 0
    errored: int = 0
    endings: dict[str, int] = field(default_factory=dict)
    #: Requests too large for any batch (each an error of its trial).
    too_large: int = 0
    #: The run's ledger (``dispatch/ledger.py``): each request is debited, at the batch price, before it goes into a
    #: batch; a batch is cut where the budget ends (``refused`` says why), the rest is not submitted.
    ledger: Ledger | None = field(default=None, repr=False)
    spec: str = ""
    refused: str | None = None
    tickets: dict[str, Ticket] = field(default_factory=dict, repr=False)
    #: A batch whose create answer was lost: its requests, which may have been made and billed (``batch_lost.py``).
    lost: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"submitted": self.submitted, "resumed": self.resumed, "gone": self.gone,
                "requests_submitted": self.requests_submitted,
                "bytes_submitted": self.bytes_submitted, "batches": self.batches, "collected": self.collected,
                "errored": self.errored, "endings": dict(sorted(self.endings.items())), "too_large": self.too_large,
                **({"refused": self.refused} if self.refused else {}), **({"lost": self.lost} if self.lost else {})}

    def reserve(self, key: str, request: Request) -> bool:
        """Debit ``request`` (at the batch price) before it goes into a batch; False once the budget refuses."""
        if self.ledger is None:
            return True
        if self.refused is not None:
            return False
        tokens = 0
        if self.ledger.budgeted():
            from pytest_longctx.corpus.tokens import TiktokenCounter

            text = request.text()
            tokens = TiktokenCounter().count(text)
        try:
            self.tickets[key] = self.ledger.reserve(self.spec, tokens, request.max_tokens,
                                                    cache_write=bool(request.cache_prefix), batch=True)
        except BudgetRefused as exc:
            self.refused = str(exc)
            return False
        return True

    def settle(self, key: str, completion: Completion | None) -> None:
        """A result of this run's batch: its usage settles the ticket (None: no answer, nothing billed)."""
        ticket = self.tickets.pop(key, None)
        if ticket is None or self.ledger is None:
            return  # an earlier run's batch: paid for by that run
        if completion is None:
            self.ledger.release(ticket, failed=True)
        else:
            settle(self.ledger, ticket, completion, ttl_1h=True)


def _state_dir(cache_dir: Path) -> Path:
    return cache_dir / "batches"


def _save(path: Path, state: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(state, indent=1))


def open_batches(cache_dir: Path, model: str) -> dict[str, dict[str, Any]]:
    """Submitted, not yet collected batches of ``model`` by id."""
    out = {}
    folder = _state_dir(cache_dir)
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            state = json.loads(path.read_text(encoding="utf-8"))
            if state.get("model") == model and not state.get("collected"):
                out[state["id"]] = state
    return out


def run_batches(settings: Settings, cache: ResponseCache, work: Path, plan_file: Path, run: BatchRun,
                status: StatusLine | None = None, client: Any = None) -> BatchRun:
    """Submit what is missing, wait for every relevant batch, collect results into the cache; ``run`` (with the
    run's ledger) says what was sent, also when this raises.

    The provider's batch API (``Provider.batch_api``) does the calls; ``client`` is handed to it (its SDK client).
    ``status`` shows progress (default: plain lines on stdout).
    """
    out = status or printer(print)
    provider = provider_of(settings.model)
    api = batch_api(settings, client)
    model = settings.model.name
    planned = _uncached_keys(plan_file, cache)
    (work / "keys.txt").write_text("\n".join(sorted(planned)), encoding="utf-8")
    if not planned:
        return run
    relevant = resume(api, settings.cache_dir, model, planned, run, out)
    in_flight = {key for state in relevant.values() for key in state["keys"]}
    for state in submit_all(api, model, plan_file, planned - in_flight, settings.cache_dir, work, run, out):
        relevant[state["id"]] = state
    wait_and_collect(api, provider.name, relevant, cache, work, run, settings.cache_dir, out)
    if run.refused is not None:  # the requests past the budget were not submitted: their tests end skipped
        stopped_path(work).write_text(run.refused, encoding="utf-8")
        out.line(f"longctx batch: {run.refused}; the requests past it were not submitted")
    return run


def resume(api: BatchApi, cache_dir: Path, model: str, planned: set[str] | dict[str, Any], run: BatchRun,
           out: StatusLine) -> dict[str, dict[str, Any]]:
    """Earlier runs' uncollected batches holding any of the ``planned`` keys, by id (those the API lost are closed:
    their requests go out again)."""
    relevant = {bid: s for bid, s in open_batches(cache_dir, model).items() if any(k in planned for k in s["keys"])}
    for bid in sorted(relevant):
        if _status(api, bid, cache_dir).gone:  # its requests are not in flight: they go out again
            _close(relevant.pop(bid), cache_dir, gone=True)
            run.gone.append(bid)
            out.line(f"longctx batch: {bid} of an earlier run is gone from the API (deleted, or archived 29 days "
                     "after it was created); its requests are submitted again")
        else:
            run.resumed.append(bid)
            out.line(f"longctx batch: resuming {bid} ({len(relevant[bid]['keys']):,} requests submitted earlier)")
    return relevant


def batch_api(settings: Settings, client: Any = None) -> BatchApi:
    """The model's provider's batch API (``Provider.batch_api``), handed ``client`` (its SDK client)."""
    try:
        api: BatchApi = load(provider_of(settings.model).batch_api)(client, seed=settings.seed)
    except ValueError as exc:  # a bad limit in the environment
        raise UsageError(f"--longctx-batch: {exc}") from None
    return api


class WaitStopped(KeyboardInterrupt):
    """Raised by a wait's ``pause`` when the run stops while batches run: they stay recorded for the next run."""


def _uncached_keys(plan_file: Path, cache: ResponseCache) -> set[str]:
    keys: set[str] = set()
    for planned in read_plan(plan_file):
        if planned.key not in keys and cache.get(planned.key) is None:
            keys.add(planned.key)
    return keys


class _Body:
    """The body of the next batch, written to ``path`` item by item (``api.head``, items, ``api.tail``)."""

    def __init__(self, path: Path, api: BatchApi) -> None:
        self.path = path
        self.head, self.sep, self.tail = bytes(api.head), bytes(api.sep), bytes(api.tail)
        self.max_requests, self.max_bytes = int(api.max_requests), int(api.max_bytes)
        self.keys: list[str] = []
        self.size = 0
        self._fh: IO[bytes] | None = None

    def holds(self, item: bytes) -> bool:
        """Whether ``item`` fits in an empty batch."""
        return len(self.head) + len(item) + len(self.tail) <= self.max_bytes

    def fits(self, item: bytes) -> bool:
        """Whether ``item`` fits in this batch, within the provider's limits of requests and bytes."""
        return not self.keys or (len(self.keys) < self.max_requests
                                 and self.size + len(self.sep) + len(item) + len(self.tail) <= self.max_bytes)

    def add(self, key: str, item: bytes) -> None:
        if self._fh is None:
            self._fh = self.path.open("wb")
            self.size = self._fh.write(self.head)
        else:
            self.size += self._fh.write(self.sep)
        self.size += self._fh.write(item)
        self.keys.append(key)

    def finish(self) -> int:
        """Close the body; its size in bytes."""
        assert self._fh is not None
        self.size += self._fh.write(self.tail)
        self._fh.close()
        return self.size

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
        self.keys, self.size, self._fh = [], 0, None


def submit_all(api: BatchApi, model: str, plan_file: Path, todo: set[str], cache_dir: Path, work: Path, run: BatchRun,
                out: StatusLine) -> Iterator[dict[str, Any]]:
    """Submit ``todo`` (keys of the plan) in as many batches as the limits need, one at a time; their states."""
    body = _Body(work / "batch-body.json", api)
    try:
        for planned in read_plan(plan_file):
            key = planned.key
            if key not in todo:
                continue
            todo.discard(key)
            request = Request.from_json(planned.request)
            try:
                item = api.item(model, key, request)
            except ValueError as exc:
                write_error(work, key, f"batch: {exc}", False)
                run.errored += 1
                continue
            if not body.holds(item):
                write_error(work, key, f"batch: this request is {len(item):,} bytes as a batch item, over the "
                            f"{api.max_bytes:,} bytes a batch may hold; it cannot go through the batch API", False)
                run.too_large += 1
                continue
            if not body.fits(item):  # (before this request is reserved: a failed submit leaves nothing in flight)
                yield _submit(api, model, body, cache_dir, run, out, plan_file)
            if not run.reserve(key, request):  # the budget ends here: this batch is cut, nothing more goes out
                break
            body.add(key, item)
        if body.keys:
            yield _submit(api, model, body, cache_dir, run, out, plan_file)
    finally:
        body.path.unlink(missing_ok=True)


def _submit(api: BatchApi, model: str, body: _Body, cache_dir: Path, run: BatchRun, out: StatusLine,
            plan_file: Path) -> dict[str, Any]:
    size, count = body.finish(), len(body.keys)
    try:
        batch_id = api.submit(body.path)
    except Exception as exc:  # one clear line for the user; batches submitted before stay recorded
        line = f"could not submit a batch of {count:,} requests ({size:,} bytes): {type(exc).__name__}: {exc}"
        if is_lost(exc):  # it may exist: its requests stay counted as sent, at what they may cost, and are recorded
            run.lost = count_lost(run.ledger, run.tickets, body.keys, size, plan_file, line)
            raise UsageError(f"--longctx-batch: {line}; the record's batch.lost lists its {count:,} custom_ids, which "
                             f"may cost up to ${run.lost['possible_usd']:,.2f}") from None
        for key in body.keys:  # not sent: nothing of it is spent
            if (ticket := run.tickets.pop(key, None)) is not None and run.ledger is not None:
                run.ledger.release(ticket, failed=False)
        raise UsageError(f"--longctx-batch: {line}") from None
    state = {"id": batch_id, "model": model, "keys": body.keys, "bytes": size, "submitted": time.time(),
             "collected": False}
    _save(_state_dir(cache_dir) / f"{batch_id}.json", state)
    run.submitted.append(batch_id)
    run.requests_submitted += count
    run.bytes_submitted += size
    run.batches.append({"id": batch_id, "requests": count, "bytes": size})
    out.line(f"longctx batch: submitted {batch_id}: {count:,} request{'s' if count != 1 else ''}, {size_text(size)}")
    body.clear()
    return state


def wait_and_collect(api: BatchApi, provider: str, relevant: dict[str, dict[str, Any]], cache: ResponseCache,
                     work: Path, run: BatchRun, cache_dir: Path, out: StatusLine, pause: Pause = time.sleep) -> None:
    """Poll every open batch until each has ended and been collected; one progress line per round.

    ``pause(seconds)`` waits between polls (it may raise :class:`WaitStopped`).
    """
    poll = float(os.environ.get("LONGCTX_BATCH_POLL", POLL_S))
    start = time.monotonic()
    waiting = dict(relevant)
    final: dict[str, dict[str, int]] = {}  # counts of the batches collected
    try:
        while waiting:
            statuses = {bid: _status(api, bid, cache_dir) for bid in waiting}
            counts: Counter[str] = Counter()
            for request_counts in [*final.values(), *(s.counts for s in statuses.values())]:
                counts.update(request_counts)
            ended = len(final) + sum(s.ended for s in statuses.values())
            out.update(progress_text(len(relevant), ended, counts, time.monotonic() - start),
                       key=(ended, sorted(counts.items())))
            for bid, batch_status in statuses.items():
                if batch_status.gone:  # deleted while this run waited: its requests end without an answer
                    _record_missing(waiting[bid], waiting[bid]["keys"], "is gone from the API", work, run, Counter())
                    _close(waiting.pop(bid), cache_dir, gone=True)
                elif batch_status.ended:
                    _collect(api, provider, waiting[bid], cache, work, run, cache_dir)
                    del waiting[bid]
                    final[bid] = batch_status.counts
            if waiting:
                pause(poll)
    except KeyboardInterrupt:
        out.line(f"longctx batch: stopped while {len(waiting)} batch{'es' if len(waiting) != 1 else ''} ran "
                 f"({', '.join(sorted(waiting))}); {_left_for_next_run(cache_dir)}")
        raise
    except UsageError:
        raise
    except Exception as exc:  # the API or the network failed after retries: one line, the batches stay recorded
        raise UsageError(f"--longctx-batch: waiting for {', '.join(sorted(waiting))} failed ({type(exc).__name__}: "
                         f"{exc}); {_left_for_next_run(cache_dir)}") from None
    finally:
        out.close()


def _left_for_next_run(cache_dir: Path) -> str:
    return (f"recorded in {_state_dir(cache_dir)}, they are collected by the next run with the same "
            "--longctx-cache-dir, not submitted again")


def _status(api: BatchApi, batch_id: str, cache_dir: Path) -> BatchStatus:
    """The batch's status; a one-line error (the batch stays recorded) when the API cannot be asked."""
    try:
        return api.status(batch_id)
    except Exception as exc:
        raise UsageError(f"--longctx-batch: could not ask for {batch_id} ({type(exc).__name__}: {exc}); "
                         f"{_left_for_next_run(cache_dir)}") from None


def _close(state: dict[str, Any], cache_dir: Path, **facts: Any) -> None:
    """Mark a batch as done with: nothing of it is awaited again."""
    state.update(collected=True, collected_at=time.time(), **facts)
    _save(_state_dir(cache_dir) / f"{state['id']}.json", state)


def _record_missing(state: dict[str, Any], keys: list[str], why: str, work: Path, run: BatchRun,
                    endings: Counter[str]) -> None:
    """Requests of ``state`` that ended without a result: errors of their trials (``why``: what the batch did)."""
    for key in keys:
        run.settle(key, None)
        write_error(work, key, f"batch {state['id']} {why}: no result for this request; the next run submits it "
                    "again", False)
    if keys:
        endings["missing"] += len(keys)
        run.endings["missing"] = run.endings.get("missing", 0) + len(keys)
        run.errored += len(keys)


def _collect(api: BatchApi, provider: str, state: dict[str, Any], cache: ResponseCache, work: Path, run: BatchRun,
             cache_dir: Path) -> None:
    """Stream an ended batch's results into the cache (answers) and the work folder (errors, with why)."""
    seen: set[str] = set()
    endings: Counter[str] = Counter()
    for key, ending, completion, why in api.results(state["id"]):
        seen.add(key)
        endings[ending] += 1
        run.settle(key, completion)
        if completion is not None:
            mark_sent(work, key)  # answered through this run's batches: not a cache hit
            if cache.get(key) is None:
                cache.put(key, completion.to_json(), {"provider": provider, "model": state["model"],
                                                      "batch": state["id"]})
            run.collected += 1
        else:
            write_error(work, key, f"batch {state['id']}: request {ending}{f' ({why})' if why else ''}; not an "
                        "answer, so not cached: the next run submits it again", False)
            run.errored += 1
    for ending, n in endings.items():
        run.endings[ending] = run.endings.get(ending, 0) + n
    _record_missing(state, [key for key in state["keys"] if key not in seen], "ended", work, run, endings)
    _close(state, cache_dir, endings=dict(endings))
