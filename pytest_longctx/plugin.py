"""pytest11 entry point: thin hooks that delegate. Imports pytest and the standard library only
at module level, so ``pytest --help`` stays fast."""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from pytest_longctx.session.keys import CELL_SAMPLES_KEY, RUN_KEY, SETTINGS_KEY, SHARED_KEY, RunState, Shared

if TYPE_CHECKING:
    from pytest_longctx.run_settings import Settings


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The hooks experiments implement (see ``hookspecs.py``)."""
    from pytest_longctx.hookspecs import register

    register(pluginmanager)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_longctx.session.options import add_options

    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Bare switches (``--longctx-plan``, anywhere on the command line) get their value before pytest parses."""
    from pytest_longctx.session.option_group import settle_switches

    settle_switches(early_config, parser, args)


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from pytest_longctx.errors import UsageError
    from pytest_longctx.session.options import resolve

    config.addinivalue_line("markers", "longctx(experiment, exclude=()): a long-context eval test; "
                            "its parametrization defines the condition cell")
    from pytest_longctx.session.modes import check_settings

    try:
        settings = resolve(config)
        check_settings(settings)
        from pytest_longctx.session.sequential_gate import check as check_sequential

        check_sequential(settings)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SETTINGS_KEY] = settings
    _quiet_repeated_warnings(config, settings)
    from pytest_longctx.session.heap import freeze

    freeze(config)  # here, first: the thaw is then the run's last clean-up, after pytest's exit collections
    if not config.pluginmanager.has_plugin("longctx-fixtures"):
        import importlib

        config.pluginmanager.register(importlib.import_module("pytest_longctx.session.fixtures"), "longctx-fixtures")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        config.stash[SHARED_KEY] = Shared(workers=int(workerinput.get("longctx_workers", 1)),
                                          local_url=workerinput.get("longctx_local_url"),
                                          prefetch_dir=workerinput.get("longctx_prefetch_dir"),
                                          stop_file=workerinput.get("longctx_stop_file"),
                                          max_concurrency=settings.max_concurrency, seed=settings.seed,
                                          exact_tokens=settings.exact_tokens, cache_dir=str(settings.cache_dir),
                                          replay=settings.cache == "replay")
        return
    numprocesses = getattr(config.option, "numprocesses", None) or 0
    dist = getattr(config.option, "dist", "no")
    workers = int(numprocesses) if isinstance(numprocesses, int) and dist != "no" else 1
    config.stash[SHARED_KEY] = Shared(workers=max(1, workers), max_concurrency=settings.max_concurrency,
                                      seed=settings.seed, exact_tokens=settings.exact_tokens,
                                      replay=settings.cache == "replay",
                                      cache_dir=str(settings.cache_dir))
    from pytest_longctx.reporting.progress import Display

    config.stash[RUN_KEY] = RunState(display=Display(config))
    if _needs_model_process(config):
        _check_gate_inputs(config, settings)
        _check_cache_dir(settings)
        from pytest_longctx.session.sequential_gate import start as start_sequential

        start_sequential(config)  # --longctx-sequential: the alarms' e-processes, over the compared run's items
        if settings.plan_out is not None:  # this run's planned requests only, not the last run's as well
            settings.plan_out.parent.mkdir(parents=True, exist_ok=True)
            settings.plan_out.write_text("", encoding="utf-8")
    if not settings.plan and settings.cache != "replay" and _needs_model_process(config):
        from pytest_longctx.backends import missing_key_message  # None for a provider that needs no key

        for spec in dict.fromkeys((settings.model, *settings.models)):
            message = missing_key_message(spec.provider)
            if message is not None:
                raise pytest.UsageError(message)
    config.pluginmanager.register(_Controller(config), "longctx-controller")
    from pytest_longctx.reporting.errors import ErrorDigest

    config.pluginmanager.register(ErrorDigest(), "longctx-errors")
    if config.pluginmanager.hasplugin("xdist"):
        from pytest_longctx.session.crash import CrashRecorder

        config.pluginmanager.register(_XdistHooks(), "longctx-xdist")
        config.pluginmanager.register(CrashRecorder(), "longctx-crash")
    if config.pluginmanager.hasplugin("html"):
        from pytest_longctx.reporting.pytest_html import HtmlColumns

        config.pluginmanager.register(HtmlColumns(), "longctx-html")


