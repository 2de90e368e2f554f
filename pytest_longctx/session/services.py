"""What the controller starts once for all workers: the local model server, prefetch, batches."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY

REMOTE = ("anthropic", "openai")


def start_local_server(config: pytest.Config) -> None:
    settings = config.stash[SETTINGS_KEY]
    shared = config.stash[SHARED_KEY]
    if (settings.model.provider != "local" and settings.judge.provider != "local") or shared.local_url:
        return
    from pytest_longctx.backends.local_server import URL_ENV, LocalModelServer

    if os.environ.get(URL_ENV):  # a server the user (or a test) already runs: share it, start none
        shared.local_url = os.environ[URL_ENV].rstrip("/")
        return
    name = settings.model.name if settings.model.provider == "local" else settings.judge.name
    server = LocalModelServer(name, cache_dir=settings.cache_dir)
    shared.local_url = server.start()
    config.stash[RUN_KEY].server = server


def settle_tokenizer(config: pytest.Config) -> None:
    """openai/*: probe the server's ``/tokenize`` once, here, before any other process starts.

    Workers and the plan child inherit the answer (``$LONGCTX_OPENAI_TOKENIZE``), so they all size contexts
    with the same tokenizer even when the server is too busy to answer a probe quickly. A user's own value
    wins; an unreachable server is left to the trials (they stop the run, naming it).
    """
    from pytest_longctx.backends.openai_compat import TOKENIZE_ENV, OpenAIBackend
    from pytest_longctx.errors import BackendError, FatalBackendError

    s = config.stash[SETTINGS_KEY]
    spec = s.model if s.model.provider == "openai" else s.judge
    if spec.provider != "openai" or os.environ.get(TOKENIZE_ENV) in ("0", "1"):
        return
    backend = OpenAIBackend(spec.name)
    try:
        os.environ[TOKENIZE_ENV] = "1" if backend.server_tokenizes() else "0"
    except FatalBackendError as exc:  # a dead endpoint or a refused key: stop here, before anything else starts
        from pytest_longctx.session.stopping import request_stop

        request_stop(config, f"{type(exc).__name__}: {exc}")
        return
    except BackendError:
        return
    finally:
        backend.close_sync()

    def forget() -> None:  # this run's answer, not the next in-process run's
        os.environ.pop(TOKENIZE_ENV, None)

    config.add_cleanup(forget)


def prefetch_wanted(config: pytest.Config) -> bool:
    s = config.stash[SETTINGS_KEY]
    if s.plan or os.environ.get("LONGCTX_CHILD") or s.cache == "off" or config.stash[RUN_KEY].stop_reason:
        return False
    if s.batch:
        return True
    if s.prefetch == "on":
        return True
    return s.prefetch == "auto" and s.model.provider in REMOTE and s.cache == "on"


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
        dispatcher = Dispatcher(backend, cache, work, plan_path(work), concurrency=s.max_concurrency)
        state.dispatcher = dispatcher  # from now on a stop (SIGINT, -x, fatal error) cancels it
    try:
        meanwhile = dispatcher.start_streaming if dispatcher else lambda: _preload_sdk(s.model.provider)
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
    if s.batch:
        from pytest_longctx.dispatch.batch import run_batches

        tw = config.get_terminal_writer()
        state.batch = run_batches(s, cache, work, plan_file, log=tw.line)
        (work / "done").touch()
    else:
        assert dispatcher is not None
        dispatcher.plan_finished(ok=True)
    shared.prefetch_dir = str(work)


def _preload_sdk(provider: str) -> None:
    """Import the provider's SDK (seconds for ``anthropic``) while the child plans, not after it."""
    if provider == "anthropic":
        import anthropic  # noqa: F401


def stop_prefetch(config: pytest.Config) -> None:
    """Cancel the dispatcher (nothing starts after this) and wait until its thread has ended; no timed give-up."""
    state = config.stash[RUN_KEY]
    if state.dispatcher is not None:
        state.dispatcher.cancel(state.stop_reason or "the run ended")
        state.dispatcher.join()


def stop_services(config: pytest.Config) -> None:
    """End of the run: the dispatcher first (joined before its work folder goes), then the local server."""
    state = config.stash[RUN_KEY]
    stop_prefetch(config)
    state.dispatcher = None
    if state.server is not None:
        state.server.stop()
        state.server = None
    for folder in (state.prefetch_work, config.stash[SHARED_KEY].prefetch_dir):
        if folder and Path(folder).is_dir():
            shutil.rmtree(folder, ignore_errors=True)
    stop_file = config.stash[SHARED_KEY].stop_file
    if stop_file:
        Path(stop_file).unlink(missing_ok=True)
