"""Message Batches at the API's limits (issue #25): the LRT study at 6,500 lines through ``--longctx-batch``.

Against the local Messages-API server in its own process, enforcing the API's limits (100,000 requests or
256,000,000 bytes per batch; 413 ``request_too_large`` above), the suite runs
``pytest evals/lrt --longctx-protocol source --longctx-lrt-lines 6500 --longctx-samples S --longctx-batch -n 2``
on a copy of ``evals/lrt`` with a fresh cache, for study sizes side by side: S = 150, 300 and 600 (600, 1,200 and
2,400 requests; ~150, ~300 and ~600 MB of batch items). Per run it prints the batches (requests and bytes each, as
the server received them), the peak RSS of the controlling pytest process (``ru_maxrss`` of that process alone:
the plan child and the xdist workers are other processes) when its batches were collected and at the end of the
run, against the total batch bytes, and the outcomes.

Then the 1,200-request study again with 3% of the requests expired by the server (a fresh cache), and a second run
with nothing expiring: the first run's errors must be exactly its expired requests, and the second run must
submit exactly those (its batch's keys) and nothing else.

    python benchmarks/bench_batch.py [--samples 150,300,600] [--expire 0.03] [--expire-samples 300] [--before DIR]

``--before DIR`` also runs the studies with the batch path as it was before (one batch of every request, built
in memory by the SDK) from a checkout in DIR, against a server without the byte limit (with it: 413, nothing sent).

Takes ~20 minutes on 2 cores; needs ~2 GB of free disk for the caches and the plan files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lrt_sweep import REPO, make_project

MODEL = "anthropic/claude-sonnet-4-5"
#: Runs pytest in this process and reports this process's peak RSS (KiB on Linux) on stderr: once the batches are
#: collected (xdist starts its workers only then) and at the end (after the workers' reports were aggregated).
MEASURED = """
import resource, sys, pytest

class Peak:
    batched = 0

    @pytest.hookimpl(trylast=True)
    def pytest_xdist_setupnodes(self, config, specs):
        Peak.batched = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