def _quiet_repeated_warnings(config: pytest.Config, settings: Settings) -> None:
    """The SDK's per-request deprecation warning (``repeated_warnings``) is silenced in every process, in tests
    (an ini filter: pytest applies those inside each test) and outside them (the prefetch thread); the header
    says it once instead (``model_note``)."""
    import warnings

    from pytest_longctx.backends import repeated_warnings

    for spec in dict.fromkeys((settings.model, *settings.models, settings.judge)):
        for message in repeated_warnings(spec):
            config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")
            warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)


@pytest.hookimpl(tryfirst=True)  # pytest prints header lines in reverse call order: these come last
def pytest_report_header(config: pytest.Config) -> list[str]:
    """Which model runs, what it is, and what its SDK would otherwise repeat on every request."""
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None or not _is_controller(config):
        return []
    from pytest_longctx.backends import model_note

    lines = []
    roles = [("model", settings.model)] if not settings.several else [
        ("reference" if m == settings.model else "model", m) for m in settings.models]
    for role, spec in (*roles, ("judge", settings.judge)):
        if role == "judge" and spec == settings.model:
            continue
        note = model_note(spec)
        lines.append(f"longctx {role}: {spec.spec}" + (f": {note}" if note else ""))
    return lines


def _check_cache_dir(settings: Settings) -> None:
    """The cache must be usable before anything is sent: answers are never paid for and then dropped."""
    from pytest_longctx.util.fsutil import folder_problem

    if settings.cache == "off":
        return
    problem = folder_problem(settings.cache_dir, write=settings.cache != "replay")
    if problem is not None:
        raise pytest.UsageError(f"--longctx-cache-dir: {settings.cache_dir} {problem}; pass a writable folder "
                                "(or --longctx-cache off)")


