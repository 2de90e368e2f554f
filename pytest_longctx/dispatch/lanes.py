"""The prefetch lanes' queue: plan order, except that a prompt-cache prefix is warmed before its siblings go out.

Requests that mark the same shared prefix (``Request.cache_prefix``, see ``backends.prompt_cache``) form a
group. The first of a group goes out in plan order; its siblings wait until it has been answered (its answer
wrote the prefix to the provider's prompt cache), then go out ahead of everything not yet started, so they
read the entry while it lives. Meanwhile the lanes keep sending other groups' first requests and requests
that mark no prefix. Siblings sent together before the cache is warm would all miss (and all pay the write).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from pytest_longctx.backends.prompt_cache import prefix_group

Entry = dict[str, Any]


def _group(entry: Entry) -> str | None:
    """The entry's prefix group: as the plan entry names it (``prefix``), else computed from its request."""
    named = entry.get("prefix")
    return str(named) if named else prefix_group(entry.get("request") or {})


class LaneQueue:
    """What the dispatcher's lanes take, one entry at a time; :meth:`get` returns None once everything is done.

    ``offer`` an entry as the plan yields it, call :meth:`done` when a lane has finished one (answered or
    failed), and :meth:`end_of_input` once no more entries will be offered.
    """

    def __init__(self, lanes: int) -> None:
        self._lanes = max(1, lanes)
        self._queue: asyncio.PriorityQueue[tuple[int, int, Entry | None]] = asyncio.PriorityQueue()
        self._order = itertools.count()
        #: group -> siblings held until its first request is answered; a group absent here is warm (or unseen)
        self._held: dict[str, list[Entry]] = {}
        self._warm: set[str] = set()
        self._ended = False
        self._closed = False

    def offer(self, entry: Entry) -> None:
        """Queue ``entry`` in plan order, or hold it while its group's first request is on its way."""
        group = _group(entry)
        if group is None or group in self._warm:
            self._put(1, entry)
        elif group in self._held:
            self._held[group].append(entry)
        else:  # the first of its group: it warms the cache, the rest wait for it
            self._held[group] = []
            self._put(1, entry)

    def done(self, entry: Entry) -> None:
        """A lane finished ``entry``: if it led a group, its siblings go out next (answered or not, it is over)."""
        group = _group(entry)
        if group is not None and group not in self._warm and group in self._held:
            self._warm.add(group)
            for sibling in self._held.pop(group):
                self._put(0, sibling)
        self._maybe_close()

    def end_of_input(self) -> None:
        """No more entries will be offered: the lanes end once the held ones have gone out too."""
        self._ended = True
        self._maybe_close()

    @property
    def held(self) -> int:
        """Entries waiting for their group's first request."""
        return sum(len(v) for v in self._held.values())

    async def get(self) -> Entry | None:
        return (await self._queue.get())[2]

    def _put(self, priority: int, entry: Entry | None) -> None:
        self._queue.put_nowait((priority, next(self._order), entry))

    def _maybe_close(self) -> None:
        if self._ended and not self._held and not self._closed:
            self._closed = True
            for _ in range(self._lanes):
                self._put(2, None)
