"""Item order for the sequential gate: every cell of one sample index (one item of each experiment) runs together.

Sample ``i`` asks the experiments' ``i``-th item in every cell, and the experiments draw that item order from the
run's seed, so running sample by sample is running item by item in a seeded random order. Sample order itself is
kept (0, 1, 2, ...), so a re-run with more samples continues the same sequence: its first items are the earlier
run's, answered from the cache. The sort is stable and reads only the collected items, so every xdist worker and
the prefetch plan child collect the same order; with ``--dist load`` (xdist's default) workers take tests in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

#: The sample parameter's id ends a longctx test's id (the plugin parametrizes it last): ``test_x[...-s12]``.
_SAMPLE_ID = re.compile(r"[\[-]s(\d+)\]$")


def sample_of_nodeid(nodeid: str) -> int | None:
    """The sample index in a test's node id, None for a test without one."""
    found = _SAMPLE_ID.search(nodeid)
    return int(found.group(1)) if found else None


def _sample_of(item: Any, name: str) -> int | None:
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get(name) if callspec is not None else None
    return value if isinstance(value, int) else None


def by_sample(items: Sequence[Any], sample_arg: str) -> list[Any]:
    """``items`` with every test that has a sample index after those without, grouped by sample index (stable)."""
    keyed = [(_sample_of(item, sample_arg), i, item) for i, item in enumerate(items)]
    keyed.sort(key=lambda k: (-1 if k[0] is None else k[0], k[1]))
    return [item for _, _, item in keyed]


def group_sizes(nodeids: Iterable[str]) -> dict[int, int]:
    """Tests per sample index (the groups the sequential gate looks after)."""
    sizes: dict[int, int] = {}
    for nodeid in nodeids:
        sample = sample_of_nodeid(nodeid)
        if sample is not None:
            sizes[sample] = sizes.get(sample, 0) + 1
    return dict(sorted(sizes.items()))


def group_starts(sizes: dict[int, int]) -> dict[int, int]:
    """The index of each sample group's first test in the run's order (groups in sample order, as collected)."""
    starts: dict[int, int] = {}
    at = 0
    for sample, size in sizes.items():
        starts[sample] = at
        at += size
    return starts


def place(test: str, line: int, starts: dict[int, int]) -> int:
    """Where a planned request's ``test`` runs, at the latest: its sample group's first test index (``starts``),
    else its ``line`` in the plan (the plan runs the tests in the run's order, one line a test at most).

    Never after the test's own index, so the lowest test not yet reported is always placed before the count of
    reported tests."""
    sample = sample_of_nodeid(test) if starts else None
    return starts.get(sample, line) if sample is not None else line
