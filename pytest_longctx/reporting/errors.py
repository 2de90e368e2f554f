"""Errored trials in the terminal summary: one line per distinct error with its count, not one block per trial.

A run whose backend fails (``fake/error``, an outage) errors every trial the same way; pytest would print each
one twice (its ERRORS block and its short-summary line). :class:`ErrorDigest` (controller only) shows a longctx
test's errors grouped by their message instead: pytest's ERRORS section keeps one example of each distinct error
that has a traceback, the longctx section prints ``ERROR <count>x <message> (e.g. <test id>)`` per distinct error,
and pytest's short summary lists the other errors only. The reports stay in the terminal's statistics, so the
final counts ("200 errors") and the exit code are pytest's own.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_longctx.util.words import plural

ERROR_STAT = "error"


@dataclass
class ErrorGroup:
    """The errored reports of longctx tests that share one message."""

    message: str
    reports: list[Any] = field(default_factory=list)

    @property
    def traceback(self) -> bool:
        """Whether the first report holds a traceback worth showing once (not only a one-line message, which
        is what the plugin's own errors are)."""
        return getattr(getattr(self.reports[0], "longrepr", None), "reprcrash", None) is not None


def error_message(report: Any) -> str:
    """The one-line message of an errored report: its crash message, else the last line of its text."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None and str(crash.message).strip():
        return str(crash.message).strip().splitlines()[0]
    lines = [line.strip() for line in str(getattr(report, "longreprtext", "")).splitlines() if line.strip()]
    return lines[-1] if lines else "error (no message)"


#: The user property the plugin puts on every report of a longctx trial: a test that merely has ``longctx`` among its
#: keywords (a parameter id, a name) is not one.
TRIAL_PROPERTY = "longctx_trial"


def is_longctx(report: Any) -> bool:
    """A report of a longctx trial (any phase), as the plugin tagged it; on a worker's report under xdist too."""
    return any(prop[0] == TRIAL_PROPERTY for prop in getattr(report, "user_properties", None) or ())


def group_errors(reports: Sequence[Any]) -> list[ErrorGroup]:
    """The longctx reports among ``reports`` grouped by message, the most frequent first (ties: by test id)."""
    groups: dict[str, ErrorGroup] = {}
    for report in reports:
        if is_longctx(report):
            message = error_message(report)
            groups.setdefault(message, ErrorGroup(message)).reports.append(report)
    for group in groups.values():  # the example: the first in test id order, whichever worker finished first
        group.reports.sort(key=lambda r: str(r.nodeid))
    return sorted(groups.values(), key=lambda g: (-len(g.reports), str(g.reports[0].nodeid)))


def error_lines(groups: Sequence[ErrorGroup]) -> list[str]:
    """``ERROR 200x BackendError: ... (e.g. evals/x.py::test[a])`` per group."""
    lines = []
    for group in groups:
        first = group.reports[0].nodeid
        more = len(group.reports) - 1
        example = f"e.g. {first} and {more} more" if more else first
        lines.append(f"ERROR {len(group.reports)}x {group.message} ({example})")
    return lines


def heading(groups: Sequence[ErrorGroup]) -> str:
    n = sum(len(g.reports) for g in groups)
    return (f"longctx errors: {n} {plural('test', n)} errored, {len(groups)} distinct "
            f"{plural('error', len(groups))} (never counted as wrong answers)")


class ErrorDigest:
    """Groups longctx errors in the terminal summary (see the module's docstring). Registered on the controller."""

    def __init__(self) -> None:
        self._kept: list[Any] | None = None
        self._others: list[Any] = []
        self._groups: list[ErrorGroup] = []

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> Generator[None, None, None]:
        """Around pytest's own summary: its ERRORS section sees one example per distinct error with a traceback."""
        stats = terminalreporter.stats
        kept = list(stats.get(ERROR_STAT, []))
        self._groups = group_errors(kept)
        if self._groups:
            self._kept = kept
            self._others = [r for r in kept if not is_longctx(r)]
            stats[ERROR_STAT] = self._others + [g.reports[0] for g in self._groups if g.traceback]
        try:
            return (yield)
        finally:
            if self._kept is not None:
                stats[ERROR_STAT] = self._kept  # the final counts and anything after see every report
                self._kept = None

    @pytest.hookimpl(trylast=True, specname="pytest_terminal_summary")
    def pytest_terminal_summary_errors(self, terminalreporter: pytest.TerminalReporter) -> None:
        """After the longctx summary, before pytest's short summary (which then lists the other errors only)."""
        if not self._groups or self._kept is None:
            return
        terminalreporter.stats[ERROR_STAT] = self._others
        terminalreporter.write_sep("=", heading(self._groups), red=True)
        for line in error_lines(self._groups):
            terminalreporter.write_line(line, red=True)
