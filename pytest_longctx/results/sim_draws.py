"""Seeded draws and fixed-design p's for simulating the sequential rule (``eprocess.simulate``).

Items' paired drops under a Beta data model (:func:`draw_drops`), the fixed design's one-sided p from them
(:func:`drops_p`, :func:`paired_p`) and what a decision costs (:func:`decision_cost`): the plan
(``results/sequential_plan.py``), the benchmarks and the tests draw from here; nothing here decides a run.
"""

from __future__ import annotations

import math
from typing import Any


def drops_p(item_drops: Any, margin: float) -> Any:
    """One-sided p of 'the drop is at most ``margin``' per run (row) from the items' drops alone: the one-sample
    t-test of their mean (CR2 on equal items is this statistic; the gate's test adds Agresti-Min's centre and a
    smoothed design effect, see :func:`paired_p`)."""
    import numpy as np
    from scipy import stats

    x = np.asarray(item_drops, dtype=float)
    n = x.shape[1]
    sd = x.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (x.mean(axis=1) - margin) / (sd / math.sqrt(n))
    t = np.where(sd > 0, t, np.where(x.mean(axis=1) > margin, np.inf, -np.inf))
    return stats.t.sf(t, n - 1)


def paired_p(item_drops: Any, per_item: int, regressed: Any, improved: Any, margin: float) -> Any:
    """One-sided p of 'the drop is at most ``margin``' per run, by the fixed gate's own test
    (:func:`~pytest_longctx.results.paired_rows.paired_rows`, what ``paired_difference`` computes) for items of
    ``per_item`` paired trials each: ``regressed`` / ``improved`` count the run's right -> wrong and wrong -> right
    pairs, (R,) or per item (R, N) (:func:`draw_drops`' ``counts``, summed here)."""
    import numpy as np

    from pytest_longctx.results.paired_rows import Shape, paired_rows

    x = np.asarray(item_drops, dtype=float)
    shape = Shape.of([per_item] * x.shape[1])
    regressed, improved = (np.asarray(v, float).reshape(x.shape[0], -1).sum(axis=1) for v in (regressed, improved))
    rows = paired_rows(-x * per_item, regressed, improved, shape)
    return rows.p_drop_over(margin)


def draw_drops(rng: Any, runs: int, items: int, per_item: int, accuracy: float, discordance: float, icc: float,
               drop: float, concentrated: bool = False, counts: bool = False) -> Any:
    """Items' drops of ``runs`` seeded runs of a design (``items`` items, ``per_item`` paired trials each).

    The compared run's item propensities are Beta with mean ``accuracy`` and intra-item correlation ``icc``; each
    trial is right when a uniform falls under its item's propensity; the candidate re-draws that uniform with the
    probability that makes two runs of an unchanged model disagree on ``discordance`` of the pairs. A diffuse drop
    lowers every propensity by ``drop``; a concentrated one breaks ``drop / accuracy`` of the items whole.
    ``counts``: also each item's regressed and improved pairs, (R, N) each (a clear's hold-back tests the items fed).
    """
    import numpy as np

    rho = min(max(icc, 1e-3), 0.999)
    ab = (1 - rho) / rho
    p = rng.beta(accuracy * ab, (1 - accuracy) * ab, size=(runs, items, 1))
    u = rng.random((runs, items, per_item))
    redraw = min(1.0, discordance / max(2 * accuracy * (1 - accuracy), 1e-9))
    v = np.where(rng.random(u.shape) < redraw, rng.random(u.shape), u)
    before = u < p
    if concentrated:
        broken = rng.random((runs, items, 1)) < min(1.0, drop / max(accuracy, 1e-9))
        now = (v < p) & ~broken
    else:
        now = v < np.clip(p - drop, 0.0, 1.0)
    drops = (before.astype(float) - now).mean(axis=2)
    if counts:  # with each item's regressed and improved pairs, for the fixed test (:func:`paired_p`)
        return drops, (before & ~now).sum(axis=2), (~before & now).sum(axis=2)
    return drops


def decision_cost(items_at: Any, per_item: float, dollars_per_request: float) -> dict[str, float]:
    """Mean and 95th-percentile requests and dollars to a decision, from the items each run decided at."""
    import numpy as np

    requests = np.asarray(items_at, dtype=float) * per_item
    mean, p95 = float(requests.mean()), float(np.percentile(requests, 95))
    return {"requests_mean": round(mean), "requests_p95": round(p95),
            "usd_mean": round(mean * dollars_per_request, 2), "usd_p95": round(p95 * dollars_per_request, 2)}
