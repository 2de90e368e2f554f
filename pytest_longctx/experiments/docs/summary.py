"""Terminal lines for the docs experiment: every scorer's accuracy, judge agreement, RAG recall; what the folder's
items detect."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_longctx.experiments.docs.scorers import F1_CORRECT


def docs_summary(trials: Iterable[Mapping[str, Any]]) -> list[str]:
    """Summary lines from the run record's docs trials (empty when there are none)."""
    scored = [t["detail"] for t in trials if t["experiment"] == "docs" and "subspan" in t.get("detail", {})]
    if not scored:
        return []

    def rate(values: list[bool]) -> str:
        return f"{sum(values) / len(values):.3f}" if values else "-"

    judged = [d for d in scored if d.get("judge") is not None]
    unread = sum(1 for d in scored if "judge_reply" in d)
    agree = rate([d["judge_agree"] for d in judged])
    lines = [f"docs scorers over {len(scored)} trials: subspan {rate([d['subspan'] for d in scored])}  "
             f"em {rate([d['em'] for d in scored])}  f1>={F1_CORRECT} {rate([d['f1'] >= F1_CORRECT for d in scored])}  "
             f"judge {rate([d['judge'] for d in judged])} (agrees with subspan {agree} on {len(judged)}; "
             f"{unread} unreadable)"]
    recall: dict[Any, list[int]] = {}
    for t in trials:
        if t["experiment"] == "docs" and "retrieval_recall" in t.get("detail", {}):
            recall.setdefault(t["params"].get("context_fraction"), []).append(t["detail"]["retrieval_recall"])
    if recall:
        cells = "  ".join(f"{k}%: {sum(v) / len(v):.2f} (n={len(v)})" for k, v in sorted(recall.items()))
        lines.append(f"docs rag retrieval recall by context_fraction: {cells}")
    return lines


def _alarm_level(settings: Mapping[str, Any]) -> float:
    """The one-sided level of one pooled alarm in the worst case (Holm's first step over the run's alarms)."""
    alarms = [t for t in settings.get("thresholds") or []
              if "max-drop" in str(t) and "/shown" not in str(t) and "/each" not in str(t)]
    return float(settings.get("alpha") or 0.05) / max(len(alarms), 1)


def _unrelated_words(found: Mapping[str, Any], items: int) -> str:
    """The folder's figures if the candidate and the compared run are unrelated models."""
    seen = f"a drop of {found['diffuse']:.3f} diffuse" if found["diffuse"] is not None else "no diffuse drop"
    need = found["items_needed"]
    needs = (f"no folder size detects a {found['detect'] * 100:.0f}-point drop" if need is None
             else f"a {found['detect'] * 100:.0f}-point drop of either shape needs about {need} items")
    return f"; if unrelated models ({found['assumptions']}): {items} items detect {seen}, {needs}"


def folder_lines(record: Mapping[str, Any]) -> list[str]:
    """How many items the docs folder supports (both worlds' figures when the plan holds them)."""
    lines, other = _folder_lines(record)
    return [line + other for line in lines]


def _folder_lines(record: Mapping[str, Any]) -> tuple[list[str], str]:
    """How many items the docs folder supports, what they detect, and how many a 5-point drop needs (a plan reads
    its power statement; a run its docs trials)."""
    from pytest_longctx import items_power

    settings = record.get("settings") or {}
    power = (record.get("plan") or {}).get("power") or {}
    planned = (power.get("experiments") or {}).get("docs")
    if planned:
        items, trials, alpha = int(planned["clusters"]), int(planned["trials"]), float(power["alpha"])
        assumptions = planned.get("assumptions")
    else:
        asked = [t for t in record.get("trials") or [] if t.get("experiment") == "docs" and t.get("item")]
        items, trials, alpha, assumptions = len({t["item"] for t in asked}), len(asked), _alarm_level(settings), None
    if items < 2:
        return [], ""
    per_item = max(round(trials / items), 1)
    found = items_power(items, per_item, alpha, assumptions)
    far = (planned or {}).get("unrelated")  # a candidate of another family: the figures of both worlds
    other = (_unrelated_words(items_power(items, per_item, alpha, far["assumptions"]), items) if far else "")
    folder = settings.get("docs_folder") or {}
    documents = int(folder.get("documents") or 0)
    where = f" of the folder's {folder['items']}" if folder.get("items") and folder["items"] != items else ""
    seen = (f"a drop of {found['diffuse']:.3f} diffuse" if found["diffuse"] is not None else "no diffuse drop")
    broken = found["concentrated"]
    seen += (f", or {broken['items']} items breaking (a drop of {broken['drop']:.3f})" if broken
             else ", and no share of items breaking")
    if planned and planned.get("world"):  # which agreement the figures assume
        seen = f"({'if' if far else 'assuming'} {planned['world']}) {seen}"
    line = (f"docs items: {items}{where} reviewed items asked {per_item} times each detect {seen} with "
            f"{found['power']:.0%} power at one-sided alpha {alpha:.4g}")
    need, total = found["items_needed"], int(folder.get("items") or items)
    detect = f"a {found['detect'] * 100:.0f}-point drop of either shape"
    if need is None:
        return [line + f"; no folder size detects {detect}"], other
    if need <= items:
        return [line + f"; {detect} needs about {need} items: these are enough [{found['assumptions']}]"], other
    if need <= total:
        return [line + f"; {detect} needs about {need} items: the folder has them (`--longctx-samples {need}`) "
                       f"[{found['assumptions']}]"], other
    per_doc = math.ceil((need - total) / documents) if documents else None
    more = f"{per_doc} more a document, " if per_doc else ""
    return [line + f"; {detect} needs about {need} items ({more}`longctx-docs generate DIR --model SPEC --all "
                   f"--per-doc {per_doc or 'N'}`, then review them) [{found['assumptions']}]"], other
