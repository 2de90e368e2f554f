"""The request path's two skips: a planned request (plan mode) and a request the stopped run never answered.

Both are pytest skips, not errors: they are not trial results. They live apart from the client so that the
prefetch dispatcher (which the client waits on) can raise them without importing the client.
"""

from __future__ import annotations

from typing import Any

import pytest


class Planned(pytest.skip.Exception):  # type: ignore[name-defined,misc]
    """Raised in plan mode instead of sending a request; carries what would have been sent.

    A skip, not an error: pytest then reports it without formatting a traceback (which cost ~70% of a
    plan run), and an eval's ``except Exception`` around ``ask`` cannot swallow it.
    """

    def __init__(self, entry: dict[str, Any]) -> None:
        super().__init__("longctx plan: request recorded, not sent", _use_item_location=True)
        self.entry = entry


class RunStopped(pytest.skip.Exception):  # type: ignore[name-defined,misc]
    """The run stopped (SIGINT, -x, a fatal error) before this test's request was answered or sent.

    Not a trial result, so a skip (like :class:`Planned`): the record holds what finished, and says why it stopped.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"longctx: the run stopped before this request was answered ({reason})",
                         _use_item_location=True)


class AlarmsSettled(pytest.skip.Exception):  # type: ignore[name-defined,misc]
    """Every sequential alarm that covers this trial is already settled (``--longctx-sequential``): its answer can
    no longer change a verdict, so its request is not sent (a skip, like :class:`RunStopped`, never a result).

    ``thresholds``: the settled alarms' texts; ``why``: how each one settled, for the skip's reason.
    """

    def __init__(self, thresholds: list[str], why: list[str]) -> None:
        named = "; ".join(f"alarm '{t}' {w}" for t, w in zip(thresholds, why, strict=True))
        super().__init__(f"longctx: not needed, every alarm covering this trial is settled ({named})",
                         _use_item_location=True)
        self.thresholds = thresholds


class BudgetStopped(RunStopped):
    """The ledger refused this test's request: sending it could pass ``--longctx-budget`` (``dispatch/ledger.py``).
    Not sent, never a wrong answer: the test ends skipped with the reason and the run stops as a budget stop."""

    def __init__(self, reason: str) -> None:
        pytest.skip.Exception.__init__(self, f"longctx: not sent, the budget is reached ({reason})",
                                       _use_item_location=True)
