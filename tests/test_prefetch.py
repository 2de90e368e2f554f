"""Prefetch: the child plan run's arguments, the dispatcher and the waiter, and a whole run with two workers."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anthropic  # noqa: F401  (imported once: in-process runs and the dispatcher then reuse it)
import pytest

from pytest_longctx.backends.anthropic import AnthropicBackend
from pytest_longctx.backends.base import Completion, Request, request_key
from pytest_longctx.backends.retry import RetryPolicy
from pytest_longctx.dispatch.cache import ResponseCache
from pytest_longctx.dispatch.prefetch import Dispatcher
from pytest_longctx.dispatch.waiter import Waiter
from pytest_longctx.errors import BackendError, FatalBackendError
from pytest_longctx.server import FaultPlan
from pytest_longctx.server.responders import echo, last_user_text
from pytest_longctx.session.plan_child import child_args, plan_args

SECRET = "sk-ant-test-SECRET-123"

# -- the child plan run's command line -------------------------------------------------------------


def test_child_args_drop_distribution_reports_and_modes() -> None:
    args = ["-n", "4", "-n8", "-nauto", "--numprocesses=2", "--dist", "loadfile", "--maxprocesses=3",
            "--html", "r.html", "--self-contained-html", "--junitxml=j.xml", "--longctx-report-dir", "out",
            "--longctx-plan=false", "--longctx-prefetch", "on", "--longctx-batch", "true", "--lf", "-f",
            "-k", "passkey", "--longctx-samples", "3", "--longctx-model=anthropic/claude-x", "evals/test_demo.py"]
    assert child_args(args) == ["-k", "passkey", "--longctx-samples", "3", "--longctx-model=anthropic/claude-x",
                                "evals/test_demo.py"]


def test_child_args_drop_bare_switches_but_not_the_path_after_them() -> None:
    args = ["--longctx-batch", "evals/lrt", "--longctx-prefetch", "on", "-k", "lrt",
            "--longctx-plan", "off", "evals/qa", "--longctx-exact-tokens", "evals/docs", "--longctx-batch"]
    assert child_args(args) == ["evals/lrt", "-k", "lrt", "evals/qa", "--longctx-exact-tokens", "evals/docs"]


def test_child_args_keep_disabled_plugins_and_plugins_the_child_needs() -> None:
    args = ["-p", "no:cacheprovider", "-pno:hypothesispytest", "-p", "myfixtures", "-p", "xdist", "-phtml",
            "-p", "no:xdist", "-x"]
    assert child_args(args) == ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "myfixtures",
                                "-p", "no:xdist", "-x"]


def test_plan_args_include_addopts_in_pytest_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # The child runs with -o addopts=, so options given in the ini file must reach it as arguments.
    monkeypatch.setenv("PYTEST_ADDOPTS", "--longctx-seed 7 -n 2")
    config = SimpleNamespace(getini=lambda name: ["--longctx-samples", "5", "-p", "no:anyio"],
                             invocation_params=SimpleNamespace(args=("--longctx-model", "anthropic/claude-x")))
    args = plan_args(config)
    assert args == ["--longctx-samples", "5", "-p", "no:anyio", "--longctx-seed", "7", "-n", "2",
                    "--longctx-model", "anthropic/claude-x"]
    assert child_args(args) == ["--longctx-samples", "5", "-p", "no:anyio", "--longctx-seed", "7",
                                "--longctx-model", "anthropic/claude-x"]


# -- dispatcher and waiter -------------------------------------------------------------------------


class Scripted:
    """A backend double: answers "ok ..." prompts, fails "fail ..." ones, crashes on "bug ..."."""

    provider, model = "anthropic", "claude-test"

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def complete(self, request: Request) -> Completion:
        prompt = request.messages[0].content
        self.sent.append(prompt)
        await asyncio.sleep(0.001)
        if prompt.startswith("fail"):
            raise BackendError("anthropic: gave up after 6 attempts; last error APIConnectionError")
        if prompt.startswith("bug"):
            raise RuntimeError("boom")
        return Completion(prompt.upper(), input_tokens=3, output_tokens=1)

    async def aclose(self) -> None:
        pass


def _key(prompt: str) -> str:
    return request_key("anthropic", "claude-test", Request.user(prompt))


def _plan(work: Path, prompts: list[str]) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    plan_file = work / "plan.jsonl"
    lines = [json.dumps({"key": _key(p), "cached": False, "request": Request.user(p).to_json()}) for p in prompts]
    plan_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return plan_file


def _dispatch(dispatcher: Dispatcher) -> None:
    dispatcher.start()
    dispatcher.join(timeout=120)  # generous: a bound on a hang, not a speed target
    assert (dispatcher.work / "done").exists()


@pytest.mark.asyncio
async def test_dispatcher_answers_through_the_cache_and_reports_failures(tmp_path: Path) -> None:
    cache, work = ResponseCache(tmp_path / "cache"), tmp_path / "work"
    cache.put(_key("ok cached"), Completion("OLD").to_json(), {})
    cache.path(_key("ok corrupt")).parent.mkdir(parents=True, exist_ok=True)
    cache.path(_key("ok corrupt")).write_text("{not json", encoding="utf-8")
    prompts = ["ok one", "ok two", "ok one", "ok cached", "ok corrupt", "fail one", "bug one"]
    backend = Scripted()
    dispatcher = Dispatcher(backend, cache, work, _plan(work, prompts))
    with pytest.warns(UserWarning, match="corrupt entry"):
        _dispatch(dispatcher)
    assert sorted(backend.sent) == ["bug one", "fail one", "ok corrupt", "ok one", "ok two"]  # each key once
    assert (dispatcher.progress.total, dispatcher.progress.done, dispatcher.progress.failed) == (5, 3, 2)
    waiter = Waiter(work, cache, timeout_s=5)
    assert all(waiter.expects(_key(p)) for p in prompts) and not waiter.expects(_key("never planned"))
    answer = await waiter.wait(_key("ok two"))
    assert answer.text == "OK TWO" and not answer.cache_hit  # sent in this run: a call, not a cache hit
    assert (await waiter.wait(_key("ok corrupt"))).text == "OK CORRUPT"
    assert (await waiter.wait(_key("ok cached"))).text == "OLD"
    with pytest.raises(BackendError, match="gave up after 6 attempts") as failed:
        await waiter.wait(_key("fail one"))
    assert not isinstance(failed.value, FatalBackendError)
    with pytest.raises(BackendError, match="prefetch: RuntimeError: boom"):
        await waiter.wait(_key("bug one"))
    assert cache.get(_key("fail one")) is None  # errors are never cached


def test_streaming_sends_while_the_plan_is_still_being_written(tmp_path: Path) -> None:
    cache, work = ResponseCache(tmp_path / "cache"), tmp_path / "work"
    work.mkdir()
    cache.put(_key("ok 5"), Completion("OLD").to_json(), {})
    cache.path(_key("ok 5")).write_text("{not json", encoding="utf-8")  # corrupt: sent again
    cache.put(_key("ok 4"), Completion("OLD").to_json(), {})  # cached: not sent
    backend = Scripted()
    dispatcher = Dispatcher(backend, cache, work, work / "plan.jsonl", concurrency=4)
    dispatcher.start_streaming()
    lines = [json.dumps({"key": _key(f"ok {i}"), "request": Request.user(f"ok {i}").to_json()}) for i in range(6)]
    with (work / "plan.jsonl").open("w", encoding="utf-8") as fh:  # as the child plan run appends them
        fh.write(lines[0] + "\n" + lines[1][:20])
        fh.flush()
        deadline = time.monotonic() + 60
        while not backend.sent:
            assert time.monotonic() < deadline, "nothing sent before the plan ended"
            time.sleep(0.01)
        assert backend.sent == ["ok 0"] and not (work / "keys.txt").exists()  # a half-written line waits
        fh.write(lines[1][20:] + "\n" + "\n".join(lines[2:] + lines[:2]) + "\n")
    with pytest.warns(UserWarning, match="corrupt entry"):
        dispatcher.plan_finished(ok=True)
        dispatcher.join(timeout=60)
    assert sorted(backend.sent) == ["ok 0", "ok 1", "ok 2", "ok 3", "ok 5"] and dispatcher.progress.done == 5
    assert cache.get(_key("ok 5"))["text"] == "OK 5"  # type: ignore[index]
    assert sorted((work / "keys.txt").read_text().split()) == sorted(_key(f"ok {i}") for i in range(6))


def test_a_failed_plan_stops_the_streaming_dispatcher(tmp_path: Path) -> None:
    cache, work = ResponseCache(tmp_path / "cache"), tmp_path / "work"
    _plan(work, [f"ok {i}" for i in range(3)])
    backend = Scripted()
    dispatcher = Dispatcher(backend, cache, work, work / "plan.jsonl", concurrency=2)
    dispatcher.plan_finished(ok=False)
    dispatcher.start_streaming()
    dispatcher.join(timeout=60)
    assert backend.sent == [] and (work / "done").exists() and not (work / "keys.txt").exists()


@pytest.mark.asyncio
async def test_waiter_gives_up_when_no_answer_can_come(tmp_path: Path) -> None:
    cache, work = ResponseCache(tmp_path / "cache"), tmp_path / "work"
    work.mkdir()
    (work / "keys.txt").write_text(_key("lost"))
    with pytest.raises(BackendError, match=r"no answer for request \w+ within 0s"):
        await Waiter(work, cache, timeout_s=0.05).wait(_key("lost"))
    (work / "done").touch()
    with pytest.raises(BackendError, match="finished without an answer"):
        await Waiter(work, cache, timeout_s=5).wait(_key("lost"))




def test_dispatcher_keeps_the_full_concurrency_in_flight(tmp_path: Path, api: Any) -> None:
    # Replies wait until eight requests are inside the server: fewer than eight lanes would never be answered
    # (the barrier breaks after 30 s and every request errors), more would show in max_in_flight.
    barrier = threading.Barrier(8, timeout=30)

    def eight_at_a_time(body: dict[str, Any]) -> str:
        barrier.wait()
        return echo(body)

    srv = api(eight_at_a_time)
    cache, work = ResponseCache(tmp_path / "cache"), tmp_path / "work"
    prompts = [f"ok {i}" for i in range(24)]
    backend = AnthropicBackend("claude-test", max_concurrency=8, timeout_s=60.0)
    dispatcher = Dispatcher(backend, cache, work, _plan(work, prompts), concurrency=8)
    _dispatch(dispatcher)
    assert srv.stats.max_in_flight == 8 and srv.stats.endpoints == {"messages": 24} and not srv.stats.faults
    assert [cache.get(_key(p))["text"] for p in prompts] == prompts  # type: ignore[index]


@pytest.mark.asyncio
async def test_a_fatal_error_stops_the_dispatcher_sending(tmp_path: Path, api: Any) -> None:
    srv = api("echo", faults=FaultPlan(sticky="spend-limit"))
    cache, work = ResponseCache(tmp_path / "cache"), tmp_path / "work"
    prompts = [f"ok {i}" for i in range(20)]
    backend = AnthropicBackend("claude-test", max_concurrency=4, policy=RetryPolicy(attempts=3, base_s=0.01))
    _dispatch(Dispatcher(backend, cache, work, _plan(work, prompts), concurrency=4))
    assert 1 <= srv.stats.endpoints["messages"] <= 4  # at most what was already in flight
    waiter = Waiter(work, cache, timeout_s=5)
    for prompt in prompts:
        with pytest.raises(FatalBackendError, match="enforced_spend_limit_reached"):
            await waiter.wait(_key(prompt))


# -- a whole run: two workers, one dispatcher with the run's full concurrency ----------------------

EVAL = '''
import pytest

from pytest_longctx import Request

pytestmark = pytest.mark.longctx("demo")


@pytest.mark.parametrize("filler", [4, 16])
async def test_passkey(longctx, filler):
    key = longctx.rng.randrange(10_000, 99_999)
    text = "The sky is blue. " * filler + f"The pass key is {key}. "
    answer = await longctx.ask(Request.user(text + "What is the pass key?", max_tokens=16, template="demo@1"))
    longctx.record(expected=key, answer=answer)
    assert str(key) in answer
'''


def passkey(body: dict[str, Any]) -> str:
    found = re.search(r"The pass key is (\d+)", last_user_text(body))
    return found.group(1) if found else "?"


@pytest.mark.e2e
def test_two_workers_keep_the_whole_concurrency_in_flight(longctx_runner: Any, api: Any) -> None:
    srv = api(passkey, latency=0.4)
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    run = longctx_runner.run("-n", "2", "--longctx-max-concurrency", "16", "--longctx-samples", "16",
                             model="anthropic/claude-test", cache=True)
    record = run.record
    assert run.ret == 0 and [t["outcome"] for t in record["trials"]] == ["correct"] * 32
    assert record["prefetch"]["requests"] == record["prefetch"]["sent"] == 32
    rates = record["prefetch"]["rates"]  # the producer's rate beside what the lanes need (C / latency)
    assert rates["planned"] == 32 and rates["plan_requests_per_s"] > 0
    assert rates["mean_latency_s"] >= 0.4 and 0 < rates["lanes_need_requests_per_s"] <= 16 / 0.4
    assert any(note.startswith("prefetch: the plan produced 32 requests") for note in record["notes"])
    assert srv.stats.endpoints == {"messages": 32}
    assert srv.stats.max_in_flight >= 12  # ~16 (the run's concurrency), not 2 (one per worker)
    assert srv.stats.max_in_flight <= 16
