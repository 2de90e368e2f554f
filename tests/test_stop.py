"""Stop means stop: SIGINT/SIGTERM (planning, dispatch, tests), -x/--maxfail and a fatal API error end the run.

Each case runs ``pytest`` as a subprocess against the local Messages-API server. The server's ``Gate``
answers the first few requests and holds every later one, so at the moment of the stop all prefetch lanes
are known to be busy (none between two requests): then *no* request may reach the server after it. The
moments are found by waiting on events (the server's request count, files the eval writes), never by
sleeping. After the run wrote its record, held requests are released: a dispatcher that was not cancelled
would send more while the process is still alive.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.server import FaultPlan
from tests.passkey_api import MODEL, passkey

C = 4  # prefetch lanes (--longctx-max-concurrency)
FREE = 4  # requests the gate answers before it holds the rest

EVAL = '''
import os
import pathlib
import threading

import pytest

from pytest_longctx import Request

pytestmark = pytest.mark.longctx("demo")
HERE = pathlib.Path(__file__).parent
PLANNING = bool(os.environ.get("LONGCTX_CHILD"))  # the controller's child plan run


async def test_passkey(longctx):
    if PLANNING and longctx.sample == int(os.environ.get("BLOCK_PLAN_AT", "-1")):
        (HERE / "planning-blocked").write_text(str(os.getpid()))
        threading.Event().wait()  # planning never ends by itself: only a stop ends it
    key = longctx.rng.randrange(10_000, 99_999)
    answer = await longctx.ask(Request.user(f"The pass key is {key}. What is the pass key?", max_tokens=16,
                                            template="stop@1"))
    if not PLANNING and str(longctx.sample) in os.environ.get("FAIL_AT", "").split(","):
        raise RuntimeError("a bug in the eval")
    longctx.record(expected=key, answer=answer)
    if not PLANNING:
        with (HERE / "finished.txt").open("a") as fh:
            fh.write(f"{longctx.sample}\\n")
    assert str(key) in answer
'''


@dataclass
class Gate:
    """A responder that answers the first ``free`` requests (always right) and holds later ones until released."""

    free: int
    seen: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    opened: threading.Event = field(default_factory=threading.Event)

    def __call__(self, body: dict[str, Any]) -> str:
        with self.lock:
            self.seen += 1
            held = self.seen > self.free
        if held:
            self.opened.wait()
        return passkey(body)


@dataclass
class Run:
    """One ``pytest`` subprocess in the project, and where it writes."""

    proc: subprocess.Popen[bytes]
    path: Path
    out: Path

    @property
    def cache(self) -> Path:
        return self.path / "cache"

    @property
    def record_path(self) -> Path:
        """A stopped run's record: beside the last complete one (``longctx.json``), never replacing it."""
        return self.path / "reports" / "longctx.partial.json"

    def record(self) -> dict[str, Any]:
        assert self.record_path.is_file(), f"no run record:\n{self.output()}"
        data: dict[str, Any] = json.loads(self.record_path.read_text(encoding="utf-8"))
        return data

    def output(self) -> str:
        return self.out.read_text(encoding="utf-8", errors="replace")[-4000:]

    def cached(self) -> int:
        """Answers in the response cache (``cache/ab/<key>.json``)."""
        return sum(1 for p in self.cache.glob("??/*.json"))

    def finished(self) -> int:
        path = self.path / "finished.txt"
        return len(path.read_text().split()) if path.exists() else 0

    def wait_for(self, what: str, condition: Callable[[], bool], timeout: float = 180) -> None:
        """Wait for ``condition`` (an event of the run); fail with the run's output if it exits or never comes."""
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.proc.poll() is None or condition(), f"pytest exited ({self.proc.returncode}) before " \
                f"{what}:\n{self.output()}"
            assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f}s\n{self.output()}"
            time.sleep(0.02)

    def exit_code(self, timeout: float = 180) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"pytest still running {timeout:.0f}s after the stop (a thread left behind?)\n{self.output()}")

    def work_folders(self) -> list[Path]:
        folder = self.cache / "prefetch"
        return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.fixture
