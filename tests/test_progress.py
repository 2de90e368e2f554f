"""The run's progress line (``reporting.progress.Display``): redrawn in place on a terminal, every few seconds in a
log, with outcomes, requests and an estimate of the time left; a plan counts requests planned."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_longctx.backends.model_spec import parse_model_spec
from pytest_longctx.reporting.progress import LOG_EVERY_S, Display, duration
from pytest_longctx.results.aggregate import Aggregator
from tests.passkey_api import MODEL


class Terminal:
    """What a TerminalReporter is asked to do."""

    def __init__(self, tty: bool) -> None:
        self.isatty = tty
        self.calls: list[tuple[str, str]] = []
        self.currentfspath: Any = None

    def rewrite(self, line: str, erase: bool = False) -> None:
        self.calls.append(("rewrite", line))

    def write_line(self, line: str) -> None:
        self.calls.append(("line", line))

    def write(self, text: str) -> None:
        self.calls.append(("write", text))


def display(tty: bool) -> tuple[Display, Terminal]:
    terminal = Terminal(tty)
    config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda name: terminal))
    return Display(config), terminal  # type: ignore[arg-type]


STATE = SimpleNamespace(aggregator=Aggregator(), dispatcher=None)


def settings(plan: bool = False) -> Any:
    return SimpleNamespace(model=parse_model_spec("local/smollm2-135m"), plan=plan)


def test_a_log_gets_a_line_now_and_then_not_one_per_trial() -> None:
    shown, terminal = display(tty=False)
    for i in range(100):
        shown.outcome("correct" if i % 4 == 0 else "incorrect")
        shown.item_finished(STATE, settings(), 100, now=i * 0.5)  # 50 s for 100 trials
    lines = [text for kind, text in terminal.calls if kind == "line"]
    assert len(lines) == 1 + int(49.5 // LOG_EVERY_S) + 1  # the first, every LOG_EVERY_S seconds, the last
    assert lines[0].startswith("longctx: 1/100 trials (1 correct); 0 requests sent, 0 answered from cache")
    second = 1 + int(LOG_EVERY_S / 0.5)  # LOG_EVERY_S after the first: a trial every 0.5 s since
    assert lines[1].startswith(f"longctx: {second}/100 trials") and lines[1].endswith(
        "~" + duration((100 - second) * 0.5) + " left")
    assert lines[-1] == ("longctx: 100/100 trials (25 correct, 75 incorrect); 0 requests sent, 0 answered from cache; "
                         "done")
    shown.close(STATE, settings(), 100)
    assert [kind for kind, _ in terminal.calls] == ["line"] * len(lines)  # already said: nothing more


def test_a_terminal_redraws_one_line_and_ends_it() -> None:
    shown, terminal = display(tty=True)
    for i in range(10):
        shown.item_finished(STATE, settings(plan=True), 10, now=float(i))
    assert {kind for kind, _ in terminal.calls} == {"rewrite"} and len(terminal.calls) == 10
    assert terminal.calls[-1][1] == "longctx: 10/10 requests planned; done"
    assert terminal.currentfspath == -2  # pytest's next line starts on a line of its own
    shown.say("the next phase")
    assert terminal.calls[-2:] == [("write", "\n"), ("line", "longctx: the next phase")]


@pytest.mark.parametrize(("seconds", "text"), [(44.6, "45 s"), (185, "3 min 05 s"), (3720, "1 h 02 min")])
def test_durations_read_as_a_person_says_them(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_counts_are_said_with_their_plurals() -> None:
    shown, _ = display(tty=False)
    shown.outcome("error")
    shown.item_finished(STATE, settings(), 1, now=0.0)
    assert shown.line(STATE, settings(), 1, now=0.0).startswith("longctx: 1/1 trial (1 error); 0 requests sent")
    shown.outcome("error")
    assert shown.line(STATE, settings(), 2, now=0.0).startswith("longctx: 1/2 trials (2 errors)")
    assert shown.line(STATE, settings(plan=True), 1, now=0.0).startswith("longctx: 1/1 request planned")


PLAIN = '''
import pytest


@pytest.mark.parametrize("n", range(4))
def test_plain(n):
    assert n >= 0


@pytest.mark.parametrize("word", ["longctx"])  # its keywords hold "longctx" (the id): still no trial
def test_named(word):
    assert word
'''


@pytest.mark.parametrize("xdist", [pytest.param([], id="in-process"),
                                   pytest.param(["-n", "2"], id="n2", marks=pytest.mark.e2e)])
def test_the_progress_line_counts_the_longctx_trials_not_every_test(runner: Any, api: Any, xdist: list[str]) -> None:
    """Ordinary tests collected beside the trials are no trials: the line's total is the 4 trials, not 9 tests."""
    api()
    runner.pytester.makepyfile(test_plain=PLAIN)
    run = runner.run("--longctx-samples", "2", *(xdist or ["-p", "no:xdist"]), model=MODEL)
    assert run.ret == 0, run.result.stdout.str()
    shown = [line[line.index("longctx: "):] for line in run.result.stdout.lines  # (after the plain tests' dots)
             if "longctx: " in line and " trial" in line]
    assert shown and shown[-1].startswith("longctx: 4/4 trials (4 correct)"), shown
    assert not any("/9 trials" in line for line in shown)
    assert not any("5/4 trials" in line for line in shown), shown  # test_named[longctx] is no fifth trial
    run.result.assert_outcomes(passed=9)
