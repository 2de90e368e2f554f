"""How many xdist workers (``-n``) a run should use: the same selection at -n 0, 2, auto and 8, side by side.

Three models, each on the repository's ``evals/test_demo.py`` (the pass-key demo; more trials per cell with
``--samples``), a fresh cache for every run so every answer is computed or sent:

- ``fake/perfect``: a test double that answers in-process: what is left is pytest's and the workers' own cost;
- ``local/smollm2-135m``: the embedded model, which every worker shares through one local model server;
- ``anthropic/claude-test`` against the local Messages-API server with ``--latency`` seconds a request (a remote
  model: time is spent waiting, not computing).

Printed: wall seconds per ``-n`` and the ratio to ``-n 0`` (lower is faster), and the machine's CPU count. The
numbers are wall times on a shared machine: run it when it is otherwise idle, and compare ratios, not seconds.

    python benchmarks/bench_workers.py                         # all three models, -n 0 2 auto 8
    python benchmarks/bench_workers.py --models fake remote --workers 0 2 8 --samples 20 --latency 0.5
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_longctx.server import MessagesServer
from pytest_longctx.server.responders import last_user_text

ROOT = Path(__file__).resolve().parent.parent
DEMO = "evals/test_demo.py"
MODELS = {"fake": "fake/perfect", "local": "local/smollm2-135m", "remote": "anthropic/claude-test"}


def passkey(body: dict[str, Any]) -> str:
    """A remote model that reads the pass key out of the prompt."""
    found = re.search(r"The pass key is (\d+)", last_user_text(body))
    return found.group(1) if found else "no pass key"


@contextmanager
def model_env(kind: str, latency: float) -> Iterator[dict[str, str]]:
    """The environment a run of ``kind`` needs (the Messages-API server for the remote model, while it runs)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    if kind != "remote":
        yield env
        return
    with MessagesServer(passkey, latency=latency, record_requests=False) as srv:
        yield {**env, "ANTHROPIC_BASE_URL": srv.base_url, "ANTHROPIC_API_KEY": "sk-ant-bench-not-a-key"}


def run_once(kind: str, workers: str, samples: int, latency: float, scratch: Path) -> tuple[float, int, str]:
    """(wall seconds, exit code, pytest's last line) of one run with a fresh cache and report dir."""
    folder = Path(tempfile.mkdtemp(prefix=f"bench-workers-{kind}-{workers}-", dir=scratch))
    cmd = [sys.executable, "-m", "pytest", DEMO, "-q", "-p", "no:cacheprovider", "-n", workers,
           "--longctx-model", MODELS[kind], "--longctx-samples", str(samples),
           "--longctx-cache-dir", str(folder / "cache"), "--longctx-report-dir", str(folder / "reports")]
    with model_env(kind, latency) as env:
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
        wall = time.monotonic() - start
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode not in (0, 1):
        print(proc.stdout[-1500:], proc.stderr[-1500:], sep="\n", file=sys.stderr)
    return wall, proc.returncode, lines[-1].strip("= ") if lines else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["fake", "local", "remote"])
    parser.add_argument("--workers", nargs="+", default=["0", "2", "auto", "8"], help="-n values (default 0 2 auto 8)")
    parser.add_argument("--samples", type=int, default=8, help="trials per cell; the demo has 2 cells (default 8)")
    parser.add_argument("--latency", type=float, default=1.0, help="remote model's seconds a request (default 1.0)")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    results: dict[str, dict[str, float]] = {}
    try:
        for kind in args.models:
            for workers in args.workers:
                wall, code, last = run_once(kind, workers, args.samples, args.latency, scratch)
                results.setdefault(kind, {})[workers] = wall
                print(f"{kind:7} -n {workers:5} {wall:7.1f} s  exit {code}  {last}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"\n{os.cpu_count()} CPUs; {DEMO}, {2 * args.samples} trials per run, fresh cache; remote latency "
          f"{args.latency} s; wall seconds (ratio to -n {args.workers[0]}: lower is faster)")
    print(f"{'model':28}" + "".join(f"{'-n ' + w:>18}" for w in args.workers))
    for kind, walls in results.items():
        base = walls[args.workers[0]]
        print(f"{MODELS[kind]:28}" + "".join(f"{walls[w]:9.1f} s ({walls[w] / base:4.2f})" for w in args.workers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
