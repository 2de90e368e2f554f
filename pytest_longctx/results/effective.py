"""Effective context length (after RULER): the longest tested context at which accuracy stays at or above a
threshold, with a cluster-bootstrap interval.

Accuracy is pooled over every cell at one length (e.g. all shuffle modes of one LRT size). The effective length
is the longest length L such that every tested length up to L reaches the threshold; 0 when even the shortest
does not. Its 95% interval resamples clusters (items) with replacement, so trials that share an item move
together; every draw comes from ``numpy.random.default_rng(seed)``.

Beside RULER's absolute bar, the relative one (NoLiMa): the longest length keeping at least 85% of the model's own
shortest-length accuracy. A length is measured in tokens (the trials' own counts); where the cell parameter is a
nominal token count (``context_tokens=128000``), a question about a length between the measured and the nominal
count, or beyond the longest tested length when every length passed, cannot be decided (:meth:`undecided`).
Two runs' effective lengths are compared on the items both asked (:func:`paired_difference`).

The alarm ``min-effective-length=T`` (:meth:`EffectiveLength.p_below`) is not a bootstrap p of "the longest length
that passes", which does not hold its level near the bar (22% false alarms with every length at 0.86 against 0.85,
issue 38.4). The effective length is below T exactly when some tested length at or below T is below the bar; so
the alarm tests, at each such length, "its accuracy is at least the bar" by the clustered one-sided test the
``min=A`` alarm uses (:mod:`~pytest_longctx.results.robust`, items as clusters), and takes Holm's adjusted smallest
p across them (Holm's first step: ``k`` times the smallest of ``k`` p's), so it fires wrongly at most alpha of the
time when every length truly reaches the bar, whatever the lengths' correlation (``benchmarks/sim_effective.py``).
``min-effective-length=T/shown`` reads the same per-length tests as a lower bound (:meth:`EffectiveLength.shown`):
the longest length up to which every tested length is shown at the bar, monotone by construction (a bootstrap
quantile was not: one more wrong answer could lift it); the bootstrap interval stays what the report prints.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.results.evidence import DEFAULT, Evidence, LengthAxis

#: NoLiMa's relative bar: the share of the model's own shortest-length accuracy a length must keep.
RELATIVE_SHARE = 0.85
REPLICATES = 2000
_CHUNK = 250


@dataclass(frozen=True)
class Level:
    """One tested length: its parameter value, mean context tokens, pooled accuracy and counts."""

    value: Any
    tokens: int
    accuracy: float
    n: int
    clusters: int
    #: the parameter's own token count when it is one (``context_tokens=128000``), else None
    nominal: int | None = None


@dataclass(frozen=True)
class EffectiveLength:
    """The effective length in tokens (0: below the shortest tested length) and its bootstrap distribution."""

    threshold: float
    tokens: int
    levels: tuple[Level, ...]
    boot: tuple[int, ...]
    param: str
    #: NoLiMa's relative effective length (its ``threshold``: the share of the shortest length's accuracy)
    relative: EffectiveLength | None = None
    share: float | None = None
    #: per tested length, the clustered one-sided p of "its accuracy is at least the bar" (None: the relative bar)
    p_levels: tuple[float, ...] | None = None
    #: per tested length, its pooled accuracy's rows (:class:`~pytest_longctx.results.robust.PooledRows`; None: one
    #: item), for the ``/shown`` lower bound (None: the relative bar)
    level_rows: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def at_least(self) -> bool:
        """Every tested length reached the threshold: the model may do as well on longer contexts."""
        return bool(self.levels) and self.tokens == self.levels[-1].tokens

    def reach(self, tokens: int) -> float:
        """How long a context an effective length of ``tokens`` may stand for: the tested length's nominal count
        when it is above its measured one; without end for the longest tested length (nothing longer failed)."""
        for i, lv in enumerate(self.levels):
            if lv.tokens == tokens and tokens > 0:
                return math.inf if i == len(self.levels) - 1 else float(max(lv.tokens, lv.nominal or 0))
        return float(tokens)

    def undecided(self, tokens: float) -> str | None:
        """Why the run cannot say whether the effective length is at least ``tokens`` (None when it can)."""
        if self.tokens >= tokens or self.reach(self.tokens) < tokens:
            return None
        level = next(lv for lv in self.levels if lv.tokens == self.tokens)
        if level.nominal is not None and level.tokens < tokens <= level.nominal:
            return (f"{tokens:,.0f} tokens lies between the measured ({level.tokens:,}) and the nominal "
                    f"({level.nominal:,}) length of the tested {self.param}={level.value}, which passed: the run "
                    f"cannot say; ask for at most {level.tokens:,} tokens or test a longer length")
        return (f"{tokens:,.0f} tokens is beyond the longest tested length ({level.tokens:,} tokens), which passed: "
                f"the run cannot say; test a length of at least {tokens:,.0f} tokens")

    def quantile(self, q: float) -> int:
        """The ``q`` quantile of the bootstrap distribution (an observed length, never interpolated)."""
        if not self.boot:
            return self.tokens
        ordered = sorted(self.boot)
        return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]

    def shown(self, alpha: float) -> int:
        """The one-sided ``1 - alpha`` lower bound of the effective length (what ``/shown`` reads): the longest tested
        length such that every tested length up to it is shown at the bar (its pooled one-sided ``1 - alpha`` lower
        bound reaches it); 0 when the shortest is not. It lies above the true effective length only when the first
        length truly under the bar is shown at it: at most ``alpha`` of the time, with no correction across lengths.
        Monotone by construction: a wrong answer never raises a length's bound (:mod:`~.envelope`), so never this.
        Without per-length rows (the relative bar): the bootstrap's ``alpha`` quantile."""
        if self.level_rows is None:
            return self.quantile(alpha)
        out = 0
        for lv, rows in zip(self.levels, self.level_rows, strict=True):
            if rows is None or float(rows.bounds(alpha)[0][0]) < self.threshold - 1e-12:
                break
            out = lv.tokens
        return out

    def interval(self, level: float = 0.95) -> tuple[int, int]:
        return self.quantile((1 - level) / 2), self.quantile(1 - (1 - level) / 2)

    def p_below(self, tokens: float) -> float:
        """One-sided p of 'the effective length is at least ``tokens``': Holm's adjusted smallest p of the tested
        lengths at or below ``tokens`` ("its accuracy reaches the bar", clustered one-sided tests); 1 when no tested
        length is that short. Without per-length tests (the relative bar), the bootstrap's: a draw counts against
        'below' when its length reaches ``tokens`` or may (see :meth:`reach`)."""
        if self.p_levels is not None:
            at_most = [p for lv, p in zip(self.levels, self.p_levels, strict=True) if lv.tokens <= tokens]
            return min(1.0, len(at_most) * min(at_most)) if at_most else 1.0
        reach = {b: self.reach(b) for b in set(self.boot)}
        return (1 + sum(1 for b in self.boot if b >= tokens or reach[b] >= tokens)) / (1 + len(self.boot))

    def to_json(self) -> dict[str, Any]:
        low, high = self.interval()
        out = {"tokens": self.tokens, "low": low, "high": high, "threshold": self.threshold, "param": self.param,
               "at_least": self.at_least, "below_shortest": self.tokens == 0 and bool(self.levels),
               "replicates": len(self.boot),
               "levels": [{"value": lv.value, "tokens": lv.tokens, "nominal": lv.nominal,
                           "accuracy": round(lv.accuracy, 6), "n": lv.n, "clusters": lv.clusters}
                          for lv in self.levels]}
        if self.relative is not None:
            r_low, r_high = self.relative.interval()
            out["relative"] = {"tokens": self.relative.tokens, "low": r_low, "high": r_high,
                               "share": self.relative.share, "threshold": round(self.relative.threshold, 6),
                               "at_least": self.relative.at_least,
                               "below_shortest": self.relative.tokens == 0 and bool(self.levels)}
        return out


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class _Table:
    """The scored trials on an axis as counts: right and asked per cluster (rows) and tested length (columns)."""

    keys: tuple[str, ...]  # the lengths' parameter values (canonical JSON), shortest first
    values: dict[str, Any]
    lengths: Any  # mean measured tokens per column
    nominal: dict[str, int | None]
    clusters: tuple[str, ...]
    right: Any
    asked: Any

    def levels(self) -> tuple[Level, ...]:
        return tuple(Level(self.values[k], int(self.lengths[j]), float(self.right[:, j].sum() / self.asked[:, j].sum()),
                           int(self.asked[:, j].sum()), int((self.asked[:, j] > 0).sum()), self.nominal[k])
                     for j, k in enumerate(self.keys))


