"""What the controller starts once for all workers: the local model server, prefetch, batches."""

from __future__ import annotations

import importlib
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_longctx.backends.registry import load, provider_of
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY
from pytest_longctx.session.stopping import request_stop, stop_prefetch

if TYPE_CHECKING:
    from pytest_longctx.backends.model_spec import ModelSpec


def start_local_server(config: pytest.Config) -> None:
    """The shared model server, when the model (or else the judge) is served by one and none is known yet."""
    settings = config.stash[SETTINGS_KEY]
    shared = config.stash[SHARED_KEY]
    served = [spec for spec in (*settings.models, settings.model, settings.judge) if provider_of(spec).local_server]
    if not served or shared.local_url:
        return
    from pytest_longctx.backends import start_model_server

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
    from pytest_longctx.errors import FatalBackendError

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
    from pytest_longctx.backends import build_backend
    from pytest_longctx.dispatch.cache import ResponseCache
    from pytest_longctx.dispatch.prefetch import Dispatcher
    from pytest_longctx.session.plan_child import PlanFailed, PlanUsageError, plan_args, plan_path, run_plan

    s = config.stash[SETTINGS_KEY]
    shared = config.stash[SHARED_KEY]
    state = config.stash[RUN_KEY]
    work = s.cache_dir / "prefetch" / f"{os.getpid()}-{int(time.time() * 1000)}"
    state.prefetch_work = work  # removed by stop_services, however the run ends
    cache = ResponseCache(s.cache_dir)
    dispatcher = None
    if not s.batch:  # send while the child plans; workers start only once the plan (keys.txt) is complete
        options = {**shared.backend_options(s.model), "max_concurrency": s.max_concurrency}
        backend = build_backend(s.model, context_window=s.context_window, **options)
        from pytest_longctx.dispatch.ledger import Ledger
        from pytest_longctx.session.gate_policy import gate_policy

        # debited in the ledger before each request goes out; --longctx-sequential: a window ahead of the reported
        # tests, and no request for trials only settled alarms cover
        dispatcher = Dispatcher(backend, cache, work, plan_path(work), concurrency=s.max_concurrency,
                                ledger=Ledger.beside(shared.stop_file), policy=gate_policy(config))
        state.dispatcher = dispatcher  # from now on a stop (SIGINT, -x, fatal error) cancels it
    state.display.say("planning the run in a child process (every request built, none sent by it); "
                      + ("then the uncached ones go out as Message Batches"
                         + (", in rounds the sequential gate looks between" if s.sequential else "") if s.batch else
                         f"the uncached ones go out as they are planned, {s.max_concurrency} in flight"))
    try:
        meanwhile = dispatcher.start_streaming if dispatcher else lambda: _preload_sdk(s.model)
        plan_file = run_plan(plan_args(config), Path(config.invocation_params.dir), work, meanwhile=meanwhile)
    except PlanFailed as exc:
        if dispatcher is not None:
            dispatcher.plan_finished(ok=False)  # requests already sent still land in the cache
            dispatcher.join()
            state.dispatcher = None
        from pytest_longctx.errors import UsageError

        if isinstance(exc, PlanUsageError):
            shutil.rmtree(work, ignore_errors=True)
            raise UsageError(str(exc)) from None
        if s.batch:
            raise UsageError(f"--longctx-batch: {exc}") from None
        state.notes.append(f"prefetch off: {exc}")
        shutil.rmtree(work, ignore_errors=True)
        return
    from pytest_longctx.session.gate_policy import gate_policy

    gate = gate_policy(config) if s.batch else None
    if gate is not None:  # --longctx-sequential: in rounds, a thread beside the tests (dispatch/batch_rounds.py)
        from pytest_longctx.dispatch.batch_progress import StatusLine
        from pytest_longctx.dispatch.batch_rounds import BatchRounds

        tw = config.get_terminal_writer()
        # per-alarm stops: no later round asks for trials only settled alarms cover
        lane = BatchRounds(s, cache, work, plan_file, gate, StatusLine(lambda text: tw.write(text, flush=True),
                                                                         tty=False))
        from pytest_longctx.dispatch.ledger import Ledger

        lane.run.ledger = Ledger.beside(shared.stop_file)  # each request debited at the batch price before a round
        lane.prepare()
        state.batch = lane
        lane.start()
    elif s.batch:
        from pytest_longctx.dispatch.batch import run_batches
        from pytest_longctx.dispatch.batch_progress import StatusLine

        tw = config.get_terminal_writer()
        tty = bool(getattr(config.pluginmanager.get_plugin("terminalreporter"), "isatty", False))
        from pytest_longctx.dispatch.ledger import Ledger

        state.batch = run_batches(s, cache, work, plan_file, StatusLine(lambda text: tw.write(text, flush=True), tty),
                                  ledger=Ledger.beside(shared.stop_file))
        (work / "done").touch()
    else:
        assert dispatcher is not None
        dispatcher.plan_finished(ok=True)
    shared.prefetch_dir = str(work)


def _preload_sdk(spec: ModelSpec) -> None:
    """Import the provider's SDK (``Provider.sdk``: seconds to import) while the child plans, not after it."""
    if sdk := provider_of(spec).sdk:
        importlib.import_module(sdk)


def stop_services(config: pytest.Config) -> None:
    """End of the run: the dispatcher first (joined before its work folder goes), then the local server."""
    state = config.stash[RUN_KEY]
    stop_prefetch(config)
    state.dispatcher = None
    if hasattr(state.batch, "finish"):  # the batch rounds' thread, joined before its work folder goes
        state.batch.finish()
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