def start(longctx_runner: Any, api: Any) -> Iterator[Callable[..., tuple[Run, Any, Gate]]]:
    """``start(*args, env=..., ignore_sigint=False, faults=None)``: the gate server, and pytest running against it."""
    project: Path = longctx_runner.pytester.path
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    gates: list[Gate] = []
    procs: list[subprocess.Popen[bytes]] = []

    def run(*args: str, env: dict[str, str] | None = None, ignore_sigint: bool = False,
            faults: FaultPlan | None = None, free: int = FREE) -> tuple[Run, Any, Gate]:
        gate = Gate(free)
        gates.append(gate)
        srv = api(gate, faults=faults)
        full_env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
        full_env.update(env or {})
        cmd = [sys.executable, "-m", "pytest", "--longctx-model", MODEL,
               "--longctx-cache-dir", str(project / "cache"), "--longctx-report-dir", str(project / "reports"),
               "--longctx-max-concurrency", str(C), "--longctx-samples", "12", *args]
        out = project / "pytest-output.txt"

        def ignore() -> None:  # a `pytest ... &` job of a shell script starts with SIGINT ignored
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        with out.open("wb") as fh:
            proc = subprocess.Popen(cmd, cwd=project, env=full_env, stdout=fh, stderr=subprocess.STDOUT,
                                    preexec_fn=ignore if ignore_sigint else None)
        procs.append(proc)
        return Run(proc, project, out), srv, gate

    yield run
    for gate in gates:
        gate.opened.set()
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def messages(srv: Any) -> int:
    return int(srv.stats.endpoints.get("messages", 0))


def stop_written(run: Run) -> bool:
    """The controller knows of the stop: it wrote the stop file (``<cache>/stops/<pid>-<ms>``, beside its ledger)."""
    folder = run.cache / "stops"
    return folder.is_dir() and any("." not in p.name and p.read_text() for p in folder.iterdir())


def abandon(run: Run, signum: int) -> None:
    """A first Ctrl-C lets the requests in flight be answered (and the gate holds them): a second one abandons them."""
    if signum == signal.SIGINT:
        run.wait_for("the stop", lambda: stop_written(run))
        run.proc.send_signal(signal.SIGINT)


def stopped_cleanly(run: Run, srv: Any, gate: Gate, at_stop: int, signalled: float, reason: str,
                    in_flight_kept: int = 0) -> dict[str, Any]:
    """The checks every stop shares; returns the record."""
    run.wait_for("the run record", run.record_path.is_file)
    gate.opened.set()  # a dispatcher still running would now send more before the process exits
    code = run.exit_code()
    record = run.record()
    assert code == 2, run.output()
    assert record["stopped"] == reason
    assert messages(srv) == at_stop, "a request started after the stop"
    assert max(srv.stats.arrivals) < signalled  # by the server's own clock: nothing arrived after the signal
    assert FREE <= run.cached() <= FREE + in_flight_kept  # what was answered is kept
    assert run.work_folders() == []  # joined, then removed
    assert all(t["outcome"] == "correct" for t in record["trials"])
    usage = record["usage"]  # the partial report counts what was sent (the ledger), abandoned requests included
    assert usage["calls"] == messages(srv) and usage["answered"] >= FREE and usage["failed"] == 0
    assert usage["sent_input_tokens"] <= srv.stats.input_tokens  # the server may finish what was abandoned
    return record


# -- SIGINT/SIGTERM ----------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["sigint", "sigint-inherited-ignored"])
def test_sigint_while_planning_kills_the_plan_child_and_cancels_prefetch(start: Any, ignore_sigint: bool) -> None:
    run, srv, gate = start("-n", "2", env={"BLOCK_PLAN_AT": "8"}, ignore_sigint=ignore_sigint)
    # The child planned s0-s7 and blocks at s8; the dispatcher got 4 answers and holds 4 requests (all lanes).
    blocked = run.path / "planning-blocked"
    run.wait_for("4 answers cached and 4 requests held while planning",
                 lambda: messages(srv) == FREE + C and run.cached() == FREE and blocked.exists())
    child = int(blocked.read_text())
    at_stop, signalled = messages(srv), time.time()
    run.proc.send_signal(signal.SIGINT)
    abandon(run, signal.SIGINT)
    record = stopped_cleanly(run, srv, gate, at_stop, signalled, "interrupted by SIGINT")
    assert record["trials"] == [] and record["prefetch"]["sent"] == FREE
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # the plan child was terminated (and reaped)
    assert "run stopped: interrupted by SIGINT" in run.output()


