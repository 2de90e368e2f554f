"""The LRT sweep of issue #14 against the bare SDK, side by side (``bench_throughput.py --lrt``).

One benchmark run, per latency L:

* ``plan``: the child plan run alone (what prefetch starts first), writing the plan of the sweep. A thread
  tails the plan file, so the production rate is measured while it runs: requests/s from its first planned
  request to its last, beside the rate the lanes need (C / L).
* ``suite``: ``pytest -n W --longctx-max-concurrency C --longctx-samples S`` on a copy of ``evals/lrt``
  against the local Messages-API server (in its own process) with latency L, fresh cache.
* ``bare SDK``: ``AsyncAnthropic`` + ``asyncio.Semaphore(C)`` sending the plan's prompts (the same requests
  the suite sends: same keys) to the same server.

The request span is the server's first arrival to its last arrival plus L (the last answer); the ideal is
N x L / C. ``tail rate`` is the arrival rate after the first C requests (when the lanes are refilled by the
producer, not by the plan's head start).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = """\
[tool.pytest.ini_options]
testpaths = ["evals"]
asyncio_mode = "strict"
asyncio_default_fixture_loop_scope = "session"
asyncio_default_test_loop_scope = "session"
addopts = "-p no:cacheprovider -p no:hypothesispytest -p no:benchmark -p no:anyio"
"""
SERVER = ("import sys; from pytest_longctx.server import MessagesServer; import threading\n"
          "srv = MessagesServer('echo', latency=float(sys.argv[1]), record_requests=False).start()\n"
          "print(srv.base_url, flush=True); sys.stdin.read(); srv.stop()\n")
MODEL = "claude-test"


@dataclass
class Span:
    """What the server saw of one phase."""

    n: int
    span: float  # first arrival to last answer
    tail_rate: float  # arrivals/s after the first C
    wall: float = 0.0
    peak: int = 0
    exit_code: int = 0
    load: float = 0.0  # 1-minute load average when the phase ended (2 cores: above 2, something else competes)


def make_project(root: Path) -> Path:
    """A temporary project holding a copy of the repository's ``evals/lrt``."""
    project = root / "project"
    shutil.copytree(REPO / "evals" / "lrt", project / "evals" / "lrt",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (project / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    return project


class Server:
    """The local Messages-API server in its own process (so it never competes for this one's GIL)."""

    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, str(latency)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        self.latency = latency
        self.seen = 0

    def phase(self, concurrency: int) -> Span:
        """The arrivals since the last call."""
        from pytest_longctx.server import fetch_stats

        stats = fetch_stats(self.url)
        arrivals = sorted(stats.arrivals[self.seen:])
        self.seen = len(stats.arrivals)
        if not arrivals:
            return Span(0, float("nan"), float("nan"), peak=stats.max_in_flight)
        tail = arrivals[concurrency:]
        rate = (len(tail) - 1) / (tail[-1] - tail[0]) if len(tail) > 1 and tail[-1] > tail[0] else float("nan")
        return Span(len(arrivals), arrivals[-1] - arrivals[0] + self.latency, rate, peak=stats.max_in_flight)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def time_plan(project: Path, plan_file: Path, samples: int,
              env: Mapping[str, str] | None = None) -> tuple[float, float, int, float]:
    """The child plan run alone: (seconds, production rate from first to last planned request, requests, CPU s).

    The CPU seconds (user + system of the child) do not depend on what else the machine runs.
    """
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:html", "--no-header",
           "--longctx-model", f"anthropic/{MODEL}", "--longctx-samples", str(samples),
           "--longctx-cache-dir", str(project / "plan-cache"), "--longctx-plan=true",
           f"--longctx-plan-out={plan_file}", "--longctx-report-dir", str(project / "plan-report"),
           "--longctx-prefetch=off", "--longctx-batch=false"]
    times: list[float] = []
    done = threading.Event()

    def tail() -> None:  # one timestamp per planned line, as the dispatcher would see it
        offset = 0
        while True:
            ended = done.is_set()
            try:
                with plan_file.open("rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
            except FileNotFoundError:
                chunk = b""
            offset += len(chunk)
            now = time.monotonic()
            times.extend([now] * chunk.count(b"\n"))
            if ended:
                return
            time.sleep(0.01)

    plan_file.unlink(missing_ok=True)
    watcher = threading.Thread(target=tail, daemon=True)
    start = time.monotonic()
    watcher.start()
    before = os.times()
    child_env = {**(os.environ if env is None else env), "LONGCTX_CHILD": "1"}
    proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=child_env, check=False)
    elapsed = time.monotonic() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    done.set()
    watcher.join()
    if proc.returncode not in (0, 5):
        print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n", file=sys.stderr)
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else float("nan")
    return elapsed, rate, len(times), cpu


def run_suite(project: Path, server: Server, *, samples: int, workers: int, concurrency: int,
              key: str) -> tuple[float, int, str]:
    """The real run: (wall seconds, exit code, its terminal note on prefetch if any)."""
    cache = project / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": key}
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), "--longctx-max-concurrency", str(concurrency),
           "--longctx-model", f"anthropic/{MODEL}", "--longctx-samples", str(samples),
           "--longctx-cache-dir", str(cache), "--longctx-report-dir", str(project / "reports")]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    if proc.returncode not in (0, 1):  # 1: wrong answers (the echo server's), which are data
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n", file=sys.stderr)
    note = next((line.strip() for line in proc.stdout.splitlines() if "plan produced" in line), "")
    shutil.rmtree(cache, ignore_errors=True)
    return wall, proc.returncode, note


