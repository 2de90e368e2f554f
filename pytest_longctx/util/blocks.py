"""Balanced incomplete blocks: each item in ``k`` of the groups, every group filled to ``per_group`` items.

A toolkit for experiment designs that spend trials on items (litm's numbers of documents, docs' context sizes):
items come in a given (seeded) order; each joins the ``k`` least filled groups, ties broken by how often a group was
already together with those chosen (so pairs of groups are balanced), then by the groups' order. When the items run
out before every group is full, later passes give an item a further group (never one it holds). Deterministic: the
same order, groups and sizes give the same blocks on every xdist worker.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import TypeVar

from pytest_longctx.errors import UsageError

#: An experiment's design option values: items in a balanced subset of the cells, or every item in every cell.
DESIGNS = ("blocks", "full")

G = TypeVar("G", bound=Hashable)
T = TypeVar("T", bound=Hashable)


def balanced_blocks(order: Sequence[T], groups: Sequence[G], per_group: int, k: int,
                    ) -> tuple[dict[G, list[T]], list[T]]:
    """``group -> items`` (in the order they joined) and the items in the order they were first placed."""
    k = max(1, min(k, len(groups)))
    rank = {g: i for i, g in enumerate(groups)}
    blocks: dict[G, list[T]] = {g: [] for g in groups}
    held: dict[T, set[G]] = {}
    placed: list[T] = []
    together: Counter[tuple[int, int]] = Counter()
    while order and groups and any(len(blocks[g]) < per_group for g in groups):
        before = sum(map(len, blocks.values()))
        for item in order:
            if all(len(blocks[g]) >= per_group for g in groups):
                break
            mine = held.setdefault(item, set())
            open_groups = [g for g in groups if len(blocks[g]) < per_group and g not in mine]
            chosen: list[G] = []
            for _ in range(min(k, len(open_groups))):
                best = min((g for g in open_groups if g not in chosen),
                           key=lambda g: (len(blocks[g]), sum(together[_pair(rank[g], rank[c])] for c in chosen),
                                          rank[g]))
                chosen.append(best)
            for i, a in enumerate(chosen):
                blocks[a].append(item)
                mine.add(a)
                together.update(_pair(rank[a], rank[b]) for b in chosen[i + 1:])
            if chosen and len(mine) == len(chosen):
                placed.append(item)
        if sum(map(len, blocks.values())) == before:
            break  # every item already holds every open group
    return blocks, placed


def _pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def design_help(cells: str, blocks: str, item: str) -> str:
    """The help text of an experiment's ``--longctx-X-design``: which ``cells`` ask which items, what its
    blocks design does, and the default :func:`resolve_design` picks."""
    return (f"{cells} ask which {item}s: blocks ({blocks}) or full (every {item} in every cell) (default: blocks for "
            "a remote model under the longctx protocol, else full)")


def resolve_design(flag: str, given: object, *, remote: bool, protocol: str, samples_all: bool, source: str,
                   item: str) -> str:
    """An experiment's ``flag`` (``--longctx-X-design``): ``blocks`` by default for a remote model under the longctx
    protocol (not with ``--longctx-samples all``: every ``item`` in every cell), else ``full``; ``blocks`` under the
    source protocol (which keeps ``source``, e.g. "the paper's full design") or with samples all is a usage error."""
    if given is None:
        return "blocks" if remote and protocol == "longctx" and not samples_all else "full"
    design = str(given).strip().lower()
    if design not in DESIGNS:
        raise UsageError(f"{flag}: expected blocks or full, got {given!r}")
    if design == "blocks" and protocol == "source":
        raise UsageError(f"{flag} blocks: the source protocol keeps {source}; drop it or use "
                         "--longctx-protocol longctx")
    if design == "blocks" and samples_all:
        raise UsageError(f"{flag} blocks: --longctx-samples all asks every {item} in every cell; drop one")
    return design