@pytest.mark.e2e
@pytest.mark.parametrize(("mode", "signum", "ignore_sigint"), [
    (["-n", "2"], signal.SIGINT, False),
    (["-n", "2"], signal.SIGINT, True),
    ([], signal.SIGINT, False),
    (["-n", "2"], signal.SIGTERM, False),
    (["-n", "2", "--longctx-prefetch", "off"], signal.SIGINT, False),
], ids=["n2-sigint", "n2-sigint-inherited-ignored", "no-xdist-sigint", "n2-sigterm", "n2-prefetch-off-sigint"])
def test_a_signal_while_requests_are_in_flight_stops_the_run(start: Any, mode: list[str], signum: int,
                                                             ignore_sigint: bool) -> None:
    run, srv, gate = start(*mode, ignore_sigint=ignore_sigint)
    prefetch = "off" not in mode
    in_flight = C if prefetch else 2  # every prefetch lane, or each worker's own request
    # s0-s3 answered and scored; the gate holds the requests in flight; the next tests wait for theirs.
    run.wait_for("4 trials finished and the rest held",
                 lambda: messages(srv) == FREE + in_flight and run.finished() == FREE)
    at_stop, signalled = messages(srv), time.time()
    run.proc.send_signal(signum)  # to the pytest process only: workers learn it from the controller
    if prefetch:
        abandon(run, signum)
    # Without prefetch a worker's request already in flight may still be answered (and cached) before it exits.
    record = stopped_cleanly(run, srv, gate, at_stop, signalled, f"interrupted by {signal.Signals(signum).name}",
                             in_flight_kept=0 if prefetch else in_flight)
    assert 1 <= len(record["trials"]) <= FREE
    assert record["prefetch"]["sent"] == FREE if prefetch else "prefetch" not in record


@pytest.mark.e2e
@pytest.mark.parametrize("mode", [["-n", "2"], []], ids=["n2", "no-xdist"])
def test_ctrl_c_drains_the_requests_in_flight_so_the_record_is_the_servers_count(start: Any,
                                                                                 mode: list[str]) -> None:
    from tests.test_money_runs import PRICES, server_usd

    run, srv, gate = start(*mode, *PRICES)
    run.wait_for("4 trials finished and the rest held",
                 lambda: messages(srv) == FREE + C and run.finished() == FREE)
    at_stop, signalled = messages(srv), time.time()
    run.proc.send_signal(signal.SIGINT)
    run.wait_for("the stop", lambda: stop_written(run))  # nothing starts from here on
    gate.opened.set()  # the requests in flight are answered now: the run reads and keeps them, sends nothing more
    code, record, stats = run.exit_code(), run.record(), srv.stats
    assert code == 2 and record["stopped"] == "interrupted by SIGINT", run.output()
    assert messages(srv) == at_stop and max(stats.arrivals) < signalled  # no request after the signal
    assert run.cached() == FREE + C and record["prefetch"]["sent"] == FREE + C  # the drained answers are kept
    usage = record["usage"]
    assert usage["calls"] == usage["answered"] == at_stop and usage["abandoned"] == usage["abandoned_usd"] == 0
    assert (usage["sent_input_tokens"], usage["paid_output_tokens"]) == (stats.input_tokens, stats.output_tokens)
    assert usage["usd"] == pytest.approx(server_usd(stats), rel=1e-9) and usage["usd"] > 0
    assert "Ctrl-C again abandons them" in run.out.read_text(encoding="utf-8")


