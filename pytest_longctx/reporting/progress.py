"""The run's progress line: trials done, requests sent, tokens, cache hits, estimated spend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_longctx.session.options import Settings



def estimated_spend(usage: dict[str, Any], settings: Settings) -> float:
    """USD at list prices for the tokens of calls that were not cache hits (0 for free models); input as billed
    (prompt-cache writes 1.25x, reads 0.1x)."""
    profile = settings.model.profile
    billed = usage.get("billed_input_tokens", usage["paid_input_tokens"])
    paid = billed * profile.input_price + usage["paid_output_tokens"] * profile.output_price
    return float(paid) / 1e6


def prompt_cache_text(usage: dict[str, Any]) -> str | None:
    """``prompt cache: W written, R read; billed input B of U uncached (B/U)``, or None when nothing used it."""
    written, read = int(usage.get("cache_creation_input_tokens", 0)), int(usage.get("cache_read_input_tokens", 0))
    if not written and not read:
        return None
    uncached, billed = int(usage.get("paid_input_tokens", 0)), int(usage.get("billed_input_tokens", 0))
    return (f"prompt cache: {written:,} input tokens written, {read:,} read; billed input {billed:,} of "
            f"{uncached:,} uncached ({billed / max(1, uncached):.3f})")


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
    cached = prompt_cache_text(usage)
    if cached:
        line += f"; {cached}"
    if state.dispatcher is not None:
        p = state.dispatcher.progress
        line += f"; prefetch {p.done + p.failed}/{p.total} sent"
    return line
