"""The model client every trial talks to: cache, concurrency limit, plan mode and usage in one place."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_longctx.backends.base import Backend, Completion, Oracle, Request, request_key
from pytest_longctx.backends.prompt_cache import prefix_identity
from pytest_longctx.backends.registry import provider_of
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.ledger import BudgetRefused, Ledger, Ticket, settle, watching
from pytest_longctx.dispatch.policy import Trial
from pytest_longctx.dispatch.skips import BudgetStopped, Planned, RunStopped
from pytest_longctx.errors import NotCachedError

if TYPE_CHECKING:
    from pytest_longctx.dispatch.settled import SettledAlarms
    from pytest_longctx.dispatch.waiter import Waiter

#: The trial a request belongs to: its experiment and condition params (which sequential alarms cover it).
Scope = tuple[str, dict[str, Any]]


#: Shared prefixes whose token counts a plan remembers before it forgets them and starts again.
_MAX_PREFIXES = 100_000


@dataclass
class ModelClient:
    """Wraps a backend with the response cache, a concurrency limit and plan mode."""

    backend: Backend
    cache: ResponseCache | None
    cache_mode: str = "on"
    max_concurrency: int = 16
    plan: bool = False
    #: With ``plan``: append every planned request (full JSON) to this file.
    plan_out: Path | None = None
    #: With ``plan``: count each planned request's input tokens (the dry run's figures). The prefetch child sets it
    #: False: its plan is sent, never summed, and tokenizing every prompt there would hold up the lanes.
    plan_counts: bool = True
    #: Prefetch/batch: planned requests are answered by the controller through the cache.
    waiter: Waiter | None = None
    #: Created by the controller when the run stops (``stopping.request_stop``): no request is sent after it.
    stop_file: Path | None = None
    #: --longctx-prompt-cache resolved: False drops every request's shared-prefix mark (``Request.cache_prefix``)
    #: before it is planned or sent, so nothing carries a cache breakpoint (the cache key is the same either way).
    prompt_cache: bool = False
    #: --longctx-sequential: the alarms the controller found settled; a request whose every covering alarm is
    #: settled is not sent (nor waited for) and its trial ends skipped (``dispatch/settled.py``).
    settled: SettledAlarms | None = None
    #: The run's ledger (``dispatch/ledger.py``): every request sent is debited there first, at this model's price;
    #: found beside the stop file when not given (None: a client outside a run, e.g. a CLI's).
    ledger: Ledger | None = None
    _semaphore: asyncio.Semaphore | None = field(default=None, repr=False)
    _put_failed: bool = field(default=False, repr=False)
    #: Plan mode: tokens of each shared prefix (by :func:`prefix_identity`) counted so far.
    _prefix_counts: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.ledger is None and self.stop_file is not None and not self.plan:
            self.ledger = Ledger.beside(self.stop_file)

    @property
    def spec(self) -> str:
        return f"{self.backend.provider}/{self.backend.model}"

    def key(self, request: Request) -> str:
        return request_key(self.backend.provider, self.backend.model, request)

    async def complete(self, request: Request, oracle: Oracle | None = None, *,
                       scope: Scope | None = None) -> Completion:
        """Answer from the cache when possible, else call the backend (errors are never cached).

        ``scope``: the asking trial's experiment and params (planned with the request, so prefetch knows which
        alarms cover it; checked against the settled alarms before sending or while waiting).
        """
        if request.cache_prefix and not self.prompt_cache:
            request = dataclasses.replace(request, cache_prefix=0)
        key = self.key(request)
        trial = Trial(*scope) if scope is not None else None
        if not self.plan and self.waiter is not None and self.waiter.expects(key):
            return await self.waiter.wait(key, trial, self.settled)  # sent up front by the controller in this run
        in_process = provider_of(self.backend).in_process  # a scripted double: never cached, given the oracle
        use_cache = self.cache is not None and self.cache_mode != "off" and not in_process
        if use_cache and self.cache_mode != "refresh":
            assert self.cache is not None
            if self.cache_mode == "replay" and not self.plan and (problem := self.cache.problem(key)):
                raise NotCachedError(f"replay mode: corrupt cache entry {problem}; run once with "
                                     "--longctx-cache on to refetch it")
            hit = self.cache.get(key)
            if hit is not None:
                if self.plan:
                    raise Planned(self._plan_entry(request, key, cached=True, scope=scope))
                return Completion.from_json(hit, cache_hit=True)
        if self.plan:
            raise Planned(self._plan_entry(request, key, cached=False, scope=scope))
        if use_cache and self.cache_mode == "replay":
            self._check_needed(trial)  # not needed any more: a skip, not a missing answer
            raise NotCachedError(f"replay mode: no cached response for request {key[:12]} ({request.template}); "
                                 "run once with --longctx-cache=on")
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
        async with self._semaphore:
            if self.stop_file is not None and self.stop_file.exists():  # checked right before sending
                raise RunStopped(self.stop_file.read_text(encoding="utf-8").strip() or "stopped")
            self._check_needed(trial)  # every alarm covering this trial settled: not sent
            start = time.perf_counter()
            completion = await self._send(request, oracle if in_process else None, in_process)
            completion.latency_s = completion.latency_s or (time.perf_counter() - start)
        if use_cache:
            assert self.cache is not None
            meta = {"provider": self.backend.provider, "model": self.backend.model, "template": request.template}
            try:
                self.cache.put(key, completion.to_json(), meta)
            except OSError as exc:  # the answer is kept for this trial all the same
                if not self._put_failed:
                    self._put_failed = True
                    warnings.warn(f"longctx cache: cannot store answers in {self.cache.root} ({exc.strerror or exc}); "
                                  "this run keeps them, a re-run will send them again", stacklevel=2)
        return completion

    def _check_needed(self, trial: Trial | None) -> None:
        """Raise the skip when every alarm covering ``trial`` is settled (``settled``)."""
        if trial is not None and self.settled is not None and (found := self.settled.settled(trial)) is not None:
            raise found.skip()

    async def _send(self, request: Request, oracle: Oracle | None, in_process: bool) -> Completion:
        """Debit the ledger, send, and settle the debit to the answer's usage (or release / abandon it)."""
        ticket = self._reserve(request)
        try:
            with watching(self.ledger, ticket):  # each attempt the API sees is counted (retries too)
                if in_process:
                    completion = await self.backend.complete(request, oracle)  # type: ignore[call-arg]
                else:
                    completion = await self.backend.complete(request)
        except BudgetRefused as exc:  # a retry the budget no longer covers: the test ends skipped
            raise BudgetStopped(str(exc)) from None
        except Exception:  # sent, not answered: a failed request, nothing billed
            if ticket is not None and self.ledger is not None:
                self.ledger.release(ticket, failed=True)
            raise
        except BaseException:  # abandoned in flight (cancelled, interrupted): its estimate stays spent
            if ticket is not None and self.ledger is not None:
                self.ledger.abandon(ticket)
            raise
        if ticket is not None and self.ledger is not None:
            settle(self.ledger, ticket, completion)
        return completion

    def _reserve(self, request: Request) -> Ticket | None:
        """Debit the ledger before sending (None without one); a refusal by the budget ends the test skipped."""
        if self.ledger is None:
            return None
        tokens = 0
        if self.ledger.budgeted():  # the estimate matters only against a budget: no tokenizing otherwise
            text = request.text()
            tokens = self.backend.count_tokens(text)
        try:
            return self.ledger.reserve(self.spec, tokens, request.max_tokens, cache_write=bool(request.cache_prefix))
        except BudgetRefused as exc:
            raise BudgetStopped(str(exc)) from None

    def _plan_entry(self, request: Request, key: str, cached: bool, scope: Scope | None = None) -> dict[str, Any]:
        counts = self.plan_counts
        exact = getattr(self.backend, "count_request", None) if counts else None
        tokens = exact(request) if exact is not None else None
        split = request.split_prefix()
        group, prefix_tokens = None, 0
        if split is not None:
            group = prefix_identity(request.system, split[0])
            prefix_tokens = self._prefix_tokens(group, split[0]) if counts else 0
        if tokens is None and counts:  # an estimate: the prompt's text under the backend's counter (prefix once)
            rest = split[1] + "".join(m.content for m in request.messages[1:]) if split is not None else (
                "".join(m.content for m in request.messages))
            tokens = prefix_tokens + self.backend.count_tokens((request.system or "") + rest + (request.prefill or ""))
        entry = {"key": key, "model": self.spec, "template": request.template, "cached": cached,
                 "input_tokens": tokens, "max_tokens": request.max_tokens,
                 "tokenizer": self.backend.tokenizer if counts else "not counted"}
        if group is not None:  # for the plan's prompt-cache estimate: which cache entry, and how long its prefix is
            entry.update(prefix=group, prefix_tokens=prefix_tokens)
        if self.plan_out is not None and not cached:
            # whose request it is: "test" (the batch rounds' sample groups) and ``scope`` (prefetch drops it once
            # every alarm covering it is settled)
            test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
            owner = {"experiment": scope[0], "params": scope[1]} if scope is not None else {}
            append_line(self.plan_out, json.dumps({**entry, **owner, "request": request.to_json(), "test": test},
                                                  ensure_ascii=False))
        return entry

    def _prefix_tokens(self, group: str, prefix: str) -> int:
        """Tokens of a shared prefix, counted once per prefix (its siblings share it: 8 prompt variants in qa)."""
        if group not in self._prefix_counts:
            if len(self._prefix_counts) >= _MAX_PREFIXES:
                self._prefix_counts.clear()
            self._prefix_counts[group] = self.backend.count_tokens(prefix)
        return self._prefix_counts[group]


def append_line(path: Path, line: str) -> None:
    """Append one line under an exclusive lock, so parallel writers never interleave."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.write(line + "\n")
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