# -- -x / --maxfail and a fatal API error ------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize(("args", "fail_at", "reason"), [
    (["-x"], "2", "-x: first failure"),
    (["-n", "2", "-x"], "2", "-x: first failure"),
    (["-n", "2", "--maxfail=2"], "1,2", "--maxfail=2: 2 failures"),
], ids=["x", "n2-x", "n2-maxfail-2"])
def test_maxfail_stops_prefetch_at_the_failure(start: Any, args: list[str], fail_at: str, reason: str) -> None:
    run, srv, gate = start(*args, env={"FAIL_AT": fail_at})
    # The failing samples have their answers (s0-s3 are answered at once); later requests are held by the gate.
    run.wait_for("the run record", run.record_path.is_file)
    at_stop = messages(srv)
    gate.opened.set()  # a dispatcher still running would now send more before the process exits
    code = run.exit_code()
    record = run.record()
    assert code == 2, run.output()
    assert record["stopped"] == reason
    assert messages(srv) == at_stop <= FREE + C, "a request started after the stop"
    errors = [t for t in record["trials"] if t["outcome"] == "error"]
    assert sorted(e["sample"] for e in errors) == [int(s) for s in fail_at.split(",")]
    assert {e["error"] for e in errors} == {"RuntimeError: a bug in the eval"}
    assert run.cached() == FREE and run.work_folders() == []


@pytest.mark.e2e
def test_a_fatal_api_error_mid_run_stops_it_with_the_error_line(start: Any) -> None:
    run, srv, gate = start("-n", "2", free=FREE)
    run.wait_for("4 answers cached and 4 requests held",
                 lambda: messages(srv) == FREE + C and run.cached() == FREE)
    srv.set_faults(FaultPlan(sticky="spend-limit"))  # from the next request on: the workspace is out of money
    gate.opened.set()  # the 4 held requests are answered; each lane's next request is refused
    code = run.exit_code()
    record = run.record()
    assert code == 2, run.output()
    assert "spend" in record["stopped"].lower()
    assert messages(srv) <= 2 * FREE + C  # at most one refused request per lane: then nothing more
    assert run.cached() == 2 * FREE
    assert all(t["outcome"] == "correct" or "spend" in t["error"].lower() for t in record["trials"])
    assert run.work_folders() == []


# -- the dispatcher alone ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_cancel_stops_the_lanes_at_once_and_waiting_tests_end_skipped(tmp_path: Path, api: Any) -> None:
    from pytest_longctx.backends.anthropic import AnthropicBackend
    from pytest_longctx.backends.base import Request, request_key
    from pytest_longctx.dispatch.cache import ResponseCache
    from pytest_longctx.dispatch.prefetch import Dispatcher
    from pytest_longctx.dispatch.skips import RunStopped
    from pytest_longctx.dispatch.waiter import Waiter

    gate = Gate(FREE)
    srv = api(gate)
    try:
        work, cache = tmp_path / "work", ResponseCache(tmp_path / "cache")
        work.mkdir()
        requests = [Request.user(f"The pass key is {10_000 + i}.", max_tokens=16) for i in range(12)]
        keys = [request_key("anthropic", "claude-test", r) for r in requests]
        lines = [json.dumps({"key": k, "request": r.to_json()}) for k, r in zip(keys, requests, strict=True)]
        (work / "plan.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        dispatcher = Dispatcher(AnthropicBackend("claude-test", max_concurrency=C), cache, work, work / "plan.jsonl",
                                concurrency=C)
        dispatcher.start()

        def answered() -> list[int]:  # the lanes send in parallel: which FREE requests the gate answers may vary
            return [i for i, k in enumerate(keys) if cache.get(k) is not None]

        deadline = time.monotonic() + 60
        while not (messages(srv) == FREE + C and len(answered()) == FREE):
            assert time.monotonic() < deadline, (
                f"the lanes never filled: {messages(srv)} requests at the server (want {FREE + C}), "
                f"{len(answered())}/{FREE} answers cached, "
                f"progress done={dispatcher.progress.done} failed={dispatcher.progress.failed}")
            await asyncio.sleep(0.02)
        dispatcher.cancel("interrupted by SIGINT", drain=False)  # a signal: those in flight are abandoned
        dispatcher.join()  # no timeout: cancellation must make it return
        gate.opened.set()
        assert messages(srv) == FREE + C and dispatcher.progress.done == FREE
        assert (work / "done").exists() and (work / "stopped").read_text() == "interrupted by SIGINT"
        waiter = Waiter(work, cache, timeout_s=30)
        first = answered()[0]
        assert (await waiter.wait(keys[first])).text == str(10_000 + first)  # answered before the stop: there
        with pytest.raises(RunStopped, match=r"run stopped before this request was answered \(interrupted by SIGINT"):
            await waiter.wait(keys[-1])  # never sent: the lanes take the plan in order, only keys[:8] went out
    finally:
        gate.opened.set()


