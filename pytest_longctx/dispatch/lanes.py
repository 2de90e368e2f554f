"""The prefetch lanes' queue: plan order, except that a prompt-cache prefix is warmed before its siblings go out.

Requests that mark the same shared prefix (``Request.cache_prefix``, see ``backends.prompt_cache``) form a
group. The first of a group goes out in plan order; its siblings wait until it has been answered (its answer
wrote the prefix to the provider's prompt cache), then go out ahead of everything not yet started, so they
read the entry while it lives. Meanwhile the lanes keep sending other groups' first requests and requests
that mark no prefix. Siblings sent together before the cache is warm would all miss (and all pay the write).

With a window (``--longctx-sequential``: ``inside(planned)``, :meth:`.policy.StopPolicy.inside`), a lane takes only
an entry it may send now, never one it would then sit on: the first inside the window, released siblings before the
rest. A request a test is waiting for (``wanted``: its key; for a held sibling, its group's first) goes out whatever
the window says, so no test waits on a request the window keeps back.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from pytest_longctx.backends.prompt_cache import prefix_group
from pytest_longctx.dispatch.policy import PlannedRequest

#: ``planned -> whether it may go out now`` (the sequential gate's window, :meth:`.policy.StopPolicy.inside`).
Inside = Callable[[PlannedRequest], bool]
#: How often the dispatcher looks whether the window moved or a test waits (both change on other threads).
POLL_S = 0.01


def _group(entry: PlannedRequest) -> str | None:
    """The entry's prefix group: as the plan entry names it (``prefix``), else computed from its request."""
    return entry.prefix or prefix_group(entry.request)


@dataclass(order=True)
class _Ready:
    """A ready entry in a heap: by its line in the plan, then by when it was queued; ``live`` until a lane takes it."""

    line: int
    tie: int
    entry: PlannedRequest = field(compare=False)
    live: bool = field(default=True, compare=False)


class LaneQueue:
    """What the dispatcher's lanes take, one entry at a time; :meth:`get` returns None once everything is done.

    ``offer`` a planned request as the plan yields it (queued by its line in the plan), call :meth:`done` when a
    lane has finished one (answered or failed), and :meth:`end_of_input` once no more entries will be offered.
    """

    def __init__(self, lanes: int) -> None:
        self._lanes = max(1, lanes)
        self._counter = itertools.count()
        #: ready entries: released siblings, and the rest in plan order (heaps)
        self._released: list[_Ready] = []
        self._queued: list[_Ready] = []
        self._by_key: dict[str, _Ready] = {}
        #: group -> siblings held until its first request is answered; a group absent here is warm (or unseen)
        self._held: dict[str, list[PlannedRequest]] = {}
        self._first: dict[str, str] = {}  # group -> its first request's key
        self._held_group: dict[str, str] = {}  # a held sibling's key -> its group
        self._warm: set[str] = set()
        self._ended = False
        self._closed = False
        self._changed: asyncio.Event | None = None

    def offer(self, entry: PlannedRequest) -> None:
        """Queue ``entry`` in plan order (its line in the plan), or hold it while its group's first request is on
        its way."""
        group = _group(entry)
        if group is not None and group not in self._warm and group in self._held:
            self._held[group].append(entry)
            self._held_group[entry.key] = group
        else:
            if group is not None and group not in self._warm:  # the first of its group: it warms the cache
                self._held[group] = []
                self._first[group] = entry.key
            self._put(self._queued, entry)

    def done(self, entry: PlannedRequest) -> None:
        """A lane finished ``entry``: if it led a group, its siblings go out next (answered or not, it is over)."""
        group = _group(entry)
        if group is not None and group not in self._warm and group in self._held:
            self._warm.add(group)
            for sibling in self._held.pop(group):
                self._held_group.pop(sibling.key, None)
                self._put(self._released, sibling)
        self._wake()

    def end_of_input(self) -> None:
        """No more entries will be offered: the lanes end once the held ones have gone out too."""
        self._ended = True
        self._wake()

    def close(self) -> None:
        """Nothing more goes out (a stop): waiting lanes end; what is still queued or held stays unsent."""
        self._closed = True
        self._wake()

    @property
    def held(self) -> int:
        """Entries waiting for their group's first request."""
        return sum(len(v) for v in self._held.values())

    def holds(self, key: str) -> bool:
        """Whether ``key`` is still to go out (ready or held)."""
        return key in self._by_key or key in self._held_group

    def nudge(self, inside: Inside | None = None, wanted: Collection[str] = ()) -> None:
        """Something outside changed (the window moved, a test waits): waiting lanes look again if there is now
        something for them."""
        if self._find(inside, wanted) is not None:
            self._wake()

    async def get(self, inside: Inside | None = None, wanted: Callable[[], Collection[str]] | None = None,
                  ) -> PlannedRequest | None:
        """The next entry a lane may send now; None once everything offered has gone out. With a window, someone
        must :meth:`nudge` the waiting lanes when it moves."""
        while True:
            if self._closed:
                return None
            item = self._find(inside, wanted() if wanted is not None else ())
            if item is not None:
                return self._pop(item)
            if self._ended and not self._held and not self._by_key:
                return None
            changed = self._event()
            changed.clear()
            await changed.wait()

    def _find(self, inside: Inside | None, wanted: Collection[str]) -> _Ready | None:
        for key in sorted(wanted):  # a test waits for it: now, whatever the window
            item = self._by_key.get(key) or self._by_key.get(self._first.get(self._held_group.get(key, ""), ""))
            if item is not None:
                return item
        for heap in (self._released, self._queued):
            while heap and not heap[0].live:
                heapq.heappop(heap)
            if heap and (inside is None or inside(heap[0].entry)):
                return heap[0]
        return None

    def _put(self, heap: list[_Ready], entry: PlannedRequest) -> None:
        item = _Ready(entry.line, next(self._counter), entry)
        self._by_key.setdefault(entry.key, item)
        heapq.heappush(heap, item)
        self._wake()

    def _pop(self, item: _Ready) -> PlannedRequest:
        item.live = False
        entry = item.entry
        if self._by_key.get(entry.key) is item:
            del self._by_key[entry.key]
        return entry

    def _event(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
