"""Prefetch: keep the configured concurrency in flight even though pytest runs one test at a time.

Before the workers start, the controller runs the same selection once in plan mode (a child pytest
process, no xdist: :mod:`~pytest_longctx.session.plan_child`) that writes every request the run will send to a
JSONL file. A dispatcher thread sends all uncached requests with ``--longctx-max-concurrency`` in flight
(while the child still plans), writing answers into the shared cache and failures into error files
(errors are never cached; :mod:`~pytest_longctx.dispatch.send`). A test whose request was planned waits for its
answer instead of calling the API itself (:mod:`~pytest_longctx.dispatch.waiter`). :meth:`Dispatcher.cancel` stops
it at once (see :mod:`~pytest_longctx.session.stopping`). With the sequential gate, its
:class:`~pytest_longctx.dispatch.policy.StopPolicy` keeps the lanes a window ahead of the reported tests and drops
the requests only settled alarms would use.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

from pytest_longctx.backends.base import Backend
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.lanes import POLL_S, LaneQueue
from pytest_longctx.dispatch.ledger import Ledger
from pytest_longctx.dispatch.plan import read_plan
from pytest_longctx.dispatch.policy import PlannedRequest, StopPolicy, Trial
from pytest_longctx.dispatch.send import Progress, Sender
from pytest_longctx.dispatch.workdir import error_path, kept_path, stopped_path, wanted_keys, write_error


class Dispatcher:
    """Controller side: sends planned, uncached requests with bounded concurrency in a thread.

    Either after the plan run (:meth:`start`), or while it runs (:meth:`start_streaming`, then
    :meth:`plan_finished`): requests are then sent as the child plans them, so planning and sending overlap.
    ``ledger``: the run's, debited before each request is sent (None: no budget, no count). ``policy``: the
    sequential gate's (None: no window, nothing dropped); a request a test waits for goes out whatever its window
    says (``wanted/``, see :class:`~pytest_longctx.dispatch.waiter.Waiter`), and a request whose every trial it
    finds unneeded is dropped, not sent.
    """

    def __init__(self, backend: Backend, cache: ResponseCache, work: Path, plan_file: Path, concurrency: int = 16,
                 *, ledger: Ledger | None = None, policy: StopPolicy | None = None) -> None:
        self.concurrency = max(1, concurrency)
        self.cache = cache
        self.work = work
        self.plan_file = plan_file
        self.progress = Progress()
        self.policy = policy
        self._sender = Sender(backend, cache, work, self.progress, ledger)
        self._thread: threading.Thread | None = None
        self._plan_ended = threading.Event()
        self._abandoned = False
        #: Why the run stopped (set by :meth:`cancel`); no request starts once it is set.
        self.cancelled: str | None = None
        self._lock = threading.RLock()  # re-entrant: cancel() may run in a signal handler on a thread inside it
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        #: Each planned key's trials, as the plan names them (a key may serve several).
        self._owners: dict[str, list[Trial]] = {}
        self._in_flight: set[str] = set()
        self._dropped_keys: set[str] = set()
        self._wanted: frozenset[str] = frozenset()
        self._wanted_at = 0.0
        self._fed = False  # every planned entry offered to the lanes

    @property
    def refused(self) -> str | None:
        """Why the ledger refused a request (the budget is reached): nothing more starts, those in flight finish."""
        return self._sender.refused

    def prepare(self) -> list[PlannedRequest]:
        """Write keys.txt (every planned key) and return the entries that still need sending."""
        pending: dict[str, PlannedRequest] = {}
        keys: list[str] = []
        for planned in read_plan(self.plan_file):
            keys.append(planned.key)
            self._own(planned)
            if planned.key not in pending and self.cache.get(planned.key) is None:
                pending[planned.key] = planned
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
            self._write_keys([planned.key for planned in read_plan(self.plan_file)] if self.plan_file.exists() else [])
        else:
            self._abandoned = True
        self._plan_ended.set()

    def _spawn(self, entries: list[PlannedRequest] | None) -> None:
        self._thread = threading.Thread(target=self._main, args=(entries,), name="longctx-prefetch", daemon=True)
        self._thread.start()

    def _main(self, entries: list[PlannedRequest] | None) -> None:
        try:
            asyncio.run(self._run(entries))
        except asyncio.CancelledError:  # cancel(): the run stopped
            pass

    def cancel(self, reason: str, *, drain: bool = True) -> None:
        """Stop, from any thread (a signal handler too): no request starts after this. ``drain`` (a budget or a
        gate stop, a first Ctrl-C): those in flight are answered and stored first (they are paid for; the record
        counts what they cost); else (SIGTERM, a second Ctrl-C, -x, a fatal error) they are abandoned, counted in
        the ledger as abandoned at their estimate. Answers already received are in the cache. :meth:`join` then
        returns promptly (after ``drain``, once those in flight are answered)."""
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
                planned = PlannedRequest.from_plan(json.loads(line), number)
                number += 1
                self._own(planned)
                if planned.key not in seen and self.cache.get(planned.key) is None:
                    seen.add(planned.key)
                    self._count_planned()
                    queue.offer(planned)
            if ended or self._abandoned or self.cancelled is not None:
                break
            await asyncio.sleep(0.02)
        self._fed = True
        queue.end_of_input()

    def _count_planned(self) -> None:
        now = time.monotonic()
        with self.progress.lock:
            self.progress.total += 1
            self.progress.first_planned = self.progress.first_planned or now
            self.progress.last_planned = now

    def _own(self, planned: PlannedRequest) -> None:
        if planned.trial is not None:
            self._owners.setdefault(planned.key, []).append(planned.trial)

    def _dropped(self, planned: PlannedRequest) -> bool:
        """Whether every trial of this request is unneeded now (counted once, when it is dropped)."""
        owners, policy = self._owners.get(planned.key), self.policy
        if policy is None or not owners or not all(policy.settled(trial) for trial in owners):
            return False
        self._dropped_keys.add(planned.key)
        with self.progress.lock:
            self.progress.dropped += 1
        return True

    async def _one(self, planned: PlannedRequest) -> None:
        if self.cancelled is not None:  # checked right before sending: nothing starts after cancel()
            return
        if self._dropped(planned):  # its trials' alarms are settled: the waiting tests end skipped
            return
        await self._sender.send(planned)
        if self._sender.refused is not None:  # drained: the answers in flight are paid for, so stored and used
            self.cancel(self._sender.refused, drain=True)

    async def _run(self, entries: list[PlannedRequest] | None) -> None:
        queue = LaneQueue(self.concurrency)  # plan order, a prompt-cache prefix warmed before its siblings go out
        if entries is not None:
            for planned in entries:
                queue.offer(planned)
            self._fed = True
            queue.end_of_input()
        with self._lock:
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
            cancelled = self.cancelled is not None
        ended = ""
        try:
            if not cancelled:
                # Not one task per entry: thousands of tasks queued on the backend's limit would all wake on each
                # answer.
                feed = [self._feed(queue)] if entries is None else []
                lanes = asyncio.gather(*feed, *(self._lane(queue) for _ in range(self.concurrency)))
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
            await self._sender.backend.aclose()

    async def _lane(self, queue: LaneQueue) -> None:
        """One of ``concurrency`` lanes: takes the entries one at a time (without a window nothing is held back)."""
        policy = self.policy
        inside, wanted = (policy.inside, self._wanted_now) if policy is not None else (None, None)
        while (planned := await queue.get(inside, wanted)) is not None:
            self._in_flight.add(planned.key)
            try:
                await self._one(planned)
            finally:
                self._in_flight.discard(planned.key)
                queue.done(planned)

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
            inside = self.policy.inside if self.policy is not None else None
            if inside is not None:  # the window moves with the reported tests, on the controller's thread
                queue.nudge(inside, self._wanted_now())
            sent = self._sender.started
            if not self._fed or self._in_flight or sent != started or self.cancelled is not None:
                suspects, started = frozenset(), sent  # a stop (budget, gate) tells the tests itself
                continue
            self._wanted_at = 0.0  # read afresh
            lost = frozenset(k for k in self._wanted_now() if not self._answered(k) and k not in self._dropped_keys)
            for key in sorted(lost & suspects):
                state = "still queued" if queue.holds(key) else "not among its requests"
                write_error(self.work, key, f"prefetch: a test waits for request {key[:12]}, which the dispatcher "
                            f"cannot deliver ({state}; nothing in flight, {sent:,} sent, {queue.held:,} "
                            "held for their prompt-cache prefix)", False)
            suspects = lost - suspects
            queue.nudge(inside, lost)  # the lanes look once more before a suspect is given up

    def _answered(self, key: str) -> bool:
        return (self.cache.get(key) is not None or kept_path(self.work, key).exists()
                or error_path(self.work, key).exists())

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (after :meth:`cancel`, promptly)."""
        if self._thread is not None:
            self._thread.join(timeout)
