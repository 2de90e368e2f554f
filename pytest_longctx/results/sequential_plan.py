"""What a plan says about the sequential gate: per alarm, requests and dollars to a decision, and what a budget buys.

For each pooled ``max-drop`` alarm the planned design (its items, trials per item, items per sample group) is run
through the sequential rule (:func:`~pytest_longctx.results.eprocess.simulate`) on seeded draws from the plan's
stated assumptions (:class:`~pytest_longctx.results.power.Assumptions`: accuracy, discordance, intra-item
correlation, from the compared run when there is one): no change, and a diffuse drop of the margin plus D
(``--longctx-detect``, else 0.05). It reports the share of runs that fail, and the mean and 95th-percentile
requests and dollars (list prices, uncached) until the alarm is settled, beside the whole design's. The rule is the
gate's: the e-process at its share of the alarm's level, a clear held back while the fixed gate's own paired test
(:func:`~pytest_longctx.results.eprocess.paired_p`) on the items so far fails at the rest (``a2``), and a run it does
not settle decided at the end of the design by that test at ``a2``.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_longctx.results.eprocess import DEFAULT_DETECT, decision_cost, draw_drops, levels, paired_p, simulate
from pytest_longctx.results.eprocess import split as split_level
from pytest_longctx.results.power import Assumptions, Design, assumptions_from, detectable_drop, gate_level

RUNS = 1000


def _alarms(thresholds: Sequence[Any]) -> list[Any]:
    return [t for t in thresholds if getattr(t, "kind", "") == "max-drop" and getattr(t, "reading", "") == "alarm"
            and not getattr(t, "each", False)]


def plan_sequential(evidence: Any, declared: Mapping[str, Any], thresholds: Sequence[Any], alpha: float,
                    baseline: Mapping[str, Any] | None, detect: float | None, budget: float | None,
                    cost: Callable[[int, int], float], seed: int = 0) -> dict[str, Any]:
    """Per pooled max-drop alarm: the sequential rule's figures under no change and a drop of margin + D."""
    import numpy as np

    alarms = _alarms(thresholds)
    a, b = levels(alpha, len(alarms))
    a1, a2 = split_level(a)
    d = detect if detect is not None else DEFAULT_DETECT

    def by_item(experiment: str) -> bool:
        found = declared.get(experiment)
        return found is not None and getattr(found, "cluster", "trial") != "trial"

    out = []
    for t in alarms:
        design = evidence.design(t.matches, by_item)
        names = evidence.experiments_matching(t.matches)
        if design.trials == 0 or design.clusters < 2:
            continue
        assumptions = assumptions_from(baseline, names[0]) if len(names) == 1 else Assumptions()
        tokens = [evidence.tokens(n) for n in names]
        usd = cost(sum(x[0] for x in tokens), sum(x[1] for x in tokens))
        per_request = usd / max(design.trials, 1)
        per_item = design.trials / design.clusters
        samples = max(evidence.samples(n) for n in names) or 1
        group = max(1, round(design.clusters / samples))
        rng = np.random.default_rng(zlib.crc32(f"{seed}|{t.text}".encode()))
        cases = {}
        for name, drop in (("no change", 0.0), (f"drop {t.value + d:g}", t.value + d)):
            k = max(1, round(per_item))
            x, regressed, improved = draw_drops(rng, RUNS, design.clusters, k, assumptions.accuracy,
                                                assumptions.discordance, assumptions.icc, drop, counts=True)
            final = paired_p(x, k, regressed, improved, t.value)
            items, fired = simulate(x * k, t.value, d, a1, b, group, final_level=a2, final_p=final,  # summed drops
                                    sizes=np.full(design.clusters, k), counts=(regressed, improved))  # the hold-back
            cases[name] = {"fails": round(float(fired.mean()), 3), **decision_cost(items, per_item, per_request)}
        entry: dict[str, Any] = {"threshold": t.text, "items": design.clusters, "requests": design.trials,
                                 "usd": round(usd, 2), "group": group, "level": a1, "final_level": a2,
                                 "futility": b, "detect": d, "hold_back": True,
                                 "cases": cases, "assumptions": assumptions.source}
        if budget is not None and usd > 0:
            entry["budget"] = _budget(budget, usd, design, alpha, alarms, assumptions)
        out.append(entry)
    return {"runs": RUNS, "alarms": out}


def _budget(budget: float, usd: float, design: Design, alpha: float, alarms: Sequence[Any],
            assumptions: Assumptions) -> dict[str, Any]:
    """What ``budget`` dollars buy of the design, and the drop that share detects with 80% power (fixed reading)."""
    share = min(1.0, budget / usd)
    part = Design(max(1, math.floor(design.trials * share)), max(1, math.floor(design.clusters * share)),
                  design.per_cluster)
    level, _ = gate_level(alpha, alarms)
    found = detectable_drop(part, level, assumptions)
    return {"usd": budget, "share": round(share, 3), "items": part.clusters,
            "drop": None if found is None else round(found, 4)}


def plan_lines(plan: Mapping[str, Any]) -> list[str]:
    """The plan's sequential figures for the terminal."""
    lines = []
    for e in plan.get("alarms", []):
        lines.append(f"sequential {e['threshold']}: {e['items']:,} items ({e['requests']:,} requests, "
                     f"${e['usd']:,.2f} for the whole design), looks every {e['group']} items, fires at e-value "
                     f"1/{e['level']:.3g} or at the design's end at fixed-test p < {e.get('final_level', 0):.3g}, "
                     f"clears a drop of {e['detect']:g} beyond the margin at 1/{e['futility']:.3g} (held back while "
                     f"the fixed test on the items so far fails at {e.get('final_level', 0):.3g})")
        for name, c in e["cases"].items():
            lines.append(f"  {name}: fails {c['fails']:.0%}; to a decision {c['requests_mean']:,} requests "
                         f"(95th percentile {c['requests_p95']:,}), ${c['usd_mean']:,.2f} "
                         f"(95th percentile ${c['usd_p95']:,.2f}) [{plan.get('runs')} seeded runs]")
        if "budget" in e:
            bud = e["budget"]
            drop = f"a drop of {bud['drop']:.3f}" if bud["drop"] is not None else "no drop (too few items)"
            lines.append(f"  --longctx-budget ${bud['usd']:,.2f} buys {bud['share']:.0%} of the design "
                         f"({bud['items']:,} items): it detects {drop} with power 0.8")
    return lines