def test_cancel_before_the_thread_runs_sends_nothing(tmp_path: Path) -> None:
    from pytest_longctx.dispatch.cache import ResponseCache
    from pytest_longctx.dispatch.prefetch import Dispatcher

    class Never:
        provider, model = "anthropic", "claude-test"

        async def complete(self, request: Any) -> Any:
            raise AssertionError("sent after cancel()")

        async def aclose(self) -> None:
            pass

    work = tmp_path / "work"
    work.mkdir()
    (work / "plan.jsonl").write_text(json.dumps({"key": "k" * 64, "request": {}}) + "\n", encoding="utf-8")
    dispatcher = Dispatcher(Never(), ResponseCache(tmp_path / "cache"), work, work / "plan.jsonl", concurrency=2)
    dispatcher.cancel("-x: first failure")
    dispatcher.start()
    dispatcher.join()
    dispatcher.cancel("again")  # idempotent: the first reason stays
    assert dispatcher.cancelled == "-x: first failure" and (work / "stopped").read_text() == "-x: first failure"


# -- batch mode --------------------------------------------------------------------------------------


@pytest.mark.e2e
def test_sigint_while_polling_a_batch_leaves_it_recorded_for_resume(longctx_runner: Any, api: Any) -> None:
    srv = api(batch_delay=3600)  # the batch stays in_progress until the test ends it
    project: Path = longctx_runner.pytester.path
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    cache = project / "cache"
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}, "LONGCTX_BATCH_POLL": "0.05"}
    cmd = [sys.executable, "-m", "pytest", "--longctx-model", MODEL, "--longctx-samples", "4", "--longctx-batch",
           "true", "--longctx-cache-dir", str(cache), "--longctx-report-dir", str(project / "reports")]
    out = project / "pytest-output.txt"
    with out.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=fh, stderr=subprocess.STDOUT)
    run = Run(proc, project, out)
    try:
        run.wait_for("the batch submitted and polled", lambda: bool(list((cache / "batches").glob("*.json")))
                     and srv.stats.endpoints.get("batches.retrieve", 0) >= 2)
        proc.send_signal(signal.SIGINT)
        code = run.exit_code()
    finally:
        if proc.poll() is None:
            proc.kill()
    record = run.record()
    assert code == 2 and record["stopped"] == "interrupted by SIGINT", run.output()
    assert record["trials"] == [] and run.work_folders() == []
    assert "longctx batch: 1 batch submitted, 0 ended; requests: 4 processing, 0 succeeded" in run.output()
    assert "they are collected by the next run with the same --longctx-cache-dir, not submitted again" in run.output()
    state_file = next((cache / "batches").glob("*.json"))
    state = json.loads(state_file.read_text())
    assert state["collected"] is False and len(state["keys"]) == 4

    srv.batches._batches[state["id"]].end_at = time.time()  # the batch ends while nobody polls
    resumed = longctx_runner.run("--longctx-samples", "4", "--longctx-batch", "true", model=MODEL, cache=True,
                                 subprocess=True)
    assert resumed.ret == 0 and [t["outcome"] for t in resumed.record["trials"]] == ["correct"] * 4
    assert resumed.record["batch"]["resumed"] == [state["id"]] and resumed.record["batch"]["submitted"] == []
    assert srv.stats.endpoints.get("batches.create") == 1 and json.loads(state_file.read_text())["collected"]
