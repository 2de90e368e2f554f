"""Which sequential alarms are settled, as the request path sees it (``--longctx-sequential``, per-alarm stops).

The controller writes a small JSON file beside the stop file (``<stop file>.settled``: each settled alarm's
threshold text and how it settled) whenever an alarm settles while others go on. A trial whose every covering
alarm (a threshold matching its experiment and params) is settled is no longer needed: right before its request
would be sent, or while it waits for prefetch to answer it, it ends skipped
(:class:`~pytest_longctx.dispatch.skips.AlarmsSettled`). A trial no threshold covers is never skipped this way (it
runs until the whole run stops). The session hands the alarm thresholds (:class:`~.policy.Alarm`); this module only
reads the file, re-reading it when it changed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_longctx.dispatch.policy import Alarm, Settled, Trial, covering_alarms, settled_by
from pytest_longctx.dispatch.skips import AlarmsSettled
from pytest_longctx.util.fsutil import atomic_write_text


def settled_path(stop_file: str | Path) -> Path:
    """The settled alarms' file, beside the run's stop file."""
    return Path(f"{stop_file}.settled")


def write_settled(path: Path, settled: Mapping[str, str]) -> None:
    """Controller: every settled alarm's text and how it settled (replaced whole, atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(dict(settled), sort_keys=True))


def unneeded(settled: Mapping[str, str], covering: Sequence[str]) -> AlarmsSettled | None:
    """The skip for a trial covered by ``covering`` when every one of them is ``settled`` (None otherwise, and
    for a trial no threshold covers)."""
    found = settled_by(settled, covering)
    return found.skip() if found is not None else None


@dataclass
class SettledAlarms:
    """Worker side: the controller's settled alarms, read from ``path`` when it changed."""

    path: Path
    #: the run's alarm thresholds (which trials each covers)
    alarms: Sequence[Alarm]
    _stamp: tuple[int, int, int] | None = field(default=None, repr=False)
    _settled: dict[str, str] = field(default_factory=dict, repr=False)

    def current(self) -> dict[str, str]:
        try:
            st = os.stat(self.path)
        except OSError:
            return self._settled  # none settled yet (or the run's clean-up removed it: nothing more to learn)
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)  # replaced whole: a new inode
        if stamp != self._stamp:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return self._settled
            self._stamp = stamp
            self._settled = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        return self._settled

    def settled(self, trial: Trial) -> Settled | None:
        """Which settled alarms leave ``trial`` unneeded (None: it is needed; :class:`~.policy.Settling`)."""
        settled = self.current()
        return settled_by(settled, covering_alarms(self.alarms, trial)) if settled else None

    def check(self, experiment: str, params: Mapping[str, Any]) -> None:
        """Raise :class:`AlarmsSettled` when every alarm covering this trial is settled."""
        if (found := self.settled(Trial(experiment, params))) is not None:
            raise found.skip()
