"""The sequential gate's statistic: betting e-processes over items' paired drops, pooled as the fixed test pools.

**What is bet on.** An item reaches the e-processes once, when every trial of it the design holds has answered
(``session/sequential_gate.py`` counts them against the compared run's trials of the item), as its *summed* paired drop
``D_i`` (the compared run's right answers minus this run's over the item's paired trials, in ``[-n_i, n_i]``) with
its paired trial count ``n_i``. Every paired trial the fixed test pools reaches the e-process, and the quantity is
the fixed test's: the trial-weighted pooled drop ``sum D / sum n``, not the plain mean of items' drops.

For a ``max-drop=X`` alarm two betting e-processes run side by side (Waudby-Smith & Ramdas 2023, "Estimating means
of bounded random variables by betting", JRSS-B; bets by aGRAPA, their approximate growth-rate-adaptive plug-in,
capped at three quarters of the largest safe bet) over *centred increments* normalised by ``M``, the largest item
size of the design (known from the compared run before any answer):

* ``fire``: ``c_i = (D_i - X n_i) / M``, in ``[-(1 + X), 1 - X]``; wealth ``K = prod(1 + lam_i c_i)`` with
  ``lam_i`` in ``[0, CAP / (1 + X)]`` chosen from the increments before ``i`` (predictable), so every factor is
  positive. The alarm fires (fail) when ``K >= 1 / a``.
* ``clear``: ``c_i = ((X + D') n_i - D_i) / M`` (``D'``: ``--longctx-detect``, else 0.05), in
  ``[-(1 - X - D'), 1 + X + D']``: reaching ``1 / b`` shows the pooled drop below ``X + D'``, settled as a pass.

**Why it is valid.** Items enter the run in the experiments' seeded random order (sample ``i`` asks the ``i``-th
item of a seeded permutation) and an item is fed when its design's trials have answered: *when* an item is fed
depends on the design and the order, never on its answers. So, given everything fed before, the ``i``-th item is a
random draw from the population of items in its design slot, and ``E[D_i - X n_i | past] = n_i (delta_i - X)``
with ``delta_i`` the expected per-trial drop over that slot's cells. Under the pooled null with the drop spread as
the design spreads trials (every slot's cells at most ``X``: in particular any drop confined to some cells of a
design whose items all hold those cells in the same share, as docs' depths and sizes, lrt's cells of one file
each, and the full designs), each increment has conditional mean ``<= 0``: ``K`` is a non-negative supermartingale
and by Ville's inequality it ever reaches ``1 / a`` with probability at most ``a``, however often it is looked at
and however a run is continued (a re-run with more samples continues the same sequence, its first items answered
from the cache). The normalisation by the constant ``M`` (not by ``n_i``) keeps the weight of an item its trial
count: with ``X`` the fixed test's margin, the drift of ``log K`` is positive exactly when the trial-weighted drop of
the items fed exceeds ``X``. Where a block design gives items different shares of the cells (qa's position and
depth blocks) *and* the candidate trades cells off against each other (worse on some, better on others, pooled at
most ``X``), an increment's mean follows its slot and the guarantee holds on the average over the slots' interleaving
rather than item by item; ``benchmarks/conformance.py`` measures that case ("traded off") with the rest. Clearing
only forgoes rejections, so it never adds false alarms; its error (a drop of ``X + D'`` or more cleared) is at most
``b`` by the same argument.

* ``final look``: each alarm's level ``a`` is split (Bonferroni): ``a1 = EPROCESS_SHARE * a`` for the fire
  e-process at every look and ``a2 = a - a1`` for one look at the end of the planned design, where the fixed
  design's one-sided clustered paired test (the fixed gate's own p, unadjusted) decides an alarm the e-processes did
  not settle: it fires when ``p < a2``. The e-process fires wrongly at most ``a1`` of the time, the final look at
  most ``a2`` (it is taken once, at a fixed design), so together at most ``a`` (union bound). At the end of the
  design every item not yet fed (some trial errored or was never asked) is fed with the trials that paired.

**What a pass means.** A clear passes the alarm on the items fed so far, so it also needs the fixed test on them
(:meth:`AlarmSequence.fixed_p`, the gate's own p from each item's summed drop and regressed / improved pairs) not
to fail at ``a2``; while it would, the alarm runs on. Holding a clear back only forgoes a pass, so the levels above
stand. Hence on any record the rule never passes what the fixed rule fails at the stricter level ``a2``: a pass by
a clear had ``p >= a2`` on the trials seen, a pass at the final look ``p >= a2`` on the whole design
(``tests/test_sequential_property.py``). A run stopped early has no final look and decides nothing (exit 2).

A threshold is *settled* when it fired, cleared, or (with no final look) can no longer fire within the planned
design (even if every remaining item's increment were the largest at the largest bet the wealth could not reach
``1 / a``). With a final look "cannot fire" settles nothing before the end: the gate's fixed test (Agresti-Min's
centre on effective counts, a smoothed design effect, the null-imposed variance) has no simple bound over the
remaining items' answers, and a few items more can still bring its p under ``a2``; such an alarm runs to the end of
the design. The run stops once every threshold is settled. Levels: ``a = alpha / m`` over the gate's ``m``
sequential alarms (Bonferroni, which needs no order among them) and ``b = FUTILITY / m``.

One-trial items (``M = n_i = 1``): :meth:`AlarmSequence.add`. :func:`simulate`: the rule over many runs (numpy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_longctx.results.sim_draws import decision_cost as decision_cost
from pytest_longctx.results.sim_draws import draw_drops as draw_drops
from pytest_longctx.results.sim_draws import drops_p as drops_p
from pytest_longctx.results.sim_draws import paired_p as paired_p

#: The total rate at which a drop of X + D is wrongly cleared (split over the alarms like alpha).
FUTILITY = 0.10
#: The drop beyond the margin the clearing bets against when --longctx-detect is not given.
DEFAULT_DETECT = 0.05
#: Bets are capped at this share of the largest bet that keeps the wealth positive (Waudby-Smith & Ramdas' c; any
#: c < 1 is valid). 3/4, not 1/2: items' drops are mostly near 0, so the growth-optimal bet is often above the cap
#: (at 1/2 an unchanged version cost $197 against $160 list to settle, ``benchmarks/sim_recipe.py``).
CAP = 0.75
#: The share of each alarm's level the anytime e-process spends; the rest is the final look's, which carries the
#: power on small drops confined to some cells (docs' 5-point drop in ``test_position``: fired 80.2-80.6% on three
#: seeds, fixed 81.4-81.7%, with the paired test's continuity correction ``robust.CONTINUITY``;
#: ``benchmarks/conformance.py --target``). Its floor is the fixed test's own level on the nulls (the Zipf design).
EPROCESS_SHARE = 0.10


def _bet(total: float, squares: float, n: int, prior: float, limit: float, unit: float = 1.0) -> float:
    """aGRAPA: ``mu / (var + mu^2)`` from the centred increments so far (shrunk to a prior worth one increment; the
    variance floored at ``unit^2 / 4(n+1)``, ``unit`` an increment's typical scale), clipped to ``[0, limit]`` (a
    one-sided bet: only in the direction that disproves the null)."""
    mean = (total + prior) / (n + 1)
    var = max((squares + prior * prior) / (n + 1) - mean * mean, 0.0) + unit * unit / (4 * (n + 1))
    if mean <= 0:
        return 0.0
    return min(mean / (var + mean * mean), limit)


@dataclass
class Wealth:
    """One betting e-process over centred increments in ``[-low, high]`` whose conditional mean is at most 0 under
    its null: it bets they are positive."""

    low: float
    high: float
    prior: float
    unit: float = 1.0
    log_wealth: float = 0.0
    n: int = 0
    _total: float = 0.0
    _squares: float = 0.0

    @property
    def limit(self) -> float:
        """The largest bet: ``CAP`` times the one that would ruin on the worst increment."""
        return CAP / max(self.low, 1e-9)

    def add(self, increment: float) -> None:
        lam = _bet(self._total, self._squares, self.n, self.prior, self.limit, self.unit)
        self.log_wealth += math.log1p(lam * increment)
        self.n += 1
        self._total += increment
        self._squares += increment * increment

    def best_gain(self) -> float:
        """The most the log-wealth can grow on one increment (the largest bet, the largest increment)."""
        return math.log1p(self.limit * self.high)


@dataclass
class AlarmSequence:
    """A ``max-drop=X`` alarm watched item by item: fire / clear wealths and the verdict once settled.

    ``scale``: the largest item size of the design (``M``); ``unit``: the mean item size over ``M`` (the typical
    increment's scale, for the bets' prior and variance floor). Both 1 when every item is one trial."""

    threshold: str
    margin: float
    detect: float
    level: float
    futility: float
    planned: int
    #: the final fixed-design look's level (0: no final look, the e-process alone decides)
    final_level: float = 0.0
    scale: float = 1.0
    unit: float = 1.0
    fire: Wealth = field(init=False)
    clear: Wealth = field(init=False)
    settled: str | None = None  # "fired" | "cleared" | "cannot fire" | "not shown" (final look only)
    at_item: int | None = None
    drops: float = 0.0  # the summed paired drops fed
    trials: int = 0  # the paired trials fed
    by: str | None = None  # "e-process" | "final look"
    final_p: float | None = None
    #: per item fed: (summed drop, trials, regressed, improved); -1: a count not given
    _items: list[tuple[float, int, int, int]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        top = min(self.margin + self.detect, 1.0)
        self.fire = Wealth(1 + self.margin, 1 - self.margin, prior=0.0, unit=self.unit)
        self.clear = Wealth(1 - top, 1 + top, prior=(top - self.margin) * self.unit, unit=self.unit)

    def rescale(self, scale: float, mean_size: float) -> None:
        """Set the design's largest item size and mean item size (before the first item)."""
        if self.n:
            raise ValueError("an alarm's scale is set before its first item")
        self.scale, self.unit = float(scale), min(max(mean_size / max(scale, 1e-9), 1e-6), 1.0)
        self.__post_init__()

    @property
    def n(self) -> int:
        return self.fire.n

    def add(self, drop: float) -> None:
        """One more one-trial item's drop (in [-1, 1])."""
        if not -1.0 <= drop <= 1.0:
            raise ValueError(f"an item's drop is within [-1, 1], got {drop}")
        self.add_item(drop, 1, int(drop > 0), int(drop < 0))

    def add_item(self, drop: float, trials: int, regressed: int | None = None, improved: int | None = None) -> None:
        """One more item: its summed paired drop (in ``[-trials, trials]``) over its ``trials`` paired trials, and
        its pairs right -> wrong (``regressed``) and wrong -> right (``improved``) when known (the plugin passes
        them: the fixed test on the items fed needs them, see :meth:`look`)."""
        if trials < 1 or trials > self.scale + 1e-9 or abs(drop) > trials + 1e-9:
            raise ValueError(f"an item's summed drop is within [-{trials}, {trials}] and its {trials} trials at most "
                             f"the design's largest item ({self.scale:g}), got {drop}")
        top = min(self.margin + self.detect, 1.0)
        self.fire.add((drop - self.margin * trials) / self.scale)
        self.clear.add((top * trials - drop) / self.scale)
        self.drops += drop
        self.trials += trials
        self._items.append((drop, trials, -1 if regressed is None else regressed, -1 if improved is None else improved))

    def fixed_p(self) -> float | None:
        """The fixed gate's one-sided p of 'the drop is at most X' (``paired_difference``'s ``p_drop_over``) over
        the items fed so far; None when some item came without its regressed / improved counts."""
        if not self._items or any(r < 0 or i < 0 for _, _, r, i in self._items):
            return None
        import numpy as np

        from pytest_longctx.results.paired_rows import Shape, paired_rows

        sums = np.array([[-d for d, _, _, _ in self._items]], dtype=float)
        regressed = np.array([sum(r for _, _, r, _ in self._items)], dtype=float)
        improved = np.array([sum(i for _, _, _, i in self._items)], dtype=float)
        rows = paired_rows(sums, regressed, improved, Shape.of([n for _, n, _, _ in self._items]))
        return float(rows.p_drop_over(self.margin)[0])

    @property
    def pooled_drop(self) -> float | None:
        """The trial-weighted drop of the items fed (the fixed test's quantity)."""
        return self.drops / self.trials if self.trials else None

    def look(self) -> str | None:
        """Check after a group of items: the verdict once settled (kept from then on)."""
        if self.settled is not None:
            return self.settled
        remaining = max(self.planned - self.n, 0)
        if self.fire.log_wealth >= math.log(1 / self.level):
            self.settled = "fired"
        elif self.clear.log_wealth >= math.log(1 / self.futility) and self._may_clear():
            self.settled = "cleared"
        elif self.final_level <= 0 and (self.fire.log_wealth + remaining * self.fire.best_gain()
                                        < math.log(1 / self.level)):
            self.settled = "cannot fire"
        if self.settled is not None:
            self.at_item, self.by = self.n, "e-process"
        return self.settled

    def _may_clear(self) -> bool:
        """A clear passes the alarm on the items fed, so it also needs the fixed test on them not to fail at the
        final look's (stricter) level; an alarm it holds back runs on (clearing later, or to the final look)."""
        if self.final_level <= 0:
            return True
        p = self.fixed_p()
        return p is None or p >= self.final_level

    def final(self, p: float | None) -> str | None:
        """The look at the end of the planned design: an alarm the e-processes did not settle fires when the fixed
        design's one-sided p (unadjusted) is under ``final_level``. ``p`` None: no fixed p, nothing decided."""
        if self.settled is not None or self.final_level <= 0 or p is None:
            return self.settled
        self.final_p = float(p)
        self.settled = "fired" if p < self.final_level else "not shown"
        self.at_item, self.by = self.n, "final look"
        return self.settled

    def to_json(self) -> dict[str, Any]:
        pooled = self.pooled_drop
        return {"threshold": self.threshold, "margin": self.margin, "detect": self.detect,
                "level": self.level, "futility": self.futility, "items": self.n, "planned_items": self.planned,
                "trials": self.trials, "scale": self.scale,
                "mean_drop": None if pooled is None else round(pooled, 4),
                "e_value": round(math.exp(min(self.fire.log_wealth, 700.0)), 4),
                "e_value_cleared": round(math.exp(min(self.clear.log_wealth, 700.0)), 4),
                "settled": self.settled, "settled_at_item": self.at_item, "settled_by": self.by,
                "final_level": round(self.final_level, 8),
                "final_p": None if self.final_p is None else round(self.final_p, 6),
                "verdict": "fail" if self.settled == "fired" else "pass"}

    def words(self) -> str:
        e = math.exp(min(self.fire.log_wealth, 700.0))
        said = (f"sequential: {self.n} items ({self.trials} paired trials), pooled drop "
                f"{self.pooled_drop or 0.0:+.3f}, e-value {e:.3g}")
        if self.by == "final look" and self.final_p is not None:
            shown = "shown" if self.settled == "fired" else "not shown"
            return (f"{said} < 1/{self.level:.3g} (not settled by the e-process); final fixed-design look at the "
                    f"end of the design: one-sided p={self.final_p:.3g} {'<' if self.settled == 'fired' else '>='} "
                    f"{self.final_level:.3g}, {shown} larger than {self.margin:g}")
        if self.settled == "fired":
            return (f"{said} >= 1/{self.level:.3g}: shown larger than {self.margin:g} by the e-process after "
                    f"{self.at_item} items")
        if self.settled == "cleared":
            return (f"{said}: shown below {self.margin + self.detect:g} (clearing e-value >= 1/{self.futility:.3g}) "
                    f"by the e-process after {self.at_item} items, so it cannot be a drop of "
                    f"{self.margin + self.detect:g}")
        if self.settled == "cannot fire":
            return f"{said}: cannot reach 1/{self.level:.3g} within the {self.planned} planned items"
        why = " before the end of its design, so no final look" if self.final_level > 0 else ""
        return f"{said} < 1/{self.level:.3g}: not shown larger than {self.margin:g} (not settled{why})"


