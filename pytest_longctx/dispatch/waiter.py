"""Worker side of prefetch: a test whose request was planned waits for the controller's answer in the cache.

The controller's dispatcher (:mod:`~pytest_longctx.dispatch.prefetch`) or batch rounds send the planned requests;
the files they share with the waiting tests are in :mod:`~pytest_longctx.dispatch.workdir`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pytest_longctx.backends.base import Completion
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.policy import Settling, Trial
from pytest_longctx.dispatch.skips import RunStopped
from pytest_longctx.dispatch.workdir import error_path, kept_path, sent_path, stopped_path, waiting_test
from pytest_longctx.errors import BackendError, FatalBackendError


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

    async def wait(self, key: str, trial: Trial | None = None, alarms: Settling | None = None) -> Completion:
        """The answer the controller sends for ``key``. Once every sequential alarm covering ``trial`` is settled
        (``alarms``), the test ends skipped: an answer already received is used, one not yet received is not
        waited for.

        A test that has to wait says so (``wanted/<key>``), so the dispatcher sends that request next whatever its
        window; a request nothing will deliver ends as an error naming it (never a silent wait)."""
        marker: list[Path] = []
        try:
            return await self._wait(key, trial if alarms is not None else None, alarms, marker)
        finally:
            for path in marker:
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)

    async def _wait(self, key: str, trial: Trial | None, alarms: Settling | None, marker: list[Path]) -> Completion:
        deadline = time.monotonic() + self.timeout_s
        delay = 0.005
        while time.monotonic() < deadline:
            answer = self._answer(key)
            if answer is not None:
                return answer
            if trial is not None and alarms is not None and (settled := alarms.settled(trial)) is not None:
                raise settled.skip()
            done = self.work / "done"
            if done.exists() and self.cache.get(key) is None and not error_path(self.work, key).exists():
                why = done.read_text(encoding="utf-8").strip()
                raise BackendError(f"prefetch: finished without an answer for request {key[:12]}"
                                   f"{f' (the dispatcher failed: {why})' if why else ''}{waiting_test()}")
            if not marker:  # the dispatcher sends what a test waits for first, whatever its window says
                marker.append(self._announce(key))
            await asyncio.sleep(delay)
            delay = min(0.05, delay * 1.5)
        raise BackendError(f"prefetch: no answer for request {key[:12]} within {self.timeout_s:.0f}s"
                           f"{waiting_test()}")

    def _answer(self, key: str) -> Completion | None:
        """The answer if it is there (cached, or kept in the work folder); raise the request's error or the stop."""
        hit = self.cache.get(key)
        if hit is not None:  # sent by the controller in this run, or already cached before it
            return Completion.from_json(hit, cache_hit=not sent_path(self.work, key).exists())
        kept = kept_path(self.work, key)
        if kept.exists():  # received, but the cache could not store it: this run uses it all the same
            if not self._warned:
                self._warned = True
                warnings.warn(f"longctx cache: cannot store answers in {self.cache.root}; this run keeps them, "
                              "a re-run will send them again", stacklevel=3)
            return Completion.from_json(json.loads(kept.read_text(encoding="utf-8")))
        err = error_path(self.work, key)
        stopped = stopped_path(self.work)
        if stopped.exists() and not err.exists():
            raise RunStopped(stopped.read_text(encoding="utf-8").strip() or "stopped")
        if err.exists():
            info = json.loads(err.read_text(encoding="utf-8"))
            cls = FatalBackendError if info.get("fatal") else BackendError
            raise cls(info["error"])
        return None

    def _announce(self, key: str) -> Path:
        path = self.work / "wanted" / f"{key}.{os.getpid()}.{next(self._seq)}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        except OSError as exc:  # the dispatcher could not learn what this test waits for: say so, do not hang
            raise BackendError(f"prefetch: cannot tell the dispatcher that a test waits for request {key[:12]} "
                               f"({exc.strerror or exc}){waiting_test()}") from None
        return path
