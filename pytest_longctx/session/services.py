"""What the controller starts once for all workers, a plugin object registered only when a model is used (not with
``--collect-only`` or ``--help``): the local model server, prefetch, batches; their inputs checked before any of
them starts, and all of it stopped when the run ends."""

from __future__ import annotations

import importlib
import os
import shutil
import time
from pathlib import Path

import pytest

from pytest_longctx.backends import build_backend, missing_key_message, start_model_server
from pytest_longctx.backends.model_spec import ModelSpec
from pytest_longctx.backends.registry import load, provider_of
from pytest_longctx.dispatch.batch import BatchRun, run_batches
from pytest_longctx.dispatch.batch_progress import StatusLine
from pytest_longctx.dispatch.batch_rounds import BatchRounds
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.ledger import Ledger
from pytest_longctx.dispatch.prefetch import Dispatcher
from pytest_longctx.errors import FatalBackendError, UsageError
from pytest_longctx.run_settings import Settings
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY, RunState
from pytest_longctx.session.plan_child import PlanFailed, PlanUsageError, plan_args, plan_path, run_plan
from pytest_longctx.session.preflight import check_gate_inputs
from pytest_longctx.session.sequential_gate import gate_of
from pytest_longctx.session.stopping import install_signals, request_stop, restore_signals, stop_prefetch
from pytest_longctx.util.fsutil import folder_problem


class ModelServices:
    """Controller: checks what sending needs at configure time, starts the shared services once the longctx tests
    are collected (or, under xdist, before the workers start), stops them when the run ends."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings: Settings = config.stash[SETTINGS_KEY]

    @property
    def _state(self) -> RunState:
        return self.config.stash[RUN_KEY]

    def check_inputs(self) -> None:
        """Compared run, relative thresholds, report dir and cache dir: a bad one is a usage error before anything
        is sent (the cache must be usable: answers are never paid for and then dropped)."""
        s = self.settings
        try:
            self._state.baseline = check_gate_inputs(s)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        if s.cache == "off":
            return
        problem = folder_problem(s.cache_dir, write=s.cache != "replay")
        if problem is not None:
            raise pytest.UsageError(f"--longctx-cache-dir: {s.cache_dir} {problem}; pass a writable folder "
                                    "(or --longctx-cache off)")

    def check_keys(self) -> None:
        """This run's plan file starts empty (not the last run's as well); a provider's missing key is a usage
        error (unless nothing is sent: a plan, or a replay)."""
        s = self.settings
        if s.plan_out is not None:
            s.plan_out.parent.mkdir(parents=True, exist_ok=True)
            s.plan_out.write_text("", encoding="utf-8")
        if s.plan or s.cache == "replay":
            return
        for spec in dict.fromkeys((s.model, *s.models)):
            message = missing_key_message(spec.provider)  # None for a provider that needs no key
            if message is not None:
                raise pytest.UsageError(message)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Without xdist, after the run controller checked the collected cells: start only when longctx tests
        were collected."""
        if any(item.get_closest_marker("longctx") for item in session.items):
            self.start()

    def start(self) -> None:
        """Start what workers share (local model server, prefetch or batch) once, before them."""
        state = self._state
        if state.services_started:
            return
        state.services_started = True
        install_signals(self.config)  # from here on requests may go out: SIGINT/SIGTERM record why, cancel, exit 2
        try:
            start_local_server(self.config)
            settle_tokenizer(self.config)
            start_prefetch(self.config)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """After the run controller's own end (registered before it, so called after it)."""
        try:
            stop_services(config)
        finally:
            restore_signals(config)


