"""What the request path asks the run's stop rules, typed: a planned request, whose trial it serves, and the policy.

The prefetch dispatcher and the batch rounds (controller) and the waiting tests (workers) ask the same questions:
is the run stopped, and why; is this trial's request still needed, and if not, which settled alarms made it
unneeded; may a planned request go out yet (the sequential gate's window), and how far has the gate looked. The
session answers them (``--longctx-sequential``: the gate's state, :mod:`~pytest_longctx.session.gate_policy`; the
workers: the controller's settled-alarms file, :class:`~pytest_longctx.dispatch.settled.SettledAlarms`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_longctx.dispatch.skips import AlarmsSettled


@dataclass(frozen=True)
class Trial:
    """The trial a request serves: its experiment and condition params (which sequential alarms cover it)."""

    experiment: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Settled:
    """Why a trial is no longer needed: every alarm covering it is settled (``how``: how each one settled)."""

    thresholds: tuple[str, ...]
    how: tuple[str, ...]

    @property
    def reason(self) -> str:
        return "; ".join(f"alarm '{t}' {w}" for t, w in zip(self.thresholds, self.how, strict=True))

    def skip(self) -> AlarmsSettled:
        """The skip its waiting or asking test ends with."""
        return AlarmsSettled(list(self.thresholds), list(self.how))


class Alarm(Protocol):
    """A sequential alarm as the request path sees it (a pooled ``max-drop`` threshold): which trials it covers."""

    @property
    def text(self) -> str: ...

    def matches(self, experiment: str, params: Mapping[str, Any]) -> bool: ...


def covering_alarms(alarms: Sequence[Alarm], trial: Trial) -> list[str]:
    """The texts of the ``alarms`` that cover ``trial``."""
    return [a.text for a in alarms if a.matches(trial.experiment, trial.params)]


def settled_by(settled: Mapping[str, str], covering: Sequence[str]) -> Settled | None:
    """The trial covered by the ``covering`` alarms is unneeded when each of them is ``settled`` (alarm -> how);
    None otherwise, and for a trial no alarm covers (it runs until the whole run stops)."""
    if not covering or any(t not in settled for t in covering):
        return None
    texts = tuple(sorted(set(covering)))
    return Settled(texts, tuple(settled[t] for t in texts))


@dataclass(frozen=True)
class PlannedRequest:
    """One line of the plan the child plan run wrote (``ModelClient`` in plan mode), as dispatch reads it."""

    key: str
    #: The request as JSON (``Request.to_json``): parsed only when it is sent.
    request: dict[str, Any]
    #: Its line in the plan (0-based): the lanes send in this order.
    line: int
    #: The node id of the test that planned it ("" when unknown).
    test: str = ""
    #: The prompt-cache prefix group the plan names (None: computed from the request, if it marks one).
    prefix: str | None = None
    #: The trial it serves (None: the plan does not say, so no alarm can make it unneeded).
    trial: Trial | None = None

    @classmethod
    def from_plan(cls, entry: dict[str, Any], line: int) -> PlannedRequest:
        """From one plan line's JSON object."""
        trial = (Trial(str(entry["experiment"]), dict(entry.get("params") or {})) if "experiment" in entry
                 else None)
        return cls(str(entry["key"]), entry.get("request") or {}, line, str(entry.get("test") or ""),
                   str(entry["prefix"]) if entry.get("prefix") else None, trial)


class Settling(Protocol):
    """Which trials settled alarms leave unneeded (both sides: the controller's gate, the workers' file)."""

    def settled(self, trial: Trial) -> Settled | None:
        """None while ``trial`` is needed; else which settled alarms cover it."""


class StopPolicy(Settling, Protocol):
    """The controller's stop rules as the dispatcher and the batch rounds see them (the sequential gate's)."""

    def stopped(self) -> str | None:
        """Why the run stopped (every alarm settled, a budget, -x, a signal); None while it goes on."""

    def inside(self, planned: PlannedRequest) -> bool:
        """Whether ``planned`` may go out now (the window ahead of the reported tests)."""

    def looked(self) -> int:
        """The last sample index the gate has looked at (-1: none yet)."""
