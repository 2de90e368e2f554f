"""Throughput of a whole run against a remote model: how close does pytest get to N x latency / C?

Starts the local Messages-API server with a fixed latency, generates an eval with N trials (one request
each), and runs the real plugin in a subprocess (``pytest -n W --longctx-max-concurrency C``) against
``anthropic/claude-test`` with a fresh cache, once with prefetch (the default for remote models) and once
with ``--longctx-prefetch off`` (then each worker sends its own requests, so at most W are in flight).

Printed per run: wall time, the ideal N x latency / (requests in flight), their ratio; when the first
request reached the server (pytest start-up, plus the child plan run and the SDK import with prefetch);
the dispatch phase (first request to last answer) against its own ideal; the server's peak in flight.
With ``--plan`` the child plan run is also timed alone, and a warm re-run shows the fixed cost of a run
whose answers are all cached.

    python benchmarks/bench_throughput.py                       # N=640 and N=2560, prefetch on and off
    python benchmarks/bench_throughput.py --sizes 640 --off-sizes 640 --latency 0.25 --workers 8 --concurrency 64
    python benchmarks/bench_throughput.py --lrt                 # issue #14: LRT sweep vs the bare SDK, L=2.0, 0.25
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_longctx.server import MessagesServer, echo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.conftest import PYPROJECT as PROJECT  # the test suite's pytester project: the same settings

PYPROJECT = PROJECT.format(extra="")

EVAL = '''
import pytest

from pytest_longctx import Request

pytestmark = pytest.mark.longctx("bench")


async def test_passkey(longctx):
    key = longctx.rng.randrange(10**8, 10**9)
    answer = await longctx.ask(Request.user(f"Some context.\\nThe pass key is {key}.", max_tokens=16,
                                            template="bench@1"))
    longctx.record(expected=key, answer=answer)
    assert str(key) in answer
'''


@dataclass
class Clock:
    """A responder that answers like ``echo`` and notes when answers go out."""

    first: float | None = None
    last: float | None = None
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> str:
        now = time.monotonic()
        with self.lock:
            self.first = now if self.first is None else self.first
            self.last = now
            self.calls += 1
        return echo(body)


@dataclass
class Result:
    mode: str
    n: int
    in_flight: int  # the bound: C with prefetch, W without
    wall: float
    first_request: float
    dispatch: float
    peak: int
    sent: int
    latency: float
    exit_code: int

    @property
    def ideal(self) -> float:
        return self.n * self.latency / self.in_flight


def run_once(project: Path, cache: Path, *, n: int, latency: float, workers: int, concurrency: int,
             prefetch: bool, key: str) -> Result:
    clock = Clock()
    with MessagesServer(clock, latency=latency, record_requests=False) as srv:
        env = {**os.environ, "ANTHROPIC_BASE_URL": srv.base_url, "ANTHROPIC_API_KEY": key}
        env.pop("PYTEST_ADDOPTS", None)
        cmd = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), "--longctx-max-concurrency", str(concurrency),
               "--longctx-model", "anthropic/claude-test", "--longctx-samples", str(n),
               "--longctx-cache-dir", str(cache), "--longctx-report-dir", str(project / "reports"),
               "--longctx-prefetch", "on" if prefetch else "off"]
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True)
        wall = time.monotonic() - start
        stats = srv.stats
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n", file=sys.stderr)
    first_arrival = (clock.first - latency - start) if clock.first is not None else float("nan")
    dispatch = (clock.last - clock.first + latency) if clock.first is not None and clock.last is not None else 0.0
    return Result("prefetch" if prefetch else "off", n, concurrency if prefetch else workers, wall, first_arrival,
                  dispatch, stats.max_in_flight, stats.endpoints.get("messages", 0), latency, proc.returncode)


def dispatcher_alone(folder: Path, *, n: int, latency: float, concurrency: int, key: str) -> tuple[float, int]:
    """The prefetch dispatcher by itself (no pytest): N planned requests, server in another process.

    Shows what one Python process driving the SDK can do; returns (seconds, peak in flight).
    """
    import json

    import anthropic  # noqa: F401  (not timed: a run overlaps this import with planning)

    from pytest_longctx.backends.anthropic import AnthropicBackend
    from pytest_longctx.backends.base import Request, request_key
    from pytest_longctx.dispatch.cache import ResponseCache
    from pytest_longctx.dispatch.prefetch import Dispatcher
    from pytest_longctx.server import fetch_stats

    server = subprocess.Popen([sys.executable, "-m", "pytest_longctx.server", "--port", "0", "--latency", str(latency)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        saved = {k: os.environ.get(k) for k in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")}
        os.environ.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key)
        work = folder / "dispatch-alone"
        work.mkdir(parents=True, exist_ok=True)
        requests = [Request.user(f"Some context.\nThe pass key is {i}.", max_tokens=16) for i in range(n)]
        lines = [json.dumps({"key": request_key("anthropic", "claude-test", r), "request": r.to_json()})
                 for r in requests]
        (work / "plan.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        backend = AnthropicBackend("claude-test", max_concurrency=concurrency)
        dispatcher = Dispatcher(backend, ResponseCache(work / "cache"), work, work / "plan.jsonl",
                                concurrency=concurrency)
        start = time.monotonic()
        dispatcher.start()
        dispatcher.join()
        elapsed = time.monotonic() - start
        peak = fetch_stats(url).max_in_flight
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.terminate()
        server.wait(timeout=10)
    return elapsed, peak


def time_plan(project: Path, cache: Path, n: int) -> float:
    """The child plan run alone (what prefetch runs before it sends anything)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "--longctx-model", "anthropic/claude-test",
           "--longctx-samples", str(n), "--longctx-cache-dir", str(cache), "--longctx-plan=true",
           "--longctx-report-dir", str(project / "plan-reports"), "--longctx-prefetch=off"]
    start = time.monotonic()
    subprocess.run(cmd, cwd=project, capture_output=True, text=True, env={**os.environ, "LONGCTX_CHILD": "1"})
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.25, help="server latency per request, s (default 0.25)")
    parser.add_argument("--workers", type=int, default=8, help="xdist workers (default 8)")
    parser.add_argument("--concurrency", type=int, default=64, help="--longctx-max-concurrency (default 64)")
    parser.add_argument("--sizes", default="640,2560", help="N for prefetch runs (default 640,2560)")
    parser.add_argument("--off-sizes", default="640", help="N for prefetch-off runs (default 640)")
    parser.add_argument("--plan", action="store_true", help="also time the plan run alone and a warm re-run")
    parser.add_argument("--lrt", action="store_true",
                        help="instead: the LRT sweep of evals/lrt against the bare SDK (see lrt_sweep.py)")
    parser.add_argument("--samples", type=int, default=48, help="--lrt: --longctx-samples (default 48: 960 requests)")
    parser.add_argument("--latencies", default="2.0,0.25", help="--lrt: server latencies, s (default 2.0,0.25)")
    args = parser.parse_args(argv)
    key = "sk-ant-bench-not-a-real-key"
    if args.lrt:
        return lrt_main(args, key)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    off_sizes = [int(x) for x in args.off_sizes.split(",") if x]
    root = Path(tempfile.mkdtemp(prefix="longctx-bench-"))
    results: list[Result] = []
    extras: list[str] = []
    alone: dict[int, tuple[float, int]] = {}
    try:
        (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
        (root / "test_bench.py").write_text(EVAL, encoding="utf-8")
        for n in sizes:
            alone[n] = dispatcher_alone(root, n=n, latency=args.latency, concurrency=args.concurrency, key=key)
            print(f"  ran dispatcher alone N={n}: {alone[n][0]:.1f}s", file=sys.stderr)
        for n in sorted(set(sizes) | set(off_sizes)):
            for prefetch in (True, False):
                if n not in (sizes if prefetch else off_sizes):
                    continue
                cache = root / f"cache-{n}-{prefetch}"
                result = run_once(root, cache, n=n, latency=args.latency, workers=args.workers,
                                  concurrency=args.concurrency, prefetch=prefetch, key=key)
                results.append(result)
                print(f"  ran {result.mode:8} N={n}: {result.wall:.1f}s", file=sys.stderr)
                if args.plan and prefetch:
                    plan_s = time_plan(root, root / "empty-cache", n)
                    warm = run_once(root, cache, n=n, latency=args.latency, workers=args.workers,
                                    concurrency=args.concurrency, prefetch=True, key=key)
                    extras.append(f"N={n}: plan run alone {plan_s:.2f}s ({plan_s / n * 1000:.2f} ms/trial); "
                                  f"warm re-run (all cached, {warm.sent} sent) {warm.wall:.2f}s")
                shutil.rmtree(cache, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"\nlatency {args.latency}s, -n {args.workers}, --longctx-max-concurrency {args.concurrency}; "
          f"ideal = N x latency / in-flight bound")
    header = (f"{'mode':8} {'N':>5} {'bound':>5} {'peak':>4} {'wall s':>7} {'ideal s':>7} {'ratio':>6} | "
              f"{'1st req s':>9} {'dispatch s':>10} {'ratio':>6}  exit")
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r.mode:8} {r.n:>5} {r.in_flight:>5} {r.peak:>4} {r.wall:>7.2f} {r.ideal:>7.2f} "
              f"{r.wall / r.ideal:>6.2f} | {r.first_request:>9.2f} {r.dispatch:>10.2f} "
              f"{r.dispatch / r.ideal:>6.2f}  {r.exit_code}{'' if r.sent == r.n else f' (sent {r.sent})'}")
    for n, (seconds, peak) in alone.items():
        ideal = n * args.latency / args.concurrency
        ratio = seconds / ideal
        print(f"{'alone':8} {n:>5} {args.concurrency:>5} {peak:>4} {seconds:>7.2f} {ideal:>7.2f} {ratio:>6.2f} |"
              f" {'':>9} {seconds:>10.2f} {ratio:>6.2f}  (dispatcher only, no pytest)")
    by_n = {(r.mode, r.n): r for r in results}
    for n in off_sizes:
        on, off = by_n.get(("prefetch", n)), by_n.get(("off", n))
        if on and off:
            print(f"N={n}: prefetch off / on wall time = {off.wall / on.wall:.2f}x")
    for line in extras:
        print(line)
    return 0 if all(r.exit_code == 0 for r in results) else 1


def lrt_main(args: argparse.Namespace, key: str) -> int:
    """``--lrt``: the suite's LRT sweep and the bare SDK on the same prompts, per latency."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from lrt_sweep import lrt_benchmark

    root = Path(tempfile.mkdtemp(prefix="longctx-bench-lrt-"))
    try:
        lines = lrt_benchmark(root, latencies=[float(x) for x in args.latencies.split(",") if x],
                              samples=args.samples, workers=args.workers, concurrency=args.concurrency, key=key)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