def _nominal(axis: LengthAxis, value: Any) -> int | None:
    """The parameter's value as a token count, when the parameter is one (its name ends in ``tokens``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if axis.tokens is None or axis.param.endswith("tokens") else None


def _table(trials: Sequence[Mapping[str, Any]], axis: LengthAxis, keep: set[str] | None = None,
           columns: Sequence[str] | None = None) -> _Table | None:
    """The counts of the scored trials on ``axis`` (only clusters in ``keep``, lengths in ``columns`` if given)."""
    import numpy as np

    on_axis = [t for t in trials if t["outcome"] != "error" and axis.covers(t["params"])
               and (keep is None or str(t.get("cluster")) in keep)
               and (columns is None or _key(t["params"][axis.param]) in columns)]
    if not on_axis:
        return None
    values: dict[str, Any] = {}
    tokens: dict[str, list[float]] = {}
    for t in on_axis:
        key = _key(t["params"][axis.param])
        values[key] = t["params"][axis.param]
        measured = (t.get("detail") or {}).get(axis.tokens) if axis.tokens else None
        tokens.setdefault(key, []).append(float(measured if isinstance(measured, (int, float)) else
                                                values[key] if isinstance(values[key], (int, float)) else 0))
    mean_tokens = {k: round(sum(v) / len(v)) for k, v in tokens.items()}
    order = sorted(values, key=lambda k: (mean_tokens[k], k))
    column = {k: i for i, k in enumerate(order)}
    clusters = sorted(keep) if keep is not None else sorted({str(t.get("cluster")) for t in on_axis})
    row = {c: i for i, c in enumerate(clusters)}
    right = np.zeros((len(clusters), len(order)))
    asked = np.zeros((len(clusters), len(order)))
    for t in on_axis:
        i, j = row[str(t.get("cluster"))], column[_key(t["params"][axis.param])]
        asked[i, j] += 1
        right[i, j] += t["outcome"] == "correct"
    return _Table(tuple(order), values, np.array([mean_tokens[k] for k in order]),
                  {k: _nominal(axis, values[k]) for k in order}, tuple(clusters), right, asked)


def _draws(rng: Any, g: int, replicates: int) -> Iterator[Any]:
    """Cluster-bootstrap weights, ``_CHUNK`` replicates at a time."""
    import numpy as np

    for start in range(0, replicates, _CHUNK):
        yield rng.multinomial(g, np.full(g, 1 / g), size=min(_CHUNK, replicates - start)).astype(float)


def _rates(weights: Any, table: _Table) -> Any:
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num((weights @ table.right) / (weights @ table.asked), nan=-1.0)


def _relative_bar(accuracy: Any, share: float) -> Any:
    """Per row: ``share`` of its shortest length's accuracy; a bar nothing reaches when that length was not drawn
    or scored 0 (a model right nowhere keeps nothing: its relative length is 0, not the longest)."""
    import numpy as np

    base = accuracy[:, :1]
    return np.where(base <= 0, np.inf, share * base)


def effective_length(trials: Sequence[Mapping[str, Any]], axis: LengthAxis, threshold: float, seed: int,
                     replicates: int = REPLICATES, share: float = RELATIVE_SHARE) -> EffectiveLength | None:
    """The effective length of the scored trials on ``axis`` (None when no scored trial is on it), with the
    relative one (``share`` of the shortest length's accuracy) beside it."""
    import numpy as np

    table = _table(trials, axis)
    if table is None:
        return None
    levels = table.levels()
    observed = np.array([[lv.accuracy for lv in levels]])
    rng = np.random.default_rng(seed)
    boot: list[int] = []
    relative_boot: list[int] = []
    for weights in _draws(rng, len(table.clusters), replicates):
        accuracy = _rates(weights, table)
        boot.extend(_longest(accuracy, table.lengths, threshold).tolist())
        relative_boot.extend(_longest(accuracy, table.lengths, _relative_bar(accuracy, share)).tolist())
    relative_tokens = int(_longest(observed, table.lengths, _relative_bar(observed, share))[0])
    relative = EffectiveLength(share * levels[0].accuracy, relative_tokens, levels,
                               tuple(int(b) for b in relative_boot), axis.param, share=share)
    rows = level_rows(table.right, table.asked)
    return EffectiveLength(threshold, int(_longest(observed, table.lengths, threshold)[0]), levels,
                           tuple(int(b) for b in boot), axis.param, relative=relative,
                           p_levels=tuple(1.0 if r is None else float(r.p_below(threshold)[0]) for r in rows),
                           level_rows=rows)


def level_rows(right: Any, asked: Any) -> tuple[Any, ...]:
    """Per tested length (column): the pooled accuracy's rows over the items (rows) asked at it (what the ``min=A``
    alarm tests and ``min=A/shown`` bounds); None where one item cannot show anything."""
    import numpy as np

    from pytest_longctx.results.robust import Shape, pooled_rows

    out: list[Any] = []
    for j in range(right.shape[1]):
        held = asked[:, j] > 0
        out.append(None if held.sum() < 2 else pooled_rows(np.array([right[held, j]]), Shape.of(asked[held, j])))
    return tuple(out)


def paired_difference(now: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]], axis: LengthAxis,
                      threshold: float, seed: int, replicates: int = REPLICATES) -> dict[str, Any] | None:
    """This run's effective length minus the compared run's, over the clusters (items) and lengths both runs
    scored, with a paired cluster-bootstrap 95% interval (the same draw of items for both runs; None: none shared)."""
    import numpy as np

    def scored(trials: Sequence[Mapping[str, Any]]) -> tuple[set[str], set[str]]:
        on = [t for t in trials if t["outcome"] != "error" and axis.covers(t["params"])]
        return {str(t.get("cluster")) for t in on}, {_key(t["params"][axis.param]) for t in on}

    (clusters_now, lengths_now), (clusters_before, lengths_before) = scored(now), scored(before)
    shared, columns = clusters_now & clusters_before, sorted(lengths_now & lengths_before)
    a = _table(now, axis, shared, columns) if shared and columns else None
    b = _table(before, axis, shared, columns) if shared and columns else None
    if a is None or b is None or set(a.keys) != set(b.keys) or a.clusters != b.clusters:
        return None
    found = [int(_longest(np.array([[lv.accuracy for lv in t.levels()]]), t.lengths, threshold)[0]) for t in (a, b)]
    rng = np.random.default_rng(seed)
    diffs: list[int] = []
    for weights in _draws(rng, len(shared), replicates):
        diffs.extend((_longest(_rates(weights, a), a.lengths, threshold)
                      - _longest(_rates(weights, b), b.lengths, threshold)).tolist())
    low, high = (float(np.quantile(diffs, q, method="inverted_cdf")) for q in (0.025, 0.975))
    return {"diff": found[0] - found[1], "low": int(low), "high": int(high), "now": found[0], "before": found[1],
            "clusters": len(shared), "lengths": len(columns), "threshold": threshold, "replicates": len(diffs)}


def _longest(accuracy: Any, lengths: Any, threshold: Any) -> Any:
    """Per row: the longest length such that every length up to it reaches ``threshold`` (a number or one per row;
    0 if the first fails)."""
    import numpy as np

    passing = np.cumprod(accuracy >= threshold - 1e-12, axis=1)
    reached = passing.sum(axis=1)
    return np.where(reached > 0, lengths[np.maximum(reached - 1, 0)], 0)


def paired_lengths(now: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]],
                   declared: Mapping[str, Evidence], threshold: float, seed: int) -> dict[str, dict[str, Any]]:
    """Per experiment with a length axis: :func:`paired_difference` of this run's effective length and the compared
    run's (experiments whose runs share no item on the axis are left out)."""
    out = {}
    for experiment in sorted({t["experiment"] for t in now}):
        axis = declared.get(experiment, DEFAULT).length
        if axis is None:
            continue
        found = paired_difference([t for t in now if t["experiment"] == experiment],
                                  [t for t in before if t["experiment"] == experiment], axis, threshold,
                                  zlib.crc32(f"{seed}|effective-diff|{experiment}".encode()))
        if found is not None:
            out[experiment] = found
    return out
