"""Prefetch: keep the configured concurrency in flight even though pytest runs one test at a time.

Before the workers start, the controller runs the same selection once in plan mode (a child pytest
process, no xdist: :mod:`~pytest_longctx.session.plan_child`) that writes every request the run will send to a
JSONL file. A dispatcher thread sends all uncached requests with ``--longctx-max-concurrency`` in flight
(while the child still plans), writing answers into the shared cache and failures into error files
(errors are never cached). A test whose request was planned waits for its answer instead of calling
the API itself. :meth:`Dispatcher.cancel` stops it at once (see :mod:`~pytest_longctx.session.stopping`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_longctx.backends.base import Completion, Request
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.lanes import POLL_S, Inside, LaneQueue
from pytest_longctx.dispatch.ledger import BudgetRefused, Ledger, settle, watching
from pytest_longctx.dispatch.plan import read_plan
from pytest_longctx.dispatch.skips import RunStopped
from pytest_longctx.errors import BackendError, FatalBackendError
from pytest_longctx.util.fsutil import atomic_write_text


def error_path(work: Path, key: str) -> Path:
    return work / "errors" / f"{key}.json"


def kept_path(work: Path, key: str) -> Path:
    """An answer the cache could not store, kept for this run only."""
    return work / "kept" / f"{key}.json"


def stopped_path(work: Path) -> Path:
    """Written when the run stopped (SIGINT, -x, a fatal error): holds why; waiting tests then end skipped."""
    return work / "stopped"


def sent_path(work: Path, key: str) -> Path:
    """Marker of a request the controller sent in this run (its answer is then not a cache hit)."""
    return work / "sent" / key


def write_error(work: Path, key: str, message: str, fatal: bool) -> None:
    path = error_path(work, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"error": message, "fatal": fatal}), encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class Waiter:
    """Worker side: planned keys are waited for in the cache instead of being sent again."""

    work: Path
    cache: ResponseCache
    timeout_s: float = 3600.0
    _keys: set[str] | None = None
    _warned: bool = False
    _seq: Iterator[int] = field(default_factory=itertools.count, repr=False)

    def expects(self, key: str) -> bool:
        if self._keys is None:
            path = self.work / "keys.txt"
            self._keys = set(path.read_text().split()) if path.exists() else set()
        return key in self._keys

    async def wait(self, key: str, unneeded: Callable[[], None] | None = None) -> Completion:
        """The answer the controller sends for ``key``. ``unneeded`` raises the skip once every sequential alarm
        covering the trial is settled: an answer already received is used, one not yet received is not waited for.

        A test that has to wait says so (``wanted/<key>``), so the dispatcher sends that request next whatever its
        window; a request nothing will deliver ends as an error naming it (never a silent wait)."""
        marker: list[Path] = []
        try:
            return await self._wait(key, unneeded, marker)
        finally:
            for path in marker:
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)

    async def _wait(self, key: str, unneeded: Callable[[], None] | None, marker: list[Path]) -> Completion:
        deadline = time.monotonic() + self.timeout_s
        delay = 0.005
        while time.monotonic() < deadline:
            hit = self.cache.get(key)
            if hit is not None:  # sent by the controller in this run, or already cached before it
                return Completion.from_json(hit, cache_hit=not sent_path(self.work, key).exists())
            kept = kept_path(self.work, key)
            if kept.exists():  # received, but the cache could not store it: this run uses it all the same
                if not self._warned:
                    self._warned = True
                    warnings.warn(f"longctx cache: cannot store answers in {self.cache.root}; this run keeps them, "
                                  "a re-run will send them again", stacklevel=2)
                return Completion.from_json(json.loads(kept.read_text(encoding="utf-8")))
            err = error_path(self.work, key)
            stopped = stopped_path(self.work)
            if stopped.exists() and not err.exists():
                raise RunStopped(stopped.read_text(encoding="utf-8").strip() or "stopped")
            if err.exists():
                info = json.loads(err.read_text(encoding="utf-8"))
                cls = FatalBackendError if info.get("fatal") else BackendError
                raise cls(info["error"])
            if unneeded is not None:
                unneeded()
            done = self.work / "done"
            if done.exists() and self.cache.get(key) is None and not err.exists():
                why = done.read_text(encoding="utf-8").strip()
                raise BackendError(f"prefetch: finished without an answer for request {key[:12]}"
                                   f"{f' (the dispatcher failed: {why})' if why else ''}{_waiting_test()}")
            if not marker:  # the dispatcher sends what a test waits for first, whatever its window says
                marker.append(self._announce(key))
            await asyncio.sleep(delay)
            delay = min(0.05, delay * 1.5)
        raise BackendError(f"prefetch: no answer for request {key[:12]} within {self.timeout_s:.0f}s"
                           f"{_waiting_test()}")

    def _announce(self, key: str) -> Path:
        path = self.work / "wanted" / f"{key}.{os.getpid()}.{next(self._seq)}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        except OSError as exc:  # the dispatcher could not learn what this test waits for: say so, do not hang
            raise BackendError(f"prefetch: cannot tell the dispatcher that a test waits for request {key[:12]} "
                               f"({exc.strerror or exc}){_waiting_test()}") from None
        return path


def wanted_keys(work: Path) -> frozenset[str]:
    """The requests tests are waiting for now (``wanted/<key>.<pid>.<n>``, one marker per waiting test)."""
    try:
        return frozenset(name.split(".", 1)[0] for name in os.listdir(work / "wanted"))
    except OSError:
        return frozenset()


def _waiting_test() -> str:
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    return f" (test {test})" if test else ""


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


class Dispatcher:
    """Controller side: sends planned, uncached requests with bounded concurrency in a thread.

    Either after the plan run (:meth:`start`), or while it runs (:meth:`start_streaming`, then
    :meth:`plan_finished`): requests are then sent as the child plans them, so planning and sending overlap.
    """

    def __init__(self, backend: Any, cache: ResponseCache, work: Path, plan_file: Path, concurrency: int = 16) -> None:
        self.backend = backend
        self.concurrency = max(1, concurrency)
        self.cache = cache
        self.work = work
        self.plan_file = plan_file
        self.progress = Progress()
        self._thread: threading.Thread | None = None
        self._fatal: str | None = None
        self._plan_ended = threading.Event()
        self._abandoned = False
        #: Why the run stopped (set by :meth:`cancel`); no request starts once it is set.
        self.cancelled: str | None = None
        self._lock = threading.RLock()  # re-entrant: cancel() may run in a signal handler on a thread inside it
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        #: The sequential gate's window: ``(entry, line in the plan) -> whether it may go out now`` (None: no
        #: window). A request a test waits for goes out whatever it says (``wanted/``, see :class:`Waiter`).
        self.allowance: Inside | None = None
        #: The sequential gate's per-alarm stops: ``(experiment, params) -> why`` when every alarm covering that
        #: trial is settled (None: still needed); a request all of whose trials are unneeded is dropped, not sent.
        self.unneeded: Callable[[str, dict[str, Any]], str | None] | None = None
        #: Each planned key's trials (experiment, params), as the plan names them (a key may serve several).
        self._owners: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self._started = 0
        #: The run's ledger: each request is debited there before it is sent (None: no budget, no count).
        self.ledger: Ledger | None = None
        #: Why the ledger refused a request (the budget is reached): nothing more starts, those in flight finish.
        self.refused: str | None = None
        self._in_flight: set[str] = set()
        self._dropped_keys: set[str] = set()
        self._wanted: frozenset[str] = frozenset()
        self._wanted_at = 0.0
        self._fed = False  # every planned entry offered to the lanes

    def prepare(self) -> list[dict[str, Any]]:
        """Write keys.txt (every planned key) and return the entries that still need sending."""
        pending: dict[str, dict[str, Any]] = {}
        keys: list[str] = []
        for line, entry in enumerate(read_plan(self.plan_file)):
            keys.append(entry["key"])
            self._own(entry)
            if entry["key"] not in pending and self.cache.get(entry["key"]) is None:
                pending[entry["key"]] = {**entry, "line": line}
        self._write_keys(keys)
        self.progress.total = len(pending)
        return list(pending.values())

    def _write_keys(self, keys: list[str]) -> None:
        (self.work / "keys.txt").write_text("\n".join(sorted(set(keys))), encoding="utf-8")

    def start(self) -> None:
        """Send everything in the finished plan."""
        entries = self.prepare()
        self._plan_ended.set()
        self._spawn(entries)

    def start_streaming(self) -> None:
        """Send requests as the running child plan run appends them; then call :meth:`plan_finished`."""
        self._spawn(None)

    def plan_finished(self, ok: bool) -> None:
        """The child plan run ended: write keys.txt (before any worker starts), or stop feeding if it failed."""
        if ok:
            self._write_keys([entry["key"] for entry in read_plan(self.plan_file)] if self.plan_file.exists() else [])
        else:
            self._abandoned = True
        self._plan_ended.set()

    def _spawn(self, entries: list[dict[str, Any]] | None) -> None:
        self._thread = threading.Thread(target=self._main, args=(entries,), name="longctx-prefetch", daemon=True)
        self._thread.start()

    def _main(self, entries: list[dict[str, Any]] | None) -> None:
        try:
            asyncio.run(self._run(entries))
        except asyncio.CancelledError:  # cancel(): the run stopped
            pass

    def cancel(self, reason: str, *, drain: bool = True) -> None:
        """Stop, from any thread (a signal handler too): no request starts after this. ``drain`` (a budget or a
        gate stop, a first Ctrl-C): those in flight are answered and stored first (they are paid for; the record
        counts what they cost); else (SIGTERM, a second Ctrl-C, -x, a fatal error) they are abandoned, counted in
        the ledger as abandoned at their estimate. Answers already received are in the cache. :meth:`join` then returns
        promptly (after ``drain``, once those in flight are answered)."""
        with self._lock:
            self.cancelled = self.cancelled or reason
            loop, task = self._loop, self._task
        self._plan_ended.set()
        if not drain and loop is not None and task is not None:  # a later stop may abandon what the first drains
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop already closed: the thread is finishing by itself
                pass

    async def _feed(self, queue: LaneQueue) -> None:
        """Tail the plan file while the child writes it; queue each new uncached key once, in plan order."""
        seen: set[str] = set()
        offset, partial, number = 0, b"", 0
        self.progress.started = time.monotonic()
        while True:
            ended = self._plan_ended.is_set()  # checked before reading: the read after the child ended is complete
            try:
                with self.plan_file.open("rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                    offset = fh.tell()
            except FileNotFoundError:
                chunk = b""
            *lines, partial = (partial + chunk).split(b"\n")
            for line in lines:
                if self._abandoned or not line.strip():
                    continue
                entry = json.loads(line)
                number += 1
                self._own(entry)
                if entry["key"] not in seen and self.cache.get(entry["key"]) is None:
                    seen.add(entry["key"])
                    now = time.monotonic()
                    with self.progress.lock:
                        self.progress.total += 1
                        self.progress.first_planned = self.progress.first_planned or now
                        self.progress.last_planned = now
                    queue.offer(entry, number - 1)
            if ended or self._abandoned or self.cancelled is not None:
                break
            await asyncio.sleep(0.02)
        self._fed = True
        queue.end_of_input()

    def _own(self, entry: dict[str, Any]) -> None:
        if "experiment" in entry:
            self._owners.setdefault(entry["key"], []).append((str(entry["experiment"]), entry.get("params") or {}))

    def _dropped(self, entry: dict[str, Any]) -> bool:
        """Whether every trial of this request is unneeded now (counted once, when it is dropped)."""
        owners = self._owners.get(entry["key"])
        if self.unneeded is None or not owners or not all(self.unneeded(e, p) for e, p in owners):
            return False
        self._dropped_keys.add(entry["key"])
        with self.progress.lock:
            self.progress.dropped += 1
        return True

    async def _one(self, entry: dict[str, Any]) -> None:
        key = entry["key"]
        if self.cancelled is not None:  # checked right before sending: nothing starts after cancel()
            return
        if self._dropped(entry):  # its trials' alarms are settled: the waiting tests end skipped
            return
        if self._fatal is not None:
            write_error(self.work, key, self._fatal, True)
            return
        request = Request.from_json(entry["request"])
        ticket = self._reserve(request)
        if ticket is None:  # refused by the budget: its waiting test ends skipped with the reason
            return
        self._started += 1
        try:
            with watching(self.ledger, ticket):  # each attempt the API sees is counted (retries too)
                completion = await self.backend.complete(request)
        except BudgetRefused as exc:  # a retry the budget no longer covers: a budget stop like a refused request
            self.refused = str(exc)
            self.cancel(self.refused, drain=True)
            return
        except FatalBackendError as exc:
            self._release(ticket, failed=True)
            self._fatal = str(exc)
            write_error(self.work, key, str(exc), True)
            return
        except asyncio.CancelledError:  # abandoned by a stop: sent, no answer; its estimate stays counted
            if self.ledger is not None:
                self.ledger.abandon(ticket)
            raise
        except Exception as exc:  # every failure must reach the waiting test
            self._release(ticket, failed=True)
            message = str(exc) if isinstance(exc, BackendError) else f"prefetch: {type(exc).__name__}: {exc}"
            write_error(self.work, key, message, False)
            with self.progress.lock:
                self.progress.failed += 1
            return
        if self.ledger is not None:
            settle(self.ledger, ticket, completion)
        sent = sent_path(self.work, key)  # marked before it is stored: a waiter finding it counts a request sent
        sent.parent.mkdir(parents=True, exist_ok=True)
        sent.touch()
        try:
            self.cache.put(key, completion.to_json(), {"provider": self.backend.provider, "model": self.backend.model,
                                                        "template": entry["request"].get("template", "")})
        except OSError as exc:  # kept for this run's tests in the work folder (see Waiter.wait)
            try:
                atomic_write_text(kept_path(self.work, key), json.dumps(completion.to_json(), ensure_ascii=False))
            except OSError:
                write_error(self.work, key, "prefetch: answer received, but neither the cache nor the work folder "
                            f"could store it ({exc.strerror or exc})", False)
                with self.progress.lock:
                    self.progress.failed += 1
                return
        with self.progress.lock:
            self.progress.done += 1
            self.progress.input_tokens += completion.input_tokens
            self.progress.output_tokens += completion.output_tokens
            self.progress.latency_s += completion.latency_s

    def _reserve(self, request: Request) -> Any:
        """Debit the ledger (``True`` without one); None when the budget refuses: nothing more starts, the requests
        in flight finish, then the waiting tests end skipped with why (the ``stopped`` file)."""
        if self.ledger is None:
            return True
        if self.refused is not None:
            return None
        tokens = 0
        if self.ledger.budgeted():
            text = request.text()
            tokens = self.backend.count_tokens(text)
        try:
            return self.ledger.reserve(f"{self.backend.provider}/{self.backend.model}", tokens, request.max_tokens,
                                       cache_write=bool(request.cache_prefix))
        except BudgetRefused as exc:  # drained: the answers in flight are paid for, so they are stored and used
            self.refused = str(exc)
            self.cancel(self.refused, drain=True)
            return None

    def _release(self, ticket: Any, *, failed: bool) -> None:
        if self.ledger is not None and ticket is not True:
            self.ledger.release(ticket, failed=failed)

    async def _run(self, entries: list[dict[str, Any]] | None) -> None:
        queue = LaneQueue(self.concurrency)  # plan order, a prompt-cache prefix warmed before its siblings go out
        if entries is not None:
            for entry in entries:
                queue.offer(entry, entry.get("line"))
            self._fed = True
            queue.end_of_input()
        allowance = self.allowance
        wanted = self._wanted_now if allowance is not None else None  # without a window nothing is held back

        async def lane() -> None:  # ``concurrency`` lanes take the entries one at a time
            while (entry := await queue.get(allowance, wanted)) is not None:
                self._in_flight.add(entry["key"])
                try:
                    await self._one(entry)
                finally:
                    self._in_flight.discard(entry["key"])
                    queue.done(entry)

        with self._lock:
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
            cancelled = self.cancelled is not None
        ended = ""
        try:
            if not cancelled:
                # Not one task per entry: thousands of tasks queued on the backend's limit would all wake on each
                # answer.
                feed = [self._feed(queue)] if entries is None else []
                lanes = asyncio.gather(*feed, *(lane() for _ in range(self.concurrency)))
                watch = asyncio.ensure_future(self._watch(queue))
                try:
                    await lanes
                finally:
                    watch.cancel()
        except Exception as exc:  # a bug: every waiting test must learn that nothing more comes, and why
            ended = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            with self._lock:
                self._loop = self._task = None
            if self.cancelled is not None:  # before "done": a waiting test must see why, not "no answer"
                stopped_path(self.work).write_text(self.cancelled, encoding="utf-8")
            (self.work / "done").write_text(ended, encoding="utf-8")
            await self.backend.aclose()

    def _wanted_now(self) -> frozenset[str]:
        """The keys tests wait for now, read at most every ``POLL_S``."""
        now = time.monotonic()
        if now - self._wanted_at >= POLL_S:
            self._wanted_at = now
            self._wanted = wanted_keys(self.work)
        return self._wanted

    async def _watch(self, queue: LaneQueue) -> None:
        """Never a silent hang: when nothing is in flight, nothing started since the last look and a test still
        waits for a request the lanes neither hold nor answered, nothing will deliver it: its test ends with an
        error naming the request and the dispatcher's state."""
        suspects: frozenset[str] = frozenset()
        started = -1
        while True:
            await asyncio.sleep(POLL_S)
            if self.cancelled is not None:  # a stop: the lanes finish what is in flight and take nothing more
                queue.close()
            if self.allowance is not None:  # the window moves with the reported tests, on the controller's thread
                queue.nudge(self.allowance, self._wanted_now())
            if not self._fed or self._in_flight or self._started != started or self.cancelled is not None:
                suspects, started = frozenset(), self._started  # a stop (budget, gate) tells the tests itself
                continue
            self._wanted_at = 0.0  # read afresh
            lost = frozenset(k for k in self._wanted_now() if not self._answered(k) and k not in self._dropped_keys)
            for key in sorted(lost & suspects):
                state = "still queued" if queue.holds(key) else "not among its requests"
                write_error(self.work, key, f"prefetch: a test waits for request {key[:12]}, which the dispatcher "
                            f"cannot deliver ({state}; nothing in flight, {self._started:,} sent, {queue.held:,} "
                            "held for their prompt-cache prefix)", False)
            suspects = lost - suspects
            queue.nudge(self.allowance, lost)  # the lanes look once more before a suspect is given up

    def _answered(self, key: str) -> bool:
        return (self.cache.get(key) is not None or kept_path(self.work, key).exists()
                or error_path(self.work, key).exists())

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (after :meth:`cancel`, promptly)."""
        if self._thread is not None:
            self._thread.join(timeout)
