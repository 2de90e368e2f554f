"""Units of evidence: which trials share a fate (a cluster), and an experiment's context-length axis.

An experiment declares them through the ``pytest_longctx_evidence`` hook (see ``hookspecs.py``); an experiment
that declares nothing has each trial as its own cluster. The controller stamps every trial record with its
``cluster`` before anything is pooled, compared or gated.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: ``Evidence.cluster`` values besides ``detail.<key>``.
BY_ITEM, BY_TRIAL = "item", "trial"
#: Between an experiment's name and its cluster's (run records of schema version 3 on; see ``namespaced``).
NAMESPACE_SEP = "|"


@dataclass(frozen=True)
class LengthAxis:
    """How long a cell's contexts are: the cell parameter that sets it, and where a trial's token count is.

    ``tokens``: the ``detail`` key holding a trial's context tokens (None: the parameter is itself in tokens).
    ``where``: only cells whose params match these globs are on the axis (e.g. ``{"arm": "long-context"}``);
    ``exclude``: cells whose params match these globs are not (e.g. baselines: ``{"documents": "[01]"}``).
    """

    param: str
    tokens: str | None = None
    where: Mapping[str, str] = field(default_factory=dict)
    exclude: Mapping[str, str] = field(default_factory=dict)

    def covers(self, params: Mapping[str, Any]) -> bool:
        if self.param not in params:
            return False
        if any(key in params and fnmatch.fnmatchcase(_text(params[key]), pattern)
               for key, pattern in self.exclude.items()):
            return False
        return all(key in params and fnmatch.fnmatchcase(_text(params[key]), pattern)
                   for key, pattern in self.where.items())


@dataclass(frozen=True)
class Evidence:
    """One experiment's units of evidence.

    ``cluster``: ``"item"`` (trials that record the same ``item`` share its fate: a question asked in every
    cell), ``"trial"`` (each trial alone), or ``"detail.<key>"`` (a coarser unit the trial records, e.g. the
    document a QA item was written from). ``unit`` names a cluster in reports ("question", "file");
    ``why`` says in one sentence why trials group so. ``length``: the experiment's context-length axis.
    """

    experiment: str
    cluster: str = BY_ITEM
    unit: str = "item"
    why: str = ""
    length: LengthAxis | None = None

    def __post_init__(self) -> None:
        if self.cluster not in (BY_ITEM, BY_TRIAL) and not self.cluster.startswith("detail."):
            raise ValueError(f"Evidence({self.experiment!r}): cluster must be 'item', 'trial' or 'detail.<key>', "
                             f"not {self.cluster!r}")


DEFAULT = Evidence("*", BY_TRIAL, "trial", "the experiment declares no unit of evidence: each trial counts alone")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def by_experiment(declared: Iterable[Evidence]) -> dict[str, Evidence]:
    """The declarations by experiment name (the first declaration of a name wins)."""
    out: dict[str, Evidence] = {}
    for evidence in declared:
        out.setdefault(evidence.experiment, evidence)
    return out


def namespaced(experiment: str, cluster: str) -> str:
    """A cluster name under its experiment (``qa|q7``): two experiments' items that share an id stay apart
    when a ``*`` threshold pools them."""
    return f"{experiment}{NAMESPACE_SEP}{cluster}"


def cluster_of(trial: Mapping[str, Any], evidence: Evidence) -> str:
    """The cluster a trial record belongs to, namespaced by its experiment; a trial without the declared field is
    its own cluster."""
    own = f"trial:{trial.get('nodeid') or trial['experiment']}#{trial.get('sample')}"
    name = own
    if evidence.cluster == BY_ITEM:
        item = trial.get("item")
        name = own if item is None else f"{_text(item)}"
    elif evidence.cluster.startswith("detail."):
        value = (trial.get("detail") or {}).get(evidence.cluster[len("detail."):])
        name = own if value is None else f"{evidence.cluster[len('detail.'):]}:{_text(value)}"
    return namespaced(str(trial["experiment"]), name)


def assign_clusters(trials: Sequence[dict[str, Any]], declared: Mapping[str, Evidence]) -> None:
    """Stamp every trial record with its ``cluster`` (in place)."""
    for trial in trials:
        trial["cluster"] = cluster_of(trial, declared.get(trial["experiment"], DEFAULT))


def describe(declared: Mapping[str, Evidence], trials: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per experiment present in ``trials``: how its clusters are formed and how many it has (for the record)."""
    seen: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for trial in trials:
        seen.setdefault(trial["experiment"], set()).add(str(trial.get("cluster")))
        counts[trial["experiment"]] = counts.get(trial["experiment"], 0) + 1
    out = {}
    for experiment in sorted(seen):
        evidence = declared.get(experiment, DEFAULT)
        out[experiment] = {"cluster": evidence.cluster, "unit": evidence.unit, "why": evidence.why,
                           "declared": experiment in declared, "clusters": len(seen[experiment]),
                           "trials": counts[experiment],
                           "length": None if evidence.length is None else {
                               "param": evidence.length.param, "tokens": evidence.length.tokens,
                               "where": dict(evidence.length.where), "exclude": dict(evidence.length.exclude)}}
    return out


def declared_in(record: Mapping[str, Any]) -> dict[str, Evidence]:
    """The declarations a run record's ``evidence`` holds (those its experiments declared), for deciding from it."""
    out: dict[str, Evidence] = {}
    for experiment, entry in sorted((record.get("evidence") or {}).items()):
        if not isinstance(entry, dict) or not entry.get("declared"):
            continue
        length = entry.get("length")
        axis = None if not isinstance(length, dict) else LengthAxis(
            str(length["param"]), length.get("tokens"), dict(length.get("where") or {}),
            dict(length.get("exclude") or {}))
        out[experiment] = Evidence(experiment, str(entry.get("cluster", BY_ITEM)), str(entry.get("unit", "item")),
                                   str(entry.get("why", "")), axis)
    return out
