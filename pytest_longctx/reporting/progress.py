"""The run's own terminal lines on the controller: what is being built while the run starts, then one progress
line (trials done of total, outcomes, requests, an estimate of the time left) instead of a letter per trial.

On a terminal the progress line is redrawn in place; in a log (CI, a pipe) it is printed as a new line every
:data:`LOG_EVERY_S` seconds and once more when the trials end, so a log shows the pace without a line per trial.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

    from pytest_longctx.dispatch.ledger import Ledger
    from pytest_longctx.run_settings import Settings

#: Seconds between progress lines in a log (not a terminal), and between redraws on a terminal.
LOG_EVERY_S = 30.0
REDRAW_EVERY_S = 0.5


def estimated_spend(usage: dict[str, Any], settings: Settings) -> float:
    """USD of the requests sent: the ledger's dollars when the usage comes from it (``usd``: each request at the
    price of the model it called), else the tokens of calls that were not cache hits at the model's list price
    (0 for free models or an unknown price); input as billed (prompt-cache writes 1.25x, reads 0.1x)."""
    if "usd" in usage:
        return float(usage["usd"]) + float(usage.get("abandoned_usd", 0.0))
    overrides = {p.model: p for p in getattr(settings, "prices", ())}  # --longctx-prices
    price = overrides.get(settings.model.spec) or settings.model.profile.price
    if price is None:
        return 0.0
    billed = usage.get("billed_input_tokens", usage["paid_input_tokens"])
    paid = billed * price.rates.input + usage["paid_output_tokens"] * price.rates.output
    return float(paid) / 1e6


def ledger_usage(ledger: Ledger | None) -> dict[str, Any] | None:
    """The run's ledger as usage figures (``calls``, tokens, ``usd``, ``in_flight_usd``), None without one."""
    from pytest_longctx.dispatch.ledger import as_usage, totals

    if ledger is None:
        return None
    try:
        whole = totals(ledger.read())
    except (OSError, ValueError):  # removed at the very end of the run
        return None
    return {**as_usage(whole), "in_flight_usd": whole["in_flight_usd"]}


def prompt_cache_text(usage: dict[str, Any]) -> str | None:
    """``prompt cache: W written, R read; billed input B of U uncached (B/U)``, or None when nothing used it."""
    written, read = int(usage.get("cache_creation_input_tokens", 0)), int(usage.get("cache_read_input_tokens", 0))
    if not written and not read:
        return None
    uncached, billed = int(usage.get("paid_input_tokens", 0)), int(usage.get("billed_input_tokens", 0))
    return (f"prompt cache: {written:,} input tokens written, {read:,} read; billed input {billed:,} of "
            f"{uncached:,} uncached ({billed / max(1, uncached):.3f})")


def duration(seconds: float) -> str:
    """``45 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Display:
    """The controller's terminal lines of a run (kept in ``RunState.display``); silent without a terminal reporter."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.first: float | None = None  # when the first trial ended: the estimate's clock starts there
        self.last = 0.0
        self.finished = 0  # longctx items whose outcome was reported (their call, or a setup that did not pass)
        self.outcomes: dict[str, int] = {}
        self.open = False  # a redrawn line without its newline yet
        self.shown = 0  # ``finished`` when the progress line was last shown
        #: The run's ledger (set when it is created): the line's requests and dollars are what it counts.
        self.ledger: Ledger | None = None

    @property
    def tr(self) -> Any:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    def say(self, text: str) -> None:
        """A phase of the start (``starting the local model server ...``), on a line of its own."""
        tr = self.tr
        if tr is not None:
            self._close_line(tr)
            tr.write_line(f"longctx: {text}")

    def outcome(self, outcome: str) -> None:
        """A trial's outcome (``correct``, ``incorrect``, ``error``), counted for the progress line."""
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def item_finished(self, state: Any, settings: Settings, total: int, *, now: float | None = None) -> None:
        """One longctx item has its outcome: redraw (terminal) or, now and then, print (log) the progress line."""
        now = time.monotonic() if now is None else now
        self.finished += 1
        if self.first is None:
            self.first = now
        tr = self.tr
        if tr is None:
            return
        every = REDRAW_EVERY_S if tr.isatty else LOG_EVERY_S
        if self.finished > 1 and self.finished < total and now - self.last < every:
            return
        self.last = now
        self._show(tr, self.line(state, settings, total, now))
        self.shown = self.finished

    def close(self, state: Any, settings: Settings, total: int) -> None:
        """The trials are over: the last progress line stays, ended by its newline."""
        tr = self.tr
        if tr is None or not self.finished:
            return
        if self.shown != self.finished:  # else the last line shown already says it
            self._show(tr, self.line(state, settings, total, time.monotonic()))
        self._close_line(tr)

    def line(self, state: Any, settings: Settings, total: int, now: float) -> str:
        """``longctx: 52/121 trials (40 correct, 12 incorrect), 48 requests sent, 1 min 10 s, ~2 min 20 s left``."""
        plan = bool(settings.plan)
        from pytest_longctx.util.words import plural

        counted = total or self.finished
        noun = f"{plural('request', counted)} planned" if plan else plural("trial", counted)
        parts = [f"{self.finished:,}/{total:,} {noun}" if total else f"{self.finished:,} {noun}"]
        counts = ", ".join(f"{n:,} {plural(k, n) if k == 'error' else k}" for k, n in sorted(self.outcomes.items())
                           if n)
        if counts and not plan:
            parts[0] += f" ({counts})"
        if not plan:
            usage = state.aggregator.usage()
            usage.update(ledger_usage(self.ledger) or {})  # what was sent, as the ledger counts it
            sent = f"{usage['calls']:,} request{'' if usage['calls'] == 1 else 's'} sent"
            parts.append(f"{sent}, {usage['cache_hits']:,} answered from cache")
            spend = estimated_spend(usage, settings)
            if spend or usage.get("in_flight_usd"):
                flight = float(usage.get("in_flight_usd", 0.0))
                parts.append(f"${spend:,.2f} spent" + (f" (+${flight:,.2f} in flight)" if flight >= 0.005 else ""))
            if cached := prompt_cache_text(usage):
                parts.append(cached)
            if state.dispatcher is not None:
                p = state.dispatcher.progress
                parts.append(f"prefetch {p.done + p.failed:,}/{p.total:,} sent")
        elapsed = now - (self.first if self.first is not None else now)
        if total and self.finished >= total:
            parts.append("done")
        elif self.finished > 1 and elapsed > 0:
            left = elapsed / (self.finished - 1) * (total - self.finished)
            parts.append(f"~{duration(left)} left")
        return "longctx: " + "; ".join(parts)

    def _show(self, tr: Any, line: str) -> None:
        if tr.isatty:
            tr.rewrite(line, erase=True)
            tr.currentfspath = -2  # anyone else writing starts a new line first (pytest's ensure_newline)
            self.open = True
        else:
            tr.write_line(line)

    def _close_line(self, tr: Any) -> None:
        if self.open:
            tr.write("\n")
            tr.currentfspath = None
            self.open = False