def start_local_server(config: pytest.Config) -> None:
    """The shared model server, when the model (or else the judge) is served by one and none is known yet."""
    settings = config.stash[SETTINGS_KEY]
    shared = config.stash[SHARED_KEY]
    served = [spec for spec in (*settings.models, settings.model, settings.judge) if provider_of(spec).local_server]
    if not served or shared.local_url:
        return
    display = config.stash[RUN_KEY].display
    started = time.monotonic()
    display.say(f"starting the model server for {served[0].spec} (loading and checking its weights) ...")
    shared.local_url, server = start_model_server(served[0], settings.cache_dir)
    if server is not None:  # None: a server the user (or a test) already runs is shared, none started
        config.stash[RUN_KEY].server = server
    display.say(f"model server ready at {shared.local_url} ({time.monotonic() - started:.1f} s)")


def settle_tokenizer(config: pytest.Config) -> None:
    """Each provider's start-up step (``Provider.settle``, e.g. which tokenizer every process uses), once per
    provider of the model and the judge, here on the controller, before any other process starts."""
    s = config.stash[SETTINGS_KEY]
    settled: set[str] = set()
    for spec in (s.model, *s.models, s.judge):
        provider = provider_of(spec)
        if not provider.settle or provider.name in settled:
            continue
        settled.add(provider.name)
        try:
            cleanup = load(provider.settle)(spec.name)
        except FatalBackendError as exc:  # a dead endpoint or a refused key: stop here, before anything else starts
            request_stop(config, f"{type(exc).__name__}: {exc}")
            return
        if cleanup is not None:  # this run's answer, not the next in-process run's
            config.add_cleanup(cleanup)


def prefetch_wanted(config: pytest.Config) -> bool:
    s = config.stash[SETTINGS_KEY]
    if s.plan or os.environ.get("LONGCTX_CHILD") or s.cache == "off" or config.stash[RUN_KEY].stop_reason:
        return False
    if s.several:  # the dispatcher sends one model's requests (docs/several-models.md)
        return False
    if s.batch:
        return True
    if s.prefetch == "on":
        return True
    return s.prefetch == "auto" and provider_of(s.model).remote and s.cache == "on"


def start_prefetch(config: pytest.Config) -> None:
    """Plan the run in a child process, then send (or batch) every uncached request up front."""
    if not prefetch_wanted(config):
        return
    s, shared, state = config.stash[SETTINGS_KEY], config.stash[SHARED_KEY], config.stash[RUN_KEY]
    work = s.cache_dir / "prefetch" / f"{os.getpid()}-{int(time.time() * 1000)}"
    state.prefetch_work = work  # removed by stop_services, however the run ends
    cache = ResponseCache(s.cache_dir)
    # send while the child plans; workers start only once the plan (keys.txt) is complete
    dispatcher = None if s.batch else _dispatcher(config, cache, work)
    state.display.say("planning the run in a child process (every request built, none sent by it); "
                      + ("then the uncached ones go out as Message Batches"
                         + (", in rounds the sequential gate looks between" if s.sequential else "") if s.batch else
                         f"the uncached ones go out as they are planned, {s.max_concurrency} in flight"))
    try:
        meanwhile = dispatcher.start_streaming if dispatcher else lambda: _preload_sdk(s.model)
        plan_file = run_plan(plan_args(config), Path(config.invocation_params.dir), work, meanwhile=meanwhile)
    except PlanFailed as exc:
        _plan_failed(state, s, work, exc)
        return
    if dispatcher is not None:
        dispatcher.plan_finished(ok=True)
    else:
        _start_batches(config, cache, work, plan_file)
    shared.prefetch_dir = str(work)


def _dispatcher(config: pytest.Config, cache: ResponseCache, work: Path) -> Dispatcher:
    """The prefetch dispatcher, debiting the run's ledger before each request; with the sequential gate, kept a
    window ahead of the reported tests and sending no request for trials only settled alarms cover."""
    s, shared, state = config.stash[SETTINGS_KEY], config.stash[SHARED_KEY], config.stash[RUN_KEY]
    options = {**shared.backend_options(s.model), "max_concurrency": s.max_concurrency}
    backend = build_backend(s.model, context_window=s.context_window, **options)
    gate = gate_of(config)
    # debited in the ledger before each request goes out; --longctx-sequential: a window ahead of the reported
    # tests, and no request for trials only settled alarms cover
    dispatcher = Dispatcher(backend, cache, work, plan_path(work), concurrency=s.max_concurrency,
                            ledger=Ledger.beside(shared.stop_file), policy=gate.policy() if gate is not None else None)
    state.dispatcher = dispatcher  # from now on a stop (SIGINT, -x, fatal error) cancels it
    return dispatcher


