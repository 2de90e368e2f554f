"""Stop means stop (controller side): SIGINT/SIGTERM, ``-x``/``--maxfail`` and fatal API errors end a run at once.

A first Ctrl-C (SIGINT) lets the prefetch requests already in flight be answered and kept (they are paid for, so the
record's tokens and dollars are what the API billed); a second one, or SIGTERM, abandons them (counted at their
estimate).

The first reason wins: it goes into the run record (``"stopped"``) and the run exits 2 (interrupted). The
prefetch dispatcher is cancelled the moment a stop is known, so no request starts after it; answers already
received stay in the cache; its thread is joined before its work folder is removed (``services.stop_services``).
Workers that send their own requests (no prefetch: ``--longctx-prefetch off``, cache off or refresh) check a
stop file the controller creates (``<cache-dir>/stops/<run>``) right before each request; a test whose answer
will not come ends skipped (:class:`~pytest_longctx.dispatch.skips.RunStopped`), not as an error.

The signal handlers are installed once requests may go out (``services.ModelServices.start``), even when SIGINT was
inherited as ignored (a ``pytest ... &`` job of a script): a run that spends money stops when told.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from pytest_longctx.dispatch.ledger import Ledger
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY

#: Signals that stop a run with a record (SIGTERM: CI cancellation, ``timeout``, ``kill``).
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def request_stop(config: pytest.Config, reason: str, *, drain: bool = False) -> None:
    """Record why the run stops (the first reason wins), cancel the prefetch dispatcher and create the stop file
    (workers sending their own requests check it before each one); safe in a signal handler. ``drain`` (a budget
    stop): the dispatcher's requests in flight are answered and used, not abandoned (they are paid for)."""
    state = config.stash[RUN_KEY]
    first = state.stop_reason is None
    if first:
        state.stop_reason = reason
    if state.dispatcher is not None:
        state.dispatcher.cancel(state.stop_reason or reason, drain=drain)
    stop_file = config.stash[SHARED_KEY].stop_file
    if first and stop_file:
        try:
            Path(stop_file).parent.mkdir(parents=True, exist_ok=True)
            Path(stop_file).write_text(reason, encoding="utf-8")
        except OSError as exc:
            state.notes.append(f"could not tell the workers to stop ({stop_file}: {exc.strerror or exc})")


def create_ledger(config: pytest.Config) -> None:
    """The run's ledger beside its stop file: the budget and the price of every model it may call (the plan's tally
    prices at the same prices, and adds judge calls at the judge's)."""
    s = config.stash[SETTINGS_KEY]
    specs = dict.fromkeys((*s.models, s.model, s.judge))
    ledger = Ledger.create(Path(f"{config.stash[SHARED_KEY].stop_file}.ledger"), s.budget,
                           {spec.spec: s.price(spec) for spec in specs})
    state = config.stash[RUN_KEY]
    state.display.ledger = ledger  # the progress line counts what the ledger counts
    state.plan.prices = {spec.spec: s.price(spec) for spec in specs}  # --longctx-plan prices at the same prices
    state.plan.judge = s.judge.spec


def budget_stop(config: pytest.Config) -> None:
    """Controller: once the ledger refused a request (the budget is reached), the run stops as a budget stop."""
    ledger = Ledger.beside(config.stash[SHARED_KEY].stop_file)
    state = config.stash[RUN_KEY]
    if ledger is not None and state.stop_reason is None and (reason := ledger.stop_reason()) is not None:
        request_stop(config, reason, drain=True)


def stop_prefetch(config: pytest.Config) -> None:
    """Cancel the dispatcher (nothing starts after this) and wait until its thread has ended; no timed give-up."""
    state = config.stash[RUN_KEY]
    if state.dispatcher is not None:
        state.dispatcher.cancel(state.stop_reason or "the run ended")
        state.dispatcher.join()


def stop_file_path(config: pytest.Config) -> Path:
    """Where this run's stop file goes (one per controller process and start)."""
    return config.stash[SETTINGS_KEY].cache_dir / "stops" / f"{os.getpid()}-{int(time.time() * 1000)}"


def maxfail_reason(config: pytest.Config) -> str:
    """``-x: first failure`` or ``--maxfail=N: N failures``."""
    limit = config.getvalue("maxfail")
    return "-x: first failure" if limit == 1 else f"--maxfail={limit}: {limit} failures"


def check_maxfail(session: pytest.Session) -> None:
    """After pytest counted a failed report (its own hook runs first): the ``-x``/``--maxfail`` limit stops the run.

    pytest alone would finish the test in progress and leave prefetch sending; under xdist the controller's
    session counts the workers' reports too, so this holds with ``-n`` as well.
    """
    state = session.config.stash[RUN_KEY]
    if session.shouldfail and state.stop_reason is None and (state.services_started or state.aggregator.trials):
        request_stop(session.config, maxfail_reason(session.config))


def settle(session: pytest.Session) -> None:
    """Before the record is written: name the stop of an interrupted run and wait for prefetch to end.

    (Exit 2 is set last, in ``controller.ControllerLast.pytest_sessionfinish``: plugins that OR exit codes run in
    between.)
    """
    config = session.config
    state = config.stash[RUN_KEY]
    if config.stash[SETTINGS_KEY].budget is not None:
        budget_stop(config)  # a request refused after the last report (the prefetch lanes run ahead)
    if state.stop_reason is None and session.exitstatus == pytest.ExitCode.INTERRUPTED:
        request_stop(config, str(session.shouldstop or session.shouldfail or "interrupted"))
    if state.stop_reason is None:
        return
    handler = config.stash.get(SIGNALS_KEY, None)
    if handler is not None and handler.draining:  # here, not in the handler: a test's capture would swallow it
        state.display.say("stopping: the requests in flight are answered and kept (they are paid for); "
                          "Ctrl-C again abandons them")
    stop_prefetch(config)  # its counters in the record are final, its answers in the cache


@dataclass
class SignalStop:
    """SIGINT and SIGTERM on the controller: note why, cancel prefetch, then interrupt pytest as Ctrl-C does."""

    config: pytest.Config
    previous: dict[int, Any] = field(default_factory=dict)
    #: A first Ctrl-C drains the requests in flight (prefetch): :func:`settle` says so before it waits for them.
    draining: bool = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread (e.g. an embedding that runs pytest)
        for signum in SIGNALS:
            self.previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self.previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        """The first SIGINT drains: no request starts, those in flight are answered and kept (they are paid for, and
        the record then counts what the API billed); SIGTERM, or a second signal, abandons them at once."""
        first = self.config.stash[RUN_KEY].stop_reason is None
        drain = first and signum == signal.SIGINT
        request_stop(self.config, f"interrupted by {signal.Signals(signum).name}", drain=drain)
        self.draining = drain and self.config.stash[RUN_KEY].dispatcher is not None  # said by settle(), uncaptured
        if first:
            raise KeyboardInterrupt


SIGNALS_KEY = pytest.StashKey[SignalStop]()


def install_signals(config: pytest.Config) -> None:
    """Controller, when requests may start going out: the stop file's path for the workers, the run's ledger
    beside it (budget and prices: ``dispatch/ledger.py``), and the handlers."""
    config.stash[SHARED_KEY].stop_file = str(stop_file_path(config))
    create_ledger(config)
    handler = SignalStop(config)
    handler.install()
    config.stash[SIGNALS_KEY] = handler


def restore_signals(config: pytest.Config) -> None:
    handler = config.stash.get(SIGNALS_KEY, None)
    if handler is not None:
        handler.restore()