code = pytest.main(sys.argv[1:], plugins=[Peak()])
print("BENCH_PEAK_RSS_KB", Peak.batched, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


class Server:
    """``python -m pytest_longctx.server`` with the API's batch limits (its defaults)."""

    def __init__(self, expire_rate: float, max_bytes: int = 256_000_000) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "pytest_longctx.server", "--port", "0", "--batch-delay",
                                      "1", "--batch-expire-rate", str(expire_rate), "--seed", "25",
                                      "--batch-max-bytes", str(max_bytes)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def stats(self) -> dict[str, Any]:
        from pytest_longctx.server import fetch_stats

        return fetch_stats(self.url).to_json(requests=False)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def run_study(project: Path, cache: Path, server: Server, samples: int, name: str,
              source: Path | None = None) -> dict[str, Any]:
    """One ``--longctx-batch`` run of the study (``source``: another checkout's package, e.g. the code before
    this change); what it submitted, its outcomes and its controller's peak RSS."""
    report = project / f"report-{name}"
    env = {**os.environ, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-bench",
           "LONGCTX_BATCH_POLL": "1"}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    env.pop("PYTEST_ADDOPTS", None)
    args = ["evals/lrt", "--longctx-model", MODEL, "--longctx-protocol", "source", "--longctx-lrt-lines", "6500",
            "--longctx-samples", str(samples), "--longctx-batch" if source is None else "--longctx-batch=true",
            "-n", "2", "-q",
            "--longctx-cache-dir", str(cache), "--longctx-report-dir", str(report)]
    before = server.stats()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", MEASURED, *args], cwd=project, env=env, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - start
    after = server.stats()
    batched, peak = next([int(v) for v in line.split()[1:]] for line in proc.stderr.splitlines()
                         if line.startswith("BENCH_PEAK_RSS_KB"))
    if not (report / "longctx.json").is_file():
        raise SystemExit(f"{name}: no run record (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    record = json.loads((report / "longctx.json").read_text(encoding="utf-8"))
    outcomes = {o: sum(1 for t in record["trials"] if t["outcome"] == o) for o in ("correct", "incorrect", "error")}
    batch = record.get("batch") or {}
    return {"name": name, "samples": samples, "exit": proc.returncode, "wall_s": round(wall, 1),
            "batched_rss_mb": round(batched / 1024, 1), "peak_rss_mb": round(peak / 1024, 1),
            "outcomes": outcomes, "batch": batch,
            "server_batch_bytes": after["batch_bytes"][len(before["batch_bytes"]):],
            "server_batch_requests": after["batch_requests"][len(before["batch_requests"]):],
            "errors": [t["error"] for t in record["trials"] if t["outcome"] == "error"],
            "lines": [line for line in proc.stdout.splitlines() if line.startswith("longctx batch:")]}


def expired_keys(url: str, batch_ids: list[str]) -> set[str]:
    """The requests of these batches that ended ``expired``, as the API's results say (read with the SDK)."""
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key="sk-ant-bench")
    return {r.custom_id for bid in batch_ids for r in client.messages.batches.results(bid)
            if r.result.type == "expired"}


def show(result: dict[str, Any]) -> None:
    total = sum(result["server_batch_bytes"])
    print(f"\n== {result['name']}: --longctx-samples {result['samples']} (exit {result['exit']}, "
          f"{result['wall_s']:.0f}s wall)")
    for line in result["lines"]:
        print(f"   {line}")
    sizes = ", ".join(f"{n:,} request(s) / {b / 1e6:,.1f} MB" for n, b in
                      zip(result["server_batch_requests"], result["server_batch_bytes"], strict=True))
    largest = max(result["server_batch_bytes"], default=0)
    print(f"   batches: {len(result['server_batch_bytes'])} [{sizes}]; largest {largest / 1e6:,.1f} MB "
          "(limit 256.0 MB)")
    print(f"   total batch bytes {total / 1e6:,.1f} MB; controller peak RSS {result['batched_rss_mb']:,.1f} MB "
          f"when its batches were collected, {result['peak_rss_mb']:,.1f} MB at the end of the run")
    print(f"   outcomes {result['outcomes']}; endings {result['batch'].get('endings', '(not recorded)')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", default="150,300,600", help="study sizes (trials per cell; 4 cells)")
    parser.add_argument("--expire", type=float, default=0.03, help="fraction expired in the resubmission phase")
    parser.add_argument("--expire-samples", type=int, default=300, help="study size of the resubmission phase")
    parser.add_argument("--before", type=Path, default=None,
                        help="a checkout of the code before this change (git archive f9fa3c9 | tar -x -C DIR): its "
                             "batch path runs the same studies against a server without the byte limit")
    args = parser.parse_args()
    sizes = [int(s) for s in args.samples.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        project = make_project(Path(tmp))
        os.environ.setdefault("LONGCTX_DATA_DIR", str(REPO.parent / "shared" / "corpora"))
        server = Server(0.0)
        try:
            for samples in sizes:
                result = run_study(project, Path(tmp) / f"cache-{samples}", server, samples, f"study {samples}")
                results.append(result)
                show(result)
        finally:
            server.close()
        before = []
        if args.before is not None:
            server = Server(0.0, max_bytes=10**12)  # the old path sends one batch of everything: 413 at the limit
            try:
                for samples in sizes:
                    result = run_study(project, Path(tmp) / f"cache-before-{samples}", server, samples,
                                       f"before this change: study {samples}", source=args.before.resolve())
                    before.append(result)
                    show(result)
            finally:
                server.close()
        largest = args.expire_samples
        cache = Path(tmp) / "cache-expire"
        server = Server(args.expire)
        try:
            first = run_study(project, cache, server, largest, f"study {largest}, {args.expire:.0%} expired")
            expired = expired_keys(server.url, first["batch"]["submitted"])
        finally:
            server.close()
        show(first)
        server = Server(0.0)
        try:
            second = run_study(project, cache, server, largest, f"study {largest}, the next run")
        finally:
            server.close()
        show(second)
        resubmitted = {key for bid in second["batch"]["submitted"]
                       for key in json.loads((cache / "batches" / f"{bid}.json").read_text(encoding="utf-8"))["keys"]}
        said = sum("request expired" in e for e in first["errors"])
        print(f"\nexpired in the first run: {len(expired)} of {first['batch']['requests_submitted']:,} "
              f"({len(expired) / max(1, first['batch']['requests_submitted']):.1%}); its errors: "
              f"{first['outcomes']['error']} ({said} saying 'request expired')")
        print(f"the next run submitted {len(resubmitted)} request(s) in {len(second['batch']['submitted'])} batch(es); "
              f"exactly the expired ones: {resubmitted == expired}; its errors: {second['outcomes']['error']}; "
              f"trials answered: {second['outcomes']['correct'] + second['outcomes']['incorrect']:,}")
    print("\npeak RSS of the controlling pytest process against the study (batches collected / end of run):")
    for r in [*results, second]:
        print(f"  {r['batch']['requests_submitted']:>6,} requests  {sum(r['server_batch_bytes']) / 1e6:>7,.1f} MB "
              f"in {len(r['server_batch_bytes'])} batch(es), {sum(r['outcomes'].values()):>6,} trials  ->  "
              f"{r['batched_rss_mb']:6,.1f} MB / {r['peak_rss_mb']:6,.1f} MB")
    for r in before:
        print(f"  before this change: {r['batch']['requests_submitted']:>6,} requests  "
              f"{sum(r['server_batch_bytes']) / 1e6:>7,.1f} MB in {len(r['server_batch_bytes'])} batch(es)  ->  "
              f"{r['batched_rss_mb']:6,.1f} MB / {r['peak_rss_mb']:6,.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