def _plan_failed(state: RunState, s: Settings, work: Path, exc: PlanFailed) -> None:
    """The plan child failed: requests already sent still land in the cache; bad input is a usage error, a batch
    cannot go on, else the run goes on without prefetch (noted)."""
    if state.dispatcher is not None:
        state.dispatcher.plan_finished(ok=False)
        state.dispatcher.join()
        state.dispatcher = None
    if isinstance(exc, PlanUsageError):
        shutil.rmtree(work, ignore_errors=True)
        raise UsageError(str(exc)) from None
    if s.batch:
        raise UsageError(f"--longctx-batch: {exc}") from None
    state.notes.append(f"prefetch off: {exc}")
    shutil.rmtree(work, ignore_errors=True)


def _start_batches(config: pytest.Config, cache: ResponseCache, work: Path, plan_file: Path) -> None:
    """--longctx-batch: all at once, or with the sequential gate in rounds, a thread beside the tests
    (``dispatch/batch_rounds.py``); each request debited at the batch price before it is submitted."""
    s, state = config.stash[SETTINGS_KEY], config.stash[RUN_KEY]
    ledger = Ledger.beside(config.stash[SHARED_KEY].stop_file)
    tw = config.get_terminal_writer()
    gate = gate_of(config)
    policy = gate.policy() if gate is not None else None
    if policy is not None:  # per-alarm stops: no later round asks for trials settled alarms cover
        lane = BatchRounds(s, cache, work, plan_file, policy, StatusLine(lambda text: tw.write(text, flush=True),
                                                                         tty=False))
        lane.run.ledger = ledger
        lane.prepare()
        state.batch = state.rounds = lane
        lane.start()
        return
    tty = bool(getattr(config.pluginmanager.get_plugin("terminalreporter"), "isatty", False))
    state.batch = run = BatchRun(ledger=ledger, spec=s.model.spec)  # in the record, however the batches end
    try:
        run_batches(s, cache, work, plan_file, run, StatusLine(lambda text: tw.write(text, flush=True), tty))
    except UsageError as exc:
        if run.lost is not None:  # a batch that may exist and be billed: the stopped run's record says so
            request_stop(config, str(exc))
        raise
    (work / "done").touch()


def _preload_sdk(spec: ModelSpec) -> None:
    """Import the provider's SDK (``Provider.sdk``: seconds to import) while the child plans, not after it."""
    if sdk := provider_of(spec).sdk:
        importlib.import_module(sdk)


def stop_services(config: pytest.Config) -> None:
    """End of the run: the dispatcher first (joined before its work folder goes), then the local server."""
    state = config.stash[RUN_KEY]
    stop_prefetch(config)
    state.dispatcher = None
    if state.rounds is not None:  # the batch rounds' thread, joined before its work folder goes
        state.rounds.finish()
    if state.server is not None:
        state.server.stop()
        state.server = None
    for folder in (state.prefetch_work, config.stash[SHARED_KEY].prefetch_dir):
        if folder and Path(folder).is_dir():
            shutil.rmtree(folder, ignore_errors=True)
    stop_file = config.stash[SHARED_KEY].stop_file
    if stop_file:
        Path(stop_file).unlink(missing_ok=True)
        Path(f"{stop_file}.settled").unlink(missing_ok=True)  # the sequential gate's settled alarms
        Path(f"{stop_file}.ledger").unlink(missing_ok=True)  # the run's ledger (read into the record already)
        Path(f"{stop_file}.ledger.lock").unlink(missing_ok=True)
