"""Terminal lines for the docs experiment: every scorer's accuracy, judge agreement, RAG recall."""

from __future__ import annotations

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
