"""The sequential gate as the request path's stop policy (:class:`~pytest_longctx.dispatch.policy.StopPolicy`).

The prefetch dispatcher and the batch rounds run in a thread of the controller and read the gate's state here: the
window ahead of the reported tests, how far the gate has looked, why the run stopped, which trials only settled
alarms cover. The gate replaces what they read whole (``SeqRun.starts``, ``SeqRun.unneeded``), never in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pytest_longctx.dispatch.ordering import place
from pytest_longctx.dispatch.policy import PlannedRequest, Settled, Trial, covering_alarms, settled_by
from pytest_longctx.session.sequential_looks import SeqRun


class Stops(Protocol):
    """Why the run stops, whatever stopped it (the run's state: a budget, -x, a signal)."""

    stop_reason: str | None


@dataclass(frozen=True)
class GatePolicy:
    """The sequential gate's answers to the dispatcher and the batch rounds (``--longctx-sequential``)."""

    seq: SeqRun
    state: Stops

    def stopped(self) -> str | None:
        """Why the run stops: the gate settled, or a budget, -x, a signal (None while it goes on)."""
        return self.seq.stopped or self.state.stop_reason

    def looked(self) -> int:
        """The last sample index the gate has looked at (-1: none yet)."""
        return self.seq.looked_sample

    def inside(self, planned: PlannedRequest) -> bool:
        """Whether ``planned`` is inside the window. A request is placed by its test: the first test index of its
        sample group (the same order every process runs; before the groups are known, its line in the plan, which
        runs in that order too), and may go out once that place is less than the reported tests plus the window.
        The lowest test not yet reported is always inside (every test before it has reported), whatever requests
        went out of order (prompt-cache siblings, a test waiting far ahead); the dispatcher sends a request a test
        waits for anyway (``dispatch/lanes.py``)."""
        seq = self.seq
        return place(planned.test, planned.line, seq.starts) < seq.reported + seq.window

    def settled(self, trial: Trial) -> Settled | None:
        """Per-alarm stops (``--longctx-sequential-stop alarm``): which settled alarms leave ``trial`` unneeded (None:
        still needed, no alarm covers it, or only the whole run stops)."""
        seq = self.seq
        done = seq.unneeded
        if seq.stop != "alarm" or not done:
            return None
        return settled_by({t: seq.why.get(t, "settled") for t in done}, covering_alarms(seq.thresholds, trial))
