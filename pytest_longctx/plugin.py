"""pytest11 entry point: thin hooks that delegate. Imports pytest and the standard library only
at module level, so ``pytest --help`` stays fast."""

from __future__ import annotations

import inspect
from collections.abc import Generator

import pytest

from pytest_longctx.keys import CELL_SAMPLES_KEY, RUN_KEY, SETTINGS_KEY, SHARED_KEY, RunState, Shared


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_longctx.options import add_options

    add_options(parser)


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from pytest_longctx.errors import UsageError
    from pytest_longctx.options import resolve

    config.addinivalue_line("markers", "longctx(experiment, exclude=()): a long-context eval test; "
                            "its parametrization defines the condition cell")
    try:
        settings = resolve(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SETTINGS_KEY] = settings
    if not config.pluginmanager.has_plugin("longctx-fixtures"):
        import importlib

        config.pluginmanager.register(importlib.import_module("pytest_longctx.fixtures"), "longctx-fixtures")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        config.stash[SHARED_KEY] = Shared(workers=int(workerinput.get("longctx_workers", 1)),
                                          local_url=workerinput.get("longctx_local_url"),
                                          prefetch_dir=workerinput.get("longctx_prefetch_dir"),
                                          max_concurrency=settings.max_concurrency, seed=settings.seed,
                                          exact_tokens=settings.exact_tokens, cache_dir=str(settings.cache_dir))
        return
    numprocesses = getattr(config.option, "numprocesses", None) or 0
    dist = getattr(config.option, "dist", "no")
    workers = int(numprocesses) if isinstance(numprocesses, int) and dist != "no" else 1
    config.stash[SHARED_KEY] = Shared(workers=max(1, workers), max_concurrency=settings.max_concurrency,
                                      seed=settings.seed, exact_tokens=settings.exact_tokens,
                                      cache_dir=str(settings.cache_dir))
    config.stash[RUN_KEY] = RunState()
    if settings.model.provider == "anthropic" and not settings.plan and _needs_model_process(config):
        import os

        from pytest_longctx.backends.anthropic import missing_key_message

        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise pytest.UsageError(missing_key_message())
    config.pluginmanager.register(_Controller(config), "longctx-controller")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "longctx-xdist")
    if config.pluginmanager.hasplugin("html"):
        from pytest_longctx.reporting.pytest_html import HtmlColumns

        config.pluginmanager.register(HtmlColumns(), "longctx-html")


def _needs_model_process(config: pytest.Config) -> bool:
    return not (config.option.collectonly or config.option.help)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without xdist, shared services start only when longctx tests were collected."""
    if _is_controller(session.config) and any(item.get_closest_marker("longctx") for item in session.items):
        _start_services(session.config)


def _start_services(config: pytest.Config) -> None:
    """Controller: start what workers share (local model server, prefetch or batch) once, before them."""
    state = config.stash[RUN_KEY]
    if state.services_started or not _needs_model_process(config):
        return
    state.services_started = True
    from pytest_longctx.errors import UsageError
    from pytest_longctx.services import start_local_server, start_prefetch

    try:
        start_local_server(config)
        start_prefetch(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


class _XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config) -> None:
        # The controller does not collect under xdist, so it starts shared services before the workers.
        _start_services(config)

    def pytest_configure_node(self, node: object) -> None:
        config: pytest.Config = node.config  # type: ignore[attr-defined]
        shared = config.stash[SHARED_KEY]
        node.workerinput["longctx_workers"] = shared.workers  # type: ignore[attr-defined]
        node.workerinput["longctx_local_url"] = shared.local_url  # type: ignore[attr-defined]
        node.workerinput["longctx_prefetch_dir"] = shared.prefetch_dir  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    from pytest_longctx.fixtures import SAMPLE_ARG

    marker = metafunc.definition.get_closest_marker("longctx")
    if marker is None:
        return
    if SAMPLE_ARG in metafunc.fixturenames:
        samples = metafunc.definition.stash.get(CELL_SAMPLES_KEY, metafunc.config.stash[SETTINGS_KEY].samples)
        metafunc.parametrize(SAMPLE_ARG, list(range(samples)), ids=[f"s{i}" for i in range(samples)])
    func = metafunc.function
    if inspect.iscoroutinefunction(func) and not any(
        getattr(m, "name", "") == "asyncio" for m in getattr(func, "pytestmark", [])
    ):
        # One event loop for the whole session, so clients never outlive their loop.
        pytest.mark.asyncio(loop_scope="session")(func)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    from pytest_longctx.outcomes import classify

    classify(item, call, report)
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    from pytest_longctx.aggregate import records_of

    if report.when not in ("call", "setup"):
        return None
    for record in records_of(report.user_properties):
        if record["outcome"] == "incorrect":
            return "incorrect", "i", "INCORRECT"
        if record["outcome"] == "error" and report.when == "call":
            return "error", "E", "ERROR"
    return None


class _Controller:
    """Controller-only hooks (not registered on xdist workers): aggregation, reports, the gate."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session: pytest.Session | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Runs for every report, including those xdist replays from workers."""
        from pytest_longctx.aggregate import records_of
        from pytest_longctx.outcomes import PLAN_KEY

        state = self.config.stash[RUN_KEY]
        for record in records_of(report.user_properties):
            state.aggregator.add(record)
            if record.get("fatal") and state.stop_reason is None:
                state.stop_reason = record["error"]
                if self.session is not None:
                    self.session.shouldstop = record["error"]
        state.plan.extend(v for k, v in report.user_properties if k == PLAN_KEY and isinstance(v, dict))
        if report.when == "teardown":
            self._progress(state)

    def _progress(self, state: RunState) -> None:
        """One progress line for the whole run (never one per worker), at most every 10 seconds."""
        import time

        now = time.time()
        if now - state.last_progress < 10 or now - state.started < 10 or not state.aggregator.usage()["trials"]:
            return
        state.last_progress = now
        from pytest_longctx.reporting.progress import progress_line

        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        total = self.session.testscollected if self.session is not None else 0
        if tr is not None:
            tr.write("\n")  # xdist prints progress letters itself, so the reporter's own newline check misses them
            tr.write_line(progress_line(state, self.config.stash[SETTINGS_KEY], total))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from pytest_longctx.run import finish_run

        finish_run(session)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        from pytest_longctx.reporting.terminal import write_summary

        write_summary(terminalreporter, self.config.stash[RUN_KEY], self.config.stash[SETTINGS_KEY])


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(RUN_KEY, None)
    if state is not None:
        from pytest_longctx.services import stop_services

        stop_services(config)
