"""The run's progress line: trials done, requests sent, tokens, cache hits, estimated spend."""

from __future__ import annotations

from typing import Any

from pytest_longctx.session.options import Settings


def estimated_spend(usage: dict[str, Any], settings: Settings) -> float:
    """USD at list prices for the tokens of calls that were not cache hits (0 for free models)."""
    profile = settings.model.profile
    paid = usage["paid_input_tokens"] * profile.input_price + usage["paid_output_tokens"] * profile.output_price
    return float(paid) / 1e6


def progress_line(state: Any, settings: Settings, total: int) -> str:
    usage = state.aggregator.usage()
    done = usage["trials"]
    of = f"/{total}" if total else ""
    line = (f"longctx progress: {done}{of} trials, {usage['calls']} requests sent "
            f"({usage['cache_hits']} answered from cache), "
            f"{usage['input_tokens']:,} input tokens")
    spend = estimated_spend(usage, settings)
    if spend:
        line += f", ~${spend:,.2f} spent"
    if state.dispatcher is not None:
        p = state.dispatcher.progress
        line += f"; prefetch {p.done + p.failed}/{p.total} sent"
    return line