def _check_gate_inputs(config: pytest.Config, settings: Settings) -> None:
    """Compared run, relative thresholds and report dir: a bad one is a usage error before anything is sent."""
    from pytest_longctx.errors import UsageError
    from pytest_longctx.session.preflight import check_gate_inputs

    try:
        config.stash[RUN_KEY].baseline = check_gate_inputs(settings)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def _needs_model_process(config: pytest.Config) -> bool:
    return not (config.option.collectonly or config.option.help)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport,
                                                                         pytest.CollectReport]:
    """A usage error while collecting (e.g. an experiment's corpus is missing) is marked on its report, which
    xdist carries to the controller; the controller then stops the session as a usage error (exit 4, one line)."""
    report = yield
    call = getattr(report, "call", None)
    excinfo = getattr(call, "excinfo", None)
    if report.failed and excinfo is not None:
        from pytest_longctx.errors import UsageError

        if isinstance(excinfo.value, (UsageError, pytest.UsageError)):
            message = str(excinfo.value).split("\n")[0][:1000]
            report.longrepr = f"UsageError: {message}"
            report.longctx_usage_error = message  # type: ignore[attr-defined]
    elif report.skipped and excinfo is not None:
        from pytest_longctx.corpus.missing import DataMissing, is_selected

        missing = excinfo.value
        if isinstance(missing, DataMissing) and is_selected(collector, missing.experiments):
            report.longctx_data_missing = missing.to_json()  # type: ignore[attr-defined]  # one summary line
    return report


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--longctx-sequential: every process collects sample group by sample group (after experiments' own edits)."""
    if SETTINGS_KEY in config.stash:
        from pytest_longctx.session.sequential_gate import reorder

        reorder(config, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without xdist, shared services start only when longctx tests were collected.

    Threshold selectors are checked against the collected cells first, so a selector that can match
    nothing is a usage error before any request is sent. Under xdist the controller does not collect:
    there the gate reports the same problem at the end (a gate error, exit 11).
    """
    from pytest_longctx.session.heap import freeze

    freeze(session.config)  # every process that collects: its items live until the end
    if not _is_controller(session.config):
        _check_baseline_on_worker(session)
    elif any(item.get_closest_marker("longctx") for item in session.items):
        from pytest_longctx.errors import UsageError
        from pytest_longctx.session.preflight import check_baseline_cells, check_selectors

        settings = session.config.stash[SETTINGS_KEY]
        try:
            check_selectors(settings, session.items)
            refused = check_baseline_cells(settings, session.items, session.config.stash[RUN_KEY].baseline)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        if refused is not None:  # before any service starts: nothing is sent
            raise pytest.UsageError(refused)
        from pytest_longctx.session.sequential_gate import set_groups

        set_groups(session.config, [item.nodeid for item in session.items])
        _start_services(session.config)


#: On an xdist worker: why the compared run is refused (it lacks collected cells); its longctx tests then end as
#: usage errors before their first request, and the controller stops the session (exit 4).
REFUSED_KEY = pytest.StashKey[str]()


def _check_baseline_on_worker(session: pytest.Session) -> None:
    """Under xdist the controller does not collect: each worker checks the compared run against its own items."""
    from pytest_longctx.errors import UsageError
    from pytest_longctx.session.preflight import check_baseline_cells

    try:
        refused = check_baseline_cells(session.config.stash[SETTINGS_KEY], session.items)
    except UsageError as exc:
        refused = str(exc)
    if refused is not None:
        session.config.stash[REFUSED_KEY] = refused


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A worker whose compared run was refused runs no longctx test: each ends as that usage error, unsent."""
    refused = item.config.stash.get(REFUSED_KEY, None)
    if refused is not None and item.get_closest_marker("longctx") is not None:
        from pytest_longctx.errors import UsageError

        raise UsageError(refused)


def _start_services(config: pytest.Config) -> None:
    """Controller: start what workers share (local model server, prefetch or batch) once, before them."""
    state = config.stash[RUN_KEY]
    if state.services_started or not _needs_model_process(config):
        return
    state.services_started = True
    from pytest_longctx.session.stopping import install_signals

    install_signals(config)  # from here on requests may go out: SIGINT/SIGTERM record why, cancel, exit 2
    from pytest_longctx.errors import UsageError
    from pytest_longctx.session.services import settle_tokenizer, start_local_server, start_prefetch

    try:
        start_local_server(config)
        settle_tokenizer(config)
        start_prefetch(config)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


class _XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config) -> None:
        # The controller does not collect under xdist, so it starts shared services before the workers.
        _start_services(config)
        from pytest_longctx.backends import provider_of

        if _needs_model_process(config) and not provider_of(config.stash[SETTINGS_KEY].model).in_process:
            workers = config.stash[SHARED_KEY].workers
            config.stash[RUN_KEY].display.say(f"{workers} workers start, collect the experiments and build their "
                                              "conditions (files, contexts, question sets) ...")

    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        """The controller does not collect: the first worker's collection gives the sample groups."""
        from pytest_longctx.session.sequential_gate import set_groups

        set_groups(node.config, list(ids))  # type: ignore[attr-defined]

    def pytest_configure_node(self, node: object) -> None:
        config: pytest.Config = node.config  # type: ignore[attr-defined]
        shared = config.stash[SHARED_KEY]
        node.workerinput["longctx_workers"] = shared.workers  # type: ignore[attr-defined]
        node.workerinput["longctx_local_url"] = shared.local_url  # type: ignore[attr-defined]
        node.workerinput["longctx_prefetch_dir"] = shared.prefetch_dir  # type: ignore[attr-defined]
        node.workerinput["longctx_stop_file"] = shared.stop_file  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    from pytest_longctx.session.fixtures import SAMPLE_ARG

    marker = metafunc.definition.get_closest_marker("longctx")
    if marker is None:
        return
    settings = metafunc.config.stash[SETTINGS_KEY]
    if settings.several:  # every condition for each model, in the order given (the same on every worker)
        from pytest_longctx.session.model_axis import MODEL_ARG, slug

        if MODEL_ARG in metafunc.fixturenames:
            metafunc.parametrize(MODEL_ARG, [m.spec for m in settings.models],
                                 ids=[slug(m.spec) for m in settings.models])
    if SAMPLE_ARG in metafunc.fixturenames:
        from pytest_longctx.session.defaults import samples_for
        from pytest_longctx.session.identity import experiment_name

        samples = metafunc.definition.stash.get(CELL_SAMPLES_KEY, None)
        if samples is None:
            samples = samples_for(metafunc.config, experiment_name(metafunc.definition))
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
    from pytest_longctx.session.outcomes import classify, wrong_answer

    hidden = wrong_answer(item, call)  # a wrong answer is data: its report is built as passed, no traceback
    if hidden is not None:
        call.excinfo = None
    try:
        report = yield
    finally:
        if hidden is not None:
            call.excinfo = hidden
    classify(item, call, report)
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A longctx trial's category: ``incorrect`` (a wrong answer is data), ``error``, ``planned`` (plan mode),
    ``usage error``, else pytest's own. Without ``-v`` it prints no letter: the progress line shows the run."""
    if "longctx" not in getattr(report, "keywords", ()):  # (a collection error's CollectReport has none)
        return None
    status = _trial_status(report)
    controller = config.pluginmanager.get_plugin("longctx-controller")
    if config.get_verbosity() > 0 or getattr(controller, "finished", False):
        return status  # after the run: the short summary's word (ERROR, FAILED) for the report
    return status[0], "", ""


def _trial_status(report: pytest.TestReport) -> tuple[str, str, str]:
    from pytest_longctx.results.aggregate import records_of
    from pytest_longctx.session.outcomes import PLAN_KEY, USAGE_KEY

    keys = {name for name, _ in report.user_properties}
    if USAGE_KEY in keys:
        return "usage error", "U", "USAGE ERROR"  # its own category: shown once, by the stop line
    if PLAN_KEY in keys:
        return "planned", "p", "PLANNED"
    if report.when == "call":
        for record in records_of(report.user_properties):
            if record["outcome"] == "incorrect":
                return "incorrect", "i", "INCORRECT"
            if record["outcome"] == "error":
                return "error", "E", "ERROR"
        return {"passed": ("passed", ".", "PASSED"), "skipped": ("skipped", "s", "SKIPPED")}.get(
            report.outcome, ("failed", "F", "FAILED"))
    if report.failed:
        return "error", "E", "ERROR"
    return ("skipped", "s", "SKIPPED") if report.skipped else ("", "", "")


class _Controller:
    """Controller-only hooks (not registered on xdist workers): aggregation, reports, the gate."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session: pytest.Session | None = None
        self.finished = False

    def _usage_error(self, message: str) -> None:
        """Bad input found while collecting or in a fixture: nothing more is sent (prefetch cancelled, workers told
        through the stop file), and the session ends as a usage error: pytest prints the line once, exit 4."""
        from pytest_longctx.session.stopping import request_stop

        self.config.stash[RUN_KEY].usage_error = message
        request_stop(self.config, f"usage error: {message}")
        raise pytest.UsageError(message)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Before the terminal lists it as a collection error: bad input stops the session (pytest prints it once).
        An experiment skipped for want of its data is noted once (every xdist worker reports it)."""
        message = getattr(report, "longctx_usage_error", None)
        if message is not None:
            self._usage_error(str(message))
        missing = getattr(report, "longctx_data_missing", None)
        if isinstance(missing, dict):
            from pytest_longctx.corpus.missing import merge_missing

            merge_missing(self.config.stash[RUN_KEY].missing_data, missing)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Runs for every report, including those xdist replays from workers."""
        from pytest_longctx.results.aggregate import records_of
        from pytest_longctx.session.outcomes import PLAN_KEY, USAGE_KEY

        state = self.config.stash[RUN_KEY]
        usage_error = next((str(v) for k, v in report.user_properties if k == USAGE_KEY), None)
        if usage_error is not None and state.usage_error is None:
            self._usage_error(usage_error)
        records = records_of(report.user_properties)
        for record in records:
            state.aggregator.add(record)
            state.display.outcome(str(record["outcome"]))
            if record.get("fatal") and state.stop_reason is None:
                from pytest_longctx.session.stopping import request_stop

                request_stop(self.config, record["error"])
                if self.session is not None:
                    self.session.shouldstop = record["error"]
        if report.failed and self.session is not None and self.session.shouldfail:
            from pytest_longctx.session.stopping import check_maxfail

            check_maxfail(self.session)  # -x / --maxfail: stop prefetch now, not when the interpreter exits
        for key, value in report.user_properties:
            if key == PLAN_KEY and isinstance(value, dict):
                state.plan.add(value)
                model = (value.get("trial") or {}).get("model")  # several models: the design is each model's
                if model in (None, self.config.stash[SETTINGS_KEY].model.spec):
                    state.plan_evidence.add(value)
        from pytest_longctx.session.sequential_gate import on_report

        on_report(self.config, report, records)  # --longctx-budget; --longctx-sequential: look, maybe stop
        settled = report.when == "call" or (report.when == "setup" and not report.passed)  # the trial's outcome
        if settled and "longctx" in report.keywords:  # one progress line for the whole run
            total = self.session.testscollected if self.session is not None else 0
            state.display.item_finished(state, self.config.stash[SETTINGS_KEY], total)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from pytest_longctx.session.run import finish_run
        from pytest_longctx.session.stopping import settle

        self.finished = True
        state = self.config.stash[RUN_KEY]
        state.display.close(state, self.config.stash[SETTINGS_KEY], session.testscollected)
        settle(session)  # a stopped run: prefetch cancelled and joined, why in the record, exit 2
        if self.config.stash[RUN_KEY].usage_error is not None:
            return  # bad input, not a result: nothing written, the previous record and history stay as they were
        finish_run(session)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        from pytest_longctx.reporting.terminal import write_summary

        if self.config.stash[RUN_KEY].usage_error is not None:
            report = self.config.stash[SETTINGS_KEY].report_dir / "longctx.json"
            terminalreporter.write_line(f"longctx: usage error, no run record written ({report} left as it was)")
            return
        try:
            write_summary(terminalreporter, self.config.stash[RUN_KEY], self.config.stash[SETTINGS_KEY])
        except Exception as exc:  # never raise from the summary: the record is already written
            terminalreporter.write_line(f"longctx: could not print the summary: {type(exc).__name__}: {exc}",
                                        red=True)

    def finish_interrupted_start(self) -> None:
        """Interrupted while the session started (xdist plans the run there): pytest then skips its
        ``pytest_sessionfinish`` and summary, so the stopped run is recorded and summarized here."""
        session = self.session
        if session is None or self.finished or session.exitstatus != pytest.ExitCode.INTERRUPTED:
            return
        self.pytest_sessionfinish(session, int(session.exitstatus))
        terminalreporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminalreporter is not None:
            self.pytest_terminal_summary(terminalreporter)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A usage error a fixture found exits 4. Last, after plugins that OR exit codes (syrupy: 4 | 2 would be 6)."""
    state = session.config.stash.get(RUN_KEY, None)
    if state is not None and state.usage_error is not None:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
    elif state is not None and state.stop_reason is not None and session.exitstatus in (0, 1):
        session.exitstatus = pytest.ExitCode.INTERRUPTED  # pytest ends -x "failed" (without xdist): it was stopped


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(RUN_KEY, None)
    if state is not None:
        from pytest_longctx.session.services import stop_services
        from pytest_longctx.session.stopping import restore_signals

        controller = config.pluginmanager.get_plugin("longctx-controller")
        try:
            if isinstance(controller, _Controller):
                controller.finish_interrupted_start()
            stop_services(config)
        finally:
            restore_signals(config)