def levels(alpha: float, alarms: int) -> tuple[float, float]:
    """Each alarm's firing and clearing levels: Bonferroni over the ``alarms`` sequential alarms."""
    m = max(alarms, 1)
    return alpha / m, FUTILITY / m


def split(level: float, share: float = EPROCESS_SHARE) -> tuple[float, float]:
    """An alarm's level split into the e-process's (any look) and the final fixed-design look's: they add up to
    ``level``."""
    first = level * min(max(share, 0.0), 1.0)
    return first, level - first


def item_drops(pairs: Sequence[tuple[str, bool, bool]]) -> dict[str, float]:
    """Per item (cluster): the compared run's accuracy minus this run's over its paired trials.

    ``pairs``: ``(cluster, now correct, before correct)`` for each paired trial.
    """
    sums: dict[str, list[int]] = {}
    for cluster, now, before in pairs:
        s = sums.setdefault(cluster, [0, 0])
        s[0] += int(before) - int(now)
        s[1] += 1
    return {c: s[0] / s[1] for c, s in sorted(sums.items())}


def simulate(item_drops: Any, margin: float, detect: float, level: float, futility: float,
             group: int = 1, final_level: float = 0.0, final_p: Any = None, looks: Any = None,
             sizes: Any = None, cleared: bool = False, counts: Any = None) -> Any:
    """The rule over many runs at once: ``item_drops`` is an (R, N) array of items' drops in feeding order; looks
    come after every ``group`` items, or after each count of items in ``looks`` (increasing, the last N: a run's
    sample groups). Returns (items at the decision, fired) per run; a run never settled decides at N.

    ``sizes`` (N,) or (R, N): each item's paired trials, ``item_drops`` then being summed drops (the plugin's
    feed); None: one trial an item. ``cleared``: also return, per run, whether the clearing e-process settled it.
    The same bets as :class:`AlarmSequence` (vectorised: running sums give each
    item's predictable bet). With ``final_level`` > 0 a run the e-processes did not settle is decided at N by the
    fixed design's one-sided p: ``final_p`` (R,) when the caller has it (:func:`paired_p`), else the one-sample
    t-test of the items' mean drops (:func:`drops_p`). ``level`` is then the e-process's share (:func:`split`).
    ``counts``: (regressed, improved), each (R, N), the items' pairs right -> wrong and wrong -> right: a clear is
    then held back while the fixed test on the items fed fails at ``final_level`` (:meth:`AlarmSequence.look`).
    """
    import numpy as np

    x = np.asarray(item_drops, dtype=float)
    r, n = x.shape
    k = np.ones_like(x) if sizes is None else np.broadcast_to(np.asarray(sizes, dtype=float), x.shape)
    scale = float(k.max()) if k.size else 1.0
    unit = float(k.mean()) / scale if k.size else 1.0
    count = np.arange(n, dtype=float)  # increments before item i
    top = min(margin + detect, 1.0)

    def log_wealth(c: Any, low: float, prior: float) -> Any:
        s = np.concatenate([np.zeros((r, 1)), np.cumsum(c, axis=1)[:, :-1]], axis=1)
        s2 = np.concatenate([np.zeros((r, 1)), np.cumsum(c * c, axis=1)[:, :-1]], axis=1)
        mean = (s + prior) / (count + 1)
        var = np.maximum((s2 + prior * prior) / (count + 1) - mean**2, 0.0) + unit * unit / (4 * (count + 1))
        lam = np.clip(np.where(mean > 0, mean / (var + mean**2), 0.0), 0.0, CAP / max(low, 1e-9))
        return np.cumsum(np.log1p(lam * c), axis=1)

    fire = log_wealth((x - margin * k) / scale, 1 + margin, 0.0)
    clear = log_wealth((top * k - x) / scale, 1 - top, (top - margin) * unit)
    if looks is None:
        looks = np.arange(group, n + group, group)
    looks = np.unique(np.minimum(np.asarray(looks, dtype=int), n)) - 1
    worst_gain = math.log1p(CAP / (1 + margin) * (1 - margin))
    remaining = (n - 1 - looks)[None, :]
    f, c = fire[:, looks], clear[:, looks]
    fired = f >= math.log(1 / level)
    clears = c >= math.log(1 / futility)
    if counts is not None and final_level > 0:
        clears = _held_back(x, k, counts, margin, final_level, looks, fired, clears)
    settled = fired | clears
    if final_level <= 0:
        settled = settled | (f + remaining * worst_gain < math.log(1 / level))
    ever = settled.any(axis=1)
    first = np.where(ever, settled.argmax(axis=1), len(looks) - 1)
    items = looks[first] + 1
    out = fired[np.arange(r), first]
    by_clearing = ever & ~out & clears[np.arange(r), first]
    if final_level > 0:
        p = drops_p(x / k, margin) if final_p is None else np.asarray(final_p, dtype=float)
        out = np.where(ever, out, p < final_level)
    return (items, out, by_clearing) if cleared else (items, out)


