"""Ranking several models that answered the same items: paired differences with simultaneous intervals.

Every pair of models is compared on the trials they both answered (paired on items, :func:`.pairing.pair_runs`),
with the clustered paired difference (:func:`.clustered.paired_difference`). With ``k`` models there are
``m = k(k-1)/2`` pairs; each pair's interval is built at level ``1 - alpha/m`` (Bonferroni), so all of them hold
together with probability at least ``1 - alpha``. Two models are *separated* only where their adjusted interval
excludes 0, and a model's rank is the range of places the separations allow: ``1 + (models shown better)`` to
``k - (models shown worse)``. Models no interval separates share their places (e.g. "1-2").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from pytest_longctx.results.clustered import PairedDiff, paired_difference
from pytest_longctx.results.pairing import pair_runs

Trials = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class PairResult:
    """Model ``a`` minus model ``b`` on their paired trials, at the simultaneous level."""

    a: str
    b: str
    diff: PairedDiff

    @property
    def separated(self) -> bool:
        return self.diff.pairs > 0 and (self.diff.low > 0 or self.diff.high < 0)

    @property
    def better(self) -> str | None:
        """The model the interval shows better, None when it does not separate them."""
        if not self.separated:
            return None
        return self.a if self.diff.low > 0 else self.b

    def to_json(self) -> dict[str, Any]:
        d = self.diff
        return {"a": self.a, "b": self.b, "diff": round(d.diff, 6), "low": round(d.low, 6), "high": round(d.high, 6),
                "level": round(d.level, 6), "pairs": d.pairs, "clusters": d.clusters, "regressed": d.regressed,
                "improved": d.improved, "separated": self.separated, "better": self.better}


def paired(now: Trials, before: Trials, level: float) -> PairedDiff:
    """``now``'s accuracy minus ``before``'s over the trials both answered, paired on items, at ``level``."""
    pairs = pair_runs(now, before).pairs
    return paired_difference([a["outcome"] == "correct" for _, a, _ in pairs],
                             [b["outcome"] == "correct" for _, _, b in pairs],
                             [str(a.get("cluster") or b.get("cluster")) for _, a, b in pairs], level)


def simultaneous_level(models: int, alpha: float) -> float:
    """Each pair's interval level so that all ``models(models-1)/2`` hold together at ``1 - alpha``."""
    pairs = max(1, models * (models - 1) // 2)
    return 1 - alpha / pairs


def rank(trials: Mapping[str, Trials], alpha: float) -> dict[str, Any]:
    """Every pair compared at the simultaneous level, and each model's place range (``trials``: model -> its
    trials of one experiment, in the order the models were given)."""
    models = list(trials)
    level = simultaneous_level(len(models), alpha)
    results = [PairResult(a, b, paired(trials[a], trials[b], level)) for a, b in combinations(models, 2)]
    better = {m: 0 for m in models}  # how many models are shown better than m
    worse = {m: 0 for m in models}  # how many models are shown worse than m
    for result in results:
        winner = result.better
        if winner is None:
            continue
        loser = result.b if winner == result.a else result.a
        better[loser] += 1
        worse[winner] += 1
    places = {m: (1 + better[m], len(models) - worse[m]) for m in models}
    return {"level": level, "alpha": alpha, "pairs": [r.to_json() for r in results],
            "places": {m: {"best": lo, "worst": hi, "text": str(lo) if lo == hi else f"{lo}-{hi}"}
                       for m, (lo, hi) in places.items()}}
