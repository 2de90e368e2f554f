"""pytest11 entry point: the hook specifications, the options, and a ``pytest_configure`` that resolves the settings
and registers the plugin objects (as pytest-xdist registers its ``DSession``): the run controller always (not on an
xdist worker), the sequential gate only with ``--longctx-sequential``, the model services only when a model is
used. Each object owns its hooks and its typed state in ``config.stash``; what every process does to a test's
report stays here."""

from __future__ import annotations

import warnings
from collections.abc import Generator

import pytest

from pytest_longctx.backends import repeated_warnings
from pytest_longctx.errors import UsageError
from pytest_longctx.hookspecs import register
from pytest_longctx.reporting.errors import ErrorDigest, is_longctx
from pytest_longctx.reporting.progress import Display
from pytest_longctx.reporting.pytest_html import HtmlColumns
from pytest_longctx.run_settings import Settings
from pytest_longctx.session import fixtures, sequential_gate
from pytest_longctx.session.controller import ControllerLast, RunController
from pytest_longctx.session.crash import CrashRecorder
from pytest_longctx.session.heap import freeze
from pytest_longctx.session.keys import RUN_KEY, SETTINGS_KEY, SHARED_KEY, RunState, Shared
from pytest_longctx.session.modes import check_settings
from pytest_longctx.session.option_group import settle_switches
from pytest_longctx.session.options import add_options, resolve
from pytest_longctx.session.outcomes import classify, mark_collect_report, status_of, wrong_answer
from pytest_longctx.session.preflight import WorkerCheck
from pytest_longctx.session.sequential_gate import GATE_KEY, SequentialGate
from pytest_longctx.session.services import ModelServices
from pytest_longctx.session.xdist_hooks import XdistHooks


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """The hooks experiments implement (see ``hookspecs.py``)."""
    register(pluginmanager)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Bare switches (``--longctx-plan``, anywhere on the command line) get their value before pytest parses."""
    settle_switches(early_config, parser, args)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Resolve the settings once, then register what this process runs."""
    config.addinivalue_line("markers", "longctx(experiment, exclude=()): a long-context eval test; "
                            "its parametrization defines the condition cell")
    try:
        settings = resolve(config)
        check_settings(settings)
        sequential_gate.check(settings)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SETTINGS_KEY] = settings
    _quiet_repeated_warnings(config, settings)
    freeze(config)  # here, first: the thaw is then the run's last clean-up, after pytest's exit collections
    if not config.pluginmanager.has_plugin("longctx-fixtures"):
        config.pluginmanager.register(fixtures, "longctx-fixtures")
    gate = SequentialGate(config) if settings.sequential else None
    if gate is not None:  # every process collects sample group by sample group
        config.stash[GATE_KEY] = gate
        config.pluginmanager.register(gate, "longctx-sequential")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        config.stash[SHARED_KEY] = Shared.for_worker(workerinput, settings)
        config.pluginmanager.register(WorkerCheck(settings), "longctx-worker-check")
        return
    config.stash[SHARED_KEY] = Shared.for_controller(config, settings)
    config.stash[RUN_KEY] = RunState(display=Display(config))
    services = None
    if not (config.option.collectonly or config.option.help):  # a model is used
        services = ModelServices(config)
        services.check_inputs()
        if gate is not None:
            gate.start()  # the alarms' e-processes, over the compared run's items
        services.check_keys()
        config.pluginmanager.register(services, "longctx-services")
    controller = RunController(config)
    config.pluginmanager.register(controller, "longctx-controller")
    config.pluginmanager.register(ControllerLast(controller), "longctx-controller-last")
    config.pluginmanager.register(ErrorDigest(), "longctx-errors")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(config, services), "longctx-xdist")
        config.pluginmanager.register(CrashRecorder(), "longctx-crash")
    if config.pluginmanager.hasplugin("html"):
        config.pluginmanager.register(HtmlColumns(), "longctx-html")


def _quiet_repeated_warnings(config: pytest.Config, settings: Settings) -> None:
    """The SDK's per-request deprecation warning (``repeated_warnings``) is silenced in every process, in tests
    (an ini filter: pytest applies those inside each test) and outside them (the prefetch thread); the header
    says it once instead (``model_note``)."""
    for spec in dict.fromkeys((settings.model, *settings.models, settings.judge)):
        for message in repeated_warnings(spec):
            config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")
            warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport,
                                                                         pytest.CollectReport]:
    """A usage error or missing data while collecting is marked on its report, for the controller."""
    report = yield
    mark_collect_report(collector, report)
    return report


def pytest_collection_finish(session: pytest.Session) -> None:
    freeze(session.config)  # every process that collects: its items live until the end


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("longctx") is not None:
        fixtures.parametrize(metafunc)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
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
    if not is_longctx(report):  # (a collection error's CollectReport is none)
        return None
    status = status_of(report)
    controller = config.pluginmanager.get_plugin("longctx-controller")
    if config.get_verbosity() > 0 or getattr(controller, "finished", False):
        return status  # after the run: the short summary's word (ERROR, FAILED) for the report
    return status[0], "", ""
