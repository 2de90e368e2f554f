"""Stop means stop: how long after SIGINT do requests keep starting, and what does the run exit with?

Runs the LRT sweep of the issue (``pytest evals -k lrt -n 2 --longctx-samples 48
--longctx-max-concurrency 16 --longctx-model anthropic/claude-test``) against the local Messages-API
server at 3 s latency with a fresh cache, and sends SIGINT at a moment found by waiting on events:

* ``planning``: the child plan run is still planning (no ``keys.txt`` in the prefetch work folder yet)
  and the dispatcher already has all its lanes in flight at the server;
* ``dispatch``: planning is over (``keys.txt`` written), the tests run, and the dispatcher has started
  two more waves of requests since;
* ``planning-ignored``: as ``planning``, to the pytest process only, with SIGINT inherited as ignored
  (``pytest ... &`` in a script): the issue's reproduction, where the run went on to the end.

Printed per case, from the server's own arrival times: seconds from the signal to the last request
started, requests that arrived after the signal (those already in transit count), the exit code, the
record's ``stopped`` and whether the prefetch work folder is gone.

    python benchmarks/bench_stop.py                      # all three cases
    python benchmarks/bench_stop.py --cases dispatch --samples 8 --latency 1
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_longctx.server import MessagesServer

ROOT = Path(__file__).resolve().parent.parent
CASES = ("planning", "dispatch", "planning-ignored")


@dataclass
class Result:
    case: str
    to_last_start: float | None
    after: int
    before: int
    exit_code: int
    stopped: str | None
    work_left: int
    wall_after_signal: float


def _work_folders(cache: Path) -> list[Path]:
    folder = cache / "prefetch"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _wait(what: str, proc: subprocess.Popen[bytes], condition: Callable[[], bool], timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise SystemExit(f"pytest exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.05)


def run_case(case: str, *, samples: int, latency: float, workers: int, concurrency: int, key: str) -> Result:
    folder = Path(tempfile.mkdtemp(prefix=f"bench-stop-{case}-"))
    cache = folder / "cache"
    with MessagesServer(lambda body: "42", latency=latency, record_requests=False) as srv:
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
        env.update(ANTHROPIC_BASE_URL=srv.base_url, ANTHROPIC_API_KEY=key)
        cmd = [sys.executable, "-m", "pytest", "evals", "-k", "lrt", "-q", "-n", str(workers),
               "--longctx-model", "anthropic/claude-test", "--longctx-samples", str(samples),
               "--longctx-max-concurrency", str(concurrency), "--longctx-cache-dir", str(cache),
               "--longctx-report-dir", str(folder / "reports")]
        ignored = case == "planning-ignored"

        def ignore() -> None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        with (folder / "pytest-output.txt").open("wb") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=ignore if ignored else None)
        try:
            def planned() -> bool:
                return any((w / "keys.txt").exists() for w in _work_folders(cache))

            if case in ("planning", "planning-ignored"):
                _wait("all lanes in flight while planning", proc, lambda: srv.stats.in_flight >= concurrency)
                if planned():
                    raise SystemExit("planning ended before all lanes were in flight: use more --samples")
            else:
                _wait("the end of planning", proc, planned)
                target = srv.stats.endpoints.get("messages", 0) + 2 * concurrency
                _wait("two more waves of requests", proc, lambda: srv.stats.endpoints.get("messages", 0) >= target)
            signalled = time.time()
            if ignored:
                os.kill(proc.pid, signal.SIGINT)  # `kill -INT $pid` of a background job
            else:
                os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole process group
            code = proc.wait(timeout=3600)
            ended = time.time()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        arrivals = srv.stats.arrivals
    record_file = folder / "reports" / "longctx.json"
    stopped = json.loads(record_file.read_text())["stopped"] if record_file.is_file() else "(no record)"
    after = [t for t in arrivals if t > signalled]
    return Result(case, (max(arrivals) - signalled) if arrivals else None, len(after), len(arrivals) - len(after),
                  code, stopped, len(_work_folders(cache)), ended - signalled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--samples", type=int, default=48)
    parser.add_argument("--latency", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    key = "sk-ant-bench-not-a-real-key"
    print(f"LRT sweep: -n {args.workers}, --longctx-samples {args.samples}, C={args.concurrency}, "
          f"server latency {args.latency:g}s; SIGINT at an event of the run")
    print(f"{'case':<17} {'signal->last start':>18} {'after':>6} {'before':>7} {'exit':>5} {'signal->exit':>12} "
          f"{'work left':>9}  stopped")
    for case in args.cases:
        r = run_case(case, samples=args.samples, latency=args.latency, workers=args.workers,
                     concurrency=args.concurrency, key=key)
        last = f"{r.to_last_start:+.2f}s" if r.to_last_start is not None else "-"
        print(f"{r.case:<17} {last:>18} {r.after:>6} {r.before:>7} {r.exit_code:>5} {r.wall_after_signal:>11.1f}s "
              f"{r.work_left:>9}  {r.stopped}", flush=True)


if __name__ == "__main__":
    main()