def load_params(plan_file: Path) -> list[dict[str, Any]]:
    """The SDK keyword arguments of every planned request: its messages, system prompt and output length."""
    out = []
    with plan_file.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                request = json.loads(line)["request"]
                params = {"model": MODEL, "max_tokens": request["max_tokens"],
                          "messages": [{"role": m["role"], "content": m["content"]} for m in request["messages"]]}
                if request.get("system"):
                    params["system"] = request["system"]
                out.append(params)
    return out


def bare_sdk(params: list[dict[str, Any]], url: str, key: str, concurrency: int) -> tuple[float, int]:
    """``AsyncAnthropic`` + ``Semaphore(C)``: every prompt once; returns (wall seconds, peak in flight)."""
    import anthropic

    flight = [0, 0]  # now, peak

    async def main() -> None:
        client = anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0, timeout=600)
        gate = asyncio.Semaphore(concurrency)

        async def one(p: dict[str, Any]) -> None:
            async with gate:
                flight[0] += 1
                flight[1] = max(flight)
                await client.messages.create(**p)
                flight[0] -= 1

        await asyncio.gather(*(one(p) for p in params))
        await client.close()

    start = time.monotonic()
    asyncio.run(main())
    return time.monotonic() - start, flight[1]


def lrt_benchmark(root: Path, *, latencies: list[float], samples: int, workers: int, concurrency: int,
                  key: str) -> list[str]:
    """Run the comparison at every latency; return the printed table's lines."""
    project = make_project(root)
    plan_file = root / "plan.jsonl"
    plan_s, plan_rate, planned, plan_cpu = time_plan(project, plan_file, samples)
    print(f"  plan run alone: {planned} requests in {plan_s:.1f}s", file=sys.stderr)
    params = load_params(plan_file)
    plan_file.unlink()
    out = [f"LRT sweep: -n {workers}, --longctx-samples {samples}, C = {concurrency}, {len(params)} requests; "
           "span = server's first arrival to last answer; ideal = N x L / C",
           f"plan run alone: {plan_s:.2f}s for {planned} requests; production rate {plan_rate:.1f} requests/s "
           f"(first to last planned request); {plan_cpu:.1f} CPU s ({planned / plan_cpu:.1f} requests per CPU s)"]
    header = (f"{'L s':>5} {'what':9} {'N':>5} {'peak':>4} {'span s':>7} {'ideal s':>7} {'ratio':>6} "
              f"{'tail req/s':>10} {'wall s':>7} {'load':>5}")
    out += [header, "-" * len(header)]
    notes = []
    for latency in latencies:
        server = Server(latency)
        try:
            wall, code, note = run_suite(project, server, samples=samples, workers=workers,
                                         concurrency=concurrency, key=key)
            suite = server.phase(concurrency)
            suite.wall, suite.exit_code, suite.load = wall, code, os.getloadavg()[0]
            print(f"  L={latency}: suite {suite.span:.1f}s span, exit {code}", file=sys.stderr)
            sdk_wall, sdk_peak = bare_sdk(params, server.url, key, concurrency)
            bare = server.phase(concurrency)
            bare.wall, bare.peak, bare.load = sdk_wall, sdk_peak, os.getloadavg()[0]
            print(f"  L={latency}: bare SDK {bare.span:.1f}s span", file=sys.stderr)
        finally:
            server.close()
        ideal = len(params) * latency / concurrency
        for what, s in (("suite", suite), ("bare SDK", bare)):
            out.append(f"{latency:>5.2f} {what:9} {s.n:>5} {s.peak:>4} {s.span:>7.2f} {ideal:>7.2f} "
                       f"{s.span / ideal:>6.2f} {s.tail_rate:>10.1f} {s.wall:>7.2f} {s.load:>5.1f}")
        out.append(f"{latency:>5.2f} suite / bare SDK span = {suite.span / bare.span:.3f}; lanes need "
                   f"C / L = {concurrency / latency:.1f} requests/s, plan run alone produced {plan_rate:.1f}/s")
        if note:
            notes.append(f"L={latency}: run's own note: {note}")
    return out + notes
