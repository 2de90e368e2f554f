"""Effective context length (after RULER): the longest tested context at which accuracy stays at or above a
threshold, with a cluster-bootstrap interval.

Accuracy is pooled over every cell at one length (e.g. all shuffle modes of one LRT size). The effective length
is the longest length L such that every tested length up to L reaches the threshold; 0 when even the shortest
does not. Its 95% interval resamples clusters (items) with replacement, so trials that share an item move
together; every draw comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_longctx.results.evidence import LengthAxis

#: Accuracy a length must reach, by default: RULER's bar (Llama-2-7B's score at 4K tokens, 85.6%), rounded.
DEFAULT_THRESHOLD = 0.85
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


@dataclass(frozen=True)
class EffectiveLength:
    """The effective length in tokens (0: below the shortest tested length) and its bootstrap distribution."""

    threshold: float
    tokens: int
    levels: tuple[Level, ...]
    boot: tuple[int, ...]
    param: str

    @property
    def at_least(self) -> bool:
        """Every tested length reached the threshold: the model may do as well on longer contexts."""
        return bool(self.levels) and self.tokens == self.levels[-1].tokens

    def quantile(self, q: float) -> int:
        """The ``q`` quantile of the bootstrap distribution (an observed length, never interpolated)."""
        if not self.boot:
            return self.tokens
        ordered = sorted(self.boot)
        return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))]

    def interval(self, level: float = 0.95) -> tuple[int, int]:
        return self.quantile((1 - level) / 2), self.quantile(1 - (1 - level) / 2)

    def p_below(self, tokens: float) -> float:
        """One-sided bootstrap p-value of 'the effective length is at least ``tokens``'."""
        return (1 + sum(1 for b in self.boot if b >= tokens)) / (1 + len(self.boot))

    def to_json(self) -> dict[str, Any]:
        low, high = self.interval()
        return {"tokens": self.tokens, "low": low, "high": high, "threshold": self.threshold, "param": self.param,
                "at_least": self.at_least, "below_shortest": self.tokens == 0 and bool(self.levels),
                "replicates": len(self.boot),
                "levels": [{"value": lv.value, "tokens": lv.tokens, "accuracy": round(lv.accuracy, 6), "n": lv.n,
                            "clusters": lv.clusters} for lv in self.levels]}


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def effective_length(trials: Sequence[Mapping[str, Any]], axis: LengthAxis, threshold: float, seed: int,
                     replicates: int = REPLICATES) -> EffectiveLength | None:
    """The effective length of the scored trials on ``axis`` (None when no scored trial is on it)."""
    import numpy as np

    on_axis = [t for t in trials if t["outcome"] != "error" and axis.covers(t["params"])]
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
    clusters = sorted({str(t.get("cluster")) for t in on_axis})
    row = {c: i for i, c in enumerate(clusters)}
    right = np.zeros((len(clusters), len(order)))
    asked = np.zeros((len(clusters), len(order)))
    for t in on_axis:
        i, j = row[str(t.get("cluster"))], column[_key(t["params"][axis.param])]
        asked[i, j] += 1
        right[i, j] += t["outcome"] == "correct"
    lengths = np.array([mean_tokens[k] for k in order])
    levels = tuple(Level(values[k], int(mean_tokens[k]), float(right[:, j].sum() / asked[:, j].sum()),
                         int(asked[:, j].sum()), int((asked[:, j] > 0).sum())) for k, j in column.items())
    observed = _longest(np.array([[lv.accuracy for lv in levels]]), lengths, threshold)[0]
    rng = np.random.default_rng(seed)
    boot: list[int] = []
    g = len(clusters)
    for start in range(0, replicates, _CHUNK):
        weights = rng.multinomial(g, np.full(g, 1 / g), size=min(_CHUNK, replicates - start)).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy = (weights @ right) / (weights @ asked)
        boot.extend(_longest(np.nan_to_num(accuracy, nan=-1.0), lengths, threshold).tolist())
    return EffectiveLength(threshold, int(observed), levels, tuple(int(b) for b in boot), axis.param)


def _longest(accuracy: Any, lengths: Any, threshold: float) -> Any:
    """Per row: the longest length such that every length up to it reaches ``threshold`` (0 if the first fails)."""
    import numpy as np

    passing = np.cumprod(accuracy >= threshold - 1e-12, axis=1)
    reached = passing.sum(axis=1)
    return np.where(reached > 0, lengths[np.maximum(reached - 1, 0)], 0)
