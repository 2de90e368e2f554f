"""The sequential gate's Message Batches, in rounds (``--longctx-sequential --longctx-batch``).

A whole batch would pay for every answer before the gate's first look. Here the planned requests go out round by
round, by sample group (the order the sequential gate looks in, :mod:`~pytest_longctx.dispatch.ordering`): round 1
holds the first sample groups with an eighth of the uncached requests (at least one group), and each later round
doubles the share covered (1/8, 1/4, 1/2, all: at most four rounds, and a decision pays at most about twice the
requests it needed). A controller thread runs the rounds:

1. submit the round's uncached requests (:func:`~pytest_longctx.dispatch.batch.submit_all`: as many batches as the
   provider's limits need), wait for them and collect their results into the response cache, exactly as a whole
   batch run does (errored, canceled and expired requests are errors of their trials, never wrong answers);
2. meanwhile the tests run in sample order; a test whose answer belongs to a later round waits for it
   (:class:`~pytest_longctx.dispatch.waiter.Waiter`);
3. once the gate has looked at every group of the round (``policy.looked()``, a
   :class:`~pytest_longctx.dispatch.policy.StopPolicy`), the next round goes out, unless the run
   stopped (the gate settled every alarm, a budget, -x, a signal): then nothing more is submitted, the work
   folder's stop file is written and the waiting tests end skipped with the reason.

The gate only learns from reports, and a round's tests wait for its batch, so a gate stop comes between rounds and
leaves no batch open. A stop while a batch runs (a signal, or groups answered from the cache settling the gate)
leaves it recorded in ``<cache-dir>/batches``, and the next run with the same cache collects it instead of paying
again; the record lists it (``open_at_stop``). With per-alarm stops (``--longctx-sequential-stop alarm``) a later
round leaves out the requests whose every trial only settled alarms cover (``dropped``). Memory holds the planned
keys, their sample index and their trials' experiment and params, never the requests (the plan is streamed, as in
:mod:`~pytest_longctx.dispatch.batch`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_longctx.backends.registry import provider_of
from pytest_longctx.dispatch.batch import BatchRun, WaitStopped, batch_api, resume, submit_all, wait_and_collect
from pytest_longctx.dispatch.batch_progress import StatusLine, printer
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.ordering import sample_of_nodeid
from pytest_longctx.dispatch.plan import read_plan
from pytest_longctx.dispatch.policy import StopPolicy, Trial
from pytest_longctx.dispatch.workdir import error_path, stopped_path, write_error
from pytest_longctx.errors import UsageError

if TYPE_CHECKING:
    from pytest_longctx.run_settings import Settings

#: Round 1 holds 1 / FIRST_SHARE of the requests (whole sample groups); each later round doubles the share covered.
FIRST_SHARE = 8


def round_ends(requests: Sequence[int], first_share: int = FIRST_SHARE) -> list[int]:
    """Groups covered at the end of each round, from each sample group's uncached requests (in order): the fewest
    groups holding ``1 / first_share`` of the requests, then twice that share, and so on; the last round all of
    them. By requests, not groups: an experiment with few sample groups (qa's 20, beside litm's 180) would
    otherwise be paid for whole in round 1."""
    total, groups = sum(requests), len(requests)
    if groups == 0:
        return []
    ends: list[int] = []
    cumulative, end, share = 0, 0, 1 / first_share
    while share < 1:
        while end < groups and cumulative < share * total:
            cumulative += requests[end]
            end += 1
        if end >= groups:
            break
        if not ends or end > ends[-1]:
            ends.append(max(end, 1))
        share *= 2
    return [*ends, groups]


class BatchRounds:
    """Controller: runs the rounds in a thread; :meth:`prepare` first (keys.txt for the workers), then :meth:`start`.

    ``policy``: the sequential gate's (how far it has looked, whether the run stopped, which trials only settled
    alarms cover: a later round leaves their requests out).
    """

    def __init__(self, settings: Settings, cache: ResponseCache, work: Path, plan_file: Path, policy: StopPolicy,
                 status: StatusLine | None = None, client: Any = None) -> None:
        self.settings, self.cache, self.work, self.plan_file = settings, cache, work, plan_file
        self.policy = policy
        self.out = status or printer(print)
        self.api = batch_api(settings, client)
        self.run = BatchRun(spec=settings.model.spec)
        #: per round: its keys (uncached, not in an earlier run's open batch) and the last sample index it covers
        self._keys: list[set[str]] = []
        self._last: list[int] = []
        self._resumed: dict[str, dict[str, Any]] = {}
        self.rounds: list[dict[str, Any]] = []
        self.stopped: str | None = None
        self.open_at_stop: list[str] = []
        self.failure: str | None = None
        self._open: dict[str, dict[str, Any]] = {}
        self._current: set[str] = set()  # the keys of the round under way
        self._cancel = threading.Event()
        self.cancelled: str | None = None
        self._thread: threading.Thread | None = None
        #: per key: the trials that ask it (for per-alarm stops)
        self._owners: dict[str, list[Trial]] = {}
        self.dropped = 0

    def prepare(self) -> None:
        """Read the plan (a stream: keys and sample indexes only), write keys.txt, resume earlier runs' batches."""
        first: dict[str, int] = {}  # key -> the sample index of the first test that asks it (-1: none)
        for planned in read_plan(self.plan_file):
            key = planned.key
            if planned.trial is not None and self.cache.get(key) is None:
                self._owners.setdefault(key, []).append(planned.trial)
            if key not in first and self.cache.get(key) is None:
                sample = sample_of_nodeid(planned.test)
                first[key] = -1 if sample is None else sample
        (self.work / "keys.txt").write_text("\n".join(sorted(first)), encoding="utf-8")
        self._resumed = resume(self.api, self.settings.cache_dir, self.settings.model.name, first, self.run, self.out)
        in_flight = {key for state in self._resumed.values() for key in state["keys"]}
        per_sample = Counter(s for s in first.values() if s >= 0)
        samples = sorted(per_sample)
        ends = round_ends([per_sample[s] for s in samples])
        self._last = [samples[end - 1] for end in ends] or [-1]
        self._keys = [set() for _ in self._last]
        bound: dict[int, int] = {}
        index = 0
        for sample in samples:  # each sample's round: the first whose last sample is at or after it
            while self._last[index] < sample:
                index += 1
            bound[sample] = index
        for key, sample in first.items():
            if key not in in_flight:
                self._keys[bound.get(sample, 0)].add(key)  # no sample index: round 1

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="longctx-batch-rounds", daemon=True)
        self._thread.start()

    def cancel(self, reason: str) -> None:
        """Stop waiting, from any thread: nothing more is submitted; an open batch stays recorded for the next run."""
        self.cancelled = self.cancelled or reason
        self._cancel.set()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def finish(self) -> None:
        """The run's tests have all reported: end the thread (a round still awaited can no longer be asked for)."""
        if self._thread is not None and self._thread.is_alive():
            self.cancel(self.policy.stopped() or "the run ended")
        self.join()

    def _main(self) -> None:
        try:
            self._rounds()
        except WaitStopped:  # (wait_and_collect said which batches stay recorded for the next run)
            self.open_at_stop = sorted(self._open)
        except Exception as exc:  # the API failed after its retries: the round's waiting tests get the one line
            self.failure = str(exc) if isinstance(exc, UsageError) else f"--longctx-batch: {type(exc).__name__}: {exc}"
            self.open_at_stop = sorted(self._open)
            self._fail_waiting(self.failure)
        finally:
            self._note_stop(self.failure)
            (self.work / "done").touch()

    def _rounds(self) -> None:
        model = self.settings.model.name
        for number, (keys, last) in enumerate(zip(self._keys, self._last, strict=True), 1):
            if number > 1 and not self._wait_for_gate(self._last[number - 2]):
                return
            if self._stop_reason() is not None:
                return
            keys = self._needed(keys)
            self._current = keys
            relevant = dict(self._resumed) if number == 1 else {}
            self.rounds.append({"round": number, "last_sample": last, "requests": 0, "planned": len(keys),
                                "batches": [], "resumed": sorted(relevant), "collected": False})
            self.out.line(f"longctx batch: round {number} of {len(self._keys)}: {len(keys):,} requests of the sample "
                          f"groups up to s{last}" + (f" ({len(relevant)} earlier batches resumed)" if relevant else ""))
            self._open = relevant
            for state in submit_all(self.api, model, self.plan_file, set(keys), self.settings.cache_dir, self.work,
                                    self.run, self.out):
                relevant[state["id"]] = state
                self.rounds[-1]["batches"].append(state["id"])
                self.rounds[-1]["requests"] += len(state["keys"])  # submitted: a budget may cut the round short
            wait_and_collect(self.api, provider_of(self.settings.model).name, relevant, self.cache, self.work, self.run,
                             self.settings.cache_dir, self.out, pause=self._pause)
            self._open = {}
            self.rounds[-1]["collected"] = True
            if self.run.refused is not None:  # the budget cut this round: no later round, its other tests skip
                self._note_stop(self.run.refused)
                return

    def _needed(self, keys: set[str]) -> set[str]:
        """A later round leaves out the requests whose every trial only settled alarms cover (per-alarm stops)."""
        settled = self.policy.settled
        kept = {key for key in keys
                if not (owners := self._owners.get(key)) or any(settled(trial) is None for trial in owners)}
        self.dropped += len(keys) - len(kept)
        return kept

    def _stop_reason(self) -> str | None:
        return self.cancelled or self.policy.stopped()

    def _wait_for_gate(self, sample: int) -> bool:
        """Until the gate has looked at every group up to ``sample`` (True) or the run stopped (False)."""
        while True:
            looked, stop = self.policy.looked(), self.policy.stopped()
            if stop is not None or self.cancelled is not None:
                return False
            if looked >= sample:
                return True
            if self._cancel.wait(0.02):
                return False

    def _pause(self, seconds: float) -> None:
        """Between polls of open batches: write the stop file once the run stops; raise when cancelled."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self._note_stop()
            if self._cancel.wait(min(left, 0.05)):
                raise WaitStopped

    def _note_stop(self, failure: str | None = None) -> None:
        """Once the run stops (or ``failure``: the API failed, or the budget cut a round): the waiting tests end
        skipped with why (answers already collected are used)."""
        reason = failure or self._stop_reason()
        if reason is not None and self.stopped is None:
            self.stopped = reason
            stopped_path(self.work).write_text(reason, encoding="utf-8")

    def _fail_waiting(self, message: str) -> None:
        """The round's requests still without an answer end as errors (fatal: the run stops, exit 2)."""
        for key in sorted(self._current):
            if self.cache.get(key) is None and not error_path(self.work, key).exists():
                write_error(self.work, key, message, True)

    def to_json(self) -> dict[str, Any]:
        """The batch part of the record: what a whole batch run records, and the rounds."""
        return {**self.run.to_json(), "rounds": self.rounds, "rounds_planned": len(self._keys),
                "rounds_sent": len(self.rounds), "dropped": self.dropped, "stopped": self.stopped,
                "open_at_stop": self.open_at_stop, "failure": self.failure}
