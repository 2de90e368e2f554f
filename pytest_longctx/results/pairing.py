"""Pairing the trials of two runs on items, so a comparison never mixes different questions.

Two trials pair when they are in the same cell and asked the same item (its k-th asking in that cell, in sample
order, pairs with the other run's k-th). Sample indexes do not matter: a model whose own baseline filter drops a
question asks the next ones at other indexes, and they still pair. A trial that records no item pairs by sample
index; so does every trial of a schema-1 record (its items were not identities), and only where both asked the
same item. Every trial that did not pair is counted with its reason; an errored trial that failed before recording
its item is "errored in this run" (or "in the compared run"), never "not asked".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.results.aggregate import CellKeys

#: Reasons a trial did not pair (keys of ``Pairing.unpaired_here`` and ``unpaired_there``).
ERROR_HERE = "errored in this run"
ERROR_THERE = "errored in the compared run"
NO_CELL = "its cell is not in the other run"
NOT_ASKED = "its item was not asked in that cell of the other run"
OTHER_ITEM = "the other run asked another item at this sample (no item recorded, or a schema-1 record)"

Trial = Mapping[str, Any]


@dataclass
class Pairing:
    """The matched trials of this run (``now``) and the compared run (``before``), and what did not match.

    ``pairs`` holds ``(cell key, this run's trial, the compared run's trial)``.
    """

    pairs: list[tuple[str, Trial, Trial]] = field(default_factory=list)
    by: str = "item"
    unpaired_here: Counter[str] = field(default_factory=Counter)
    unpaired_there: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        return {"by": self.by, "paired": len(self.pairs),
                "unpaired_here": dict(sorted(self.unpaired_here.items())),
                "unpaired_there": dict(sorted(self.unpaired_there.items()))}


def _keys(trials: Sequence[Trial], by_item: bool) -> dict[tuple[str, str], Trial]:
    """Each trial under its pairing key: (cell, item#k) or (cell, sample)."""
    seen: Counter[tuple[str, str]] = Counter()
    out: dict[tuple[str, str], Trial] = {}
    keys = CellKeys()
    for trial in sorted(trials, key=lambda t: (t["sample"], str(t.get("nodeid", "")))):
        cell = keys(trial["experiment"], trial["params"])
        item = trial.get("item")
        if not by_item or item is None:
            out[(cell, f"sample {trial['sample']}")] = trial
            continue
        occurrence = seen[(cell, str(item))]
        seen[(cell, str(item))] += 1
        out[(cell, f"item {item!s}#{occurrence}")] = trial
    return out


def _asked(trial: Trial) -> tuple[Any, Any]:
    return trial.get("item"), trial.get("expected")


def pair_runs(now: Sequence[Trial], before: Sequence[Trial], *, by_item: bool = True) -> Pairing:
    """Match ``now`` with ``before`` (see the module docstring); ``by_item=False`` for schema-1 records."""
    result = Pairing(by="item" if by_item else "sample")
    here, there = _keys(now, by_item), _keys(before, by_item)
    cells_here = {k[0] for k in here}
    cells_there = {k[0] for k in there}
    unrecorded: Counter[str] = Counter()  # per cell: this run's errors that failed before recording their item
    for key, trial in here.items():
        other = there.get(key)
        if by_item and trial["outcome"] == "error" and trial.get("item") is None:
            result.unpaired_here[ERROR_HERE] += 1  # it errored before saying what it asked: it pairs with nothing
            unrecorded[key[0]] += 1
        elif other is None:
            result.unpaired_here[NO_CELL if key[0] not in cells_there else NOT_ASKED] += 1
        elif trial["outcome"] == "error":
            result.unpaired_here[ERROR_HERE] += 1
        elif other["outcome"] == "error":
            result.unpaired_here[ERROR_THERE] += 1
        elif key[1].startswith("sample ") and _asked(other) != _asked(trial):  # paired by index: same item?
            result.unpaired_here[OTHER_ITEM] += 1
        else:
            result.pairs.append((key[0], trial, other))
    for key in sorted(there.keys() - here.keys()):
        if unrecorded[key[0]] > 0 and there[key]["outcome"] != "error":  # the item this run's error would have asked
            unrecorded[key[0]] -= 1
            result.unpaired_there[ERROR_HERE] += 1
        elif there[key]["outcome"] == "error":
            result.unpaired_there[ERROR_THERE] += 1
        else:
            result.unpaired_there[NO_CELL if key[0] not in cells_here else NOT_ASKED] += 1
    result.pairs.sort(key=lambda p: (p[0], p[1]["sample"]))
    return result


def cluster_disagreement(pairing: Pairing) -> str | None:
    """Where the two runs group their paired trials into different clusters, in one line (None: they agree).

    A cluster is an independent unit of evidence: the paired test counts the clusters of this run's trials, so the
    compared run's must group the same trials alike (one cluster of one run is one cluster of the other; the labels
    themselves may differ). Finer labels on one side would count more independent items than there are.
    """
    if pairing.by != "item":
        return None  # a schema-1 record's trials carry no clusters: each counted alone
    ours: dict[str, tuple[str, Trial]] = {}
    theirs: dict[str, tuple[str, Trial]] = {}
    for _, now, before in pairing.pairs:
        a, b = str(now.get("cluster")), str(before.get("cluster"))
        for mine, other, label, side, trial in ((ours, b, a, "this run", now), (theirs, a, b, "the compared run",
                                                                              before)):
            seen = mine.setdefault(label, (other, trial))
            if seen[0] != other:
                first = seen[1]
                return (f"cluster {label!r} of {side} holds trials the other run puts in clusters {seen[0]!r} "
                        f"and {other!r} (item {trial.get('item')!r} at sample {trial['sample']} and item "
                        f"{first.get('item')!r} at sample {first['sample']} of {trial['experiment']}): the two "
                        "records count independent items differently; compare records written with the same "
                        "evidence declarations")
    return None