def _held_back(x: Any, k: Any, counts: Any, margin: float, level: float, looks: Any, fired: Any, clears: Any) -> Any:
    """``clears`` (R, looks) without the clears the fixed test on the items fed would fail at ``level``: run by run,
    in look order, until the run fires or a clear holds (the runs at one look tested together)."""
    import numpy as np

    from pytest_longctx.results.paired_rows import Shape, paired_rows

    regressed, improved = (np.asarray(v, dtype=float) for v in counts)
    out = clears.copy()
    todo = {int(r): [int(j) for j in np.flatnonzero(clears[r] | fired[r])] for r in np.flatnonzero(clears.any(axis=1))}
    while todo:
        at: dict[tuple[int, bytes], list[int]] = {}
        for r, js in list(todo.items()):
            if not js or fired[r, js[0]]:
                del todo[r]
                continue
            n = int(looks[js[0]]) + 1
            at.setdefault((js[0], k[r, :n].tobytes()), []).append(r)
        for (j, _), rs in at.items():
            n, idx = int(looks[j]) + 1, np.array(rs)
            rows = paired_rows(-x[idx, :n], regressed[idx, :n].sum(axis=1), improved[idx, :n].sum(axis=1),
                               Shape.of([int(v) for v in k[rs[0], :n]]))
            for r, p in zip(rs, rows.p_drop_over(margin), strict=True):
                if float(p) >= level:
                    del todo[r]
                else:
                    out[r, j] = False
                    todo[r].pop(0)
    return out
