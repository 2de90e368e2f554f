"""The full source study's plan: wall time, CPU and peak memory, for this checkout and others side by side.

Issue #26, item 5. Each run is ``python -m pytest evals -k "qa and not litm" --longctx-protocol source
--longctx-samples all --longctx-plan true -n 2 --longctx-model anthropic/claude-sonnet-4-5`` (19,750 requests
when no qa baseline is stored), in the checkout's own folder, with a report folder and a cache folder of the
benchmark's (one cache for every run, so each sees the same stored answers and section counts). Printed per run:

* ``wall s``, ``cpu s``: the whole run; CPU is user + system of pytest and every process it waited for
  (controller and xdist workers).
* ``largest MB``: the highest peak resident memory of any one process of the run (its ``VmHWM``), and which;
  ``tree MB``: the highest total resident memory of the process tree at any moment (polled every 0.1 s).
* requests, input tokens and the estimated input cost, from the plan's record (``longctx-plan.json``, or
  ``longctx.json`` for a tree that writes plans there).

First, ``--check-samples N`` (default 20; 0: skip) runs the same plan at N trials a cell in every tree; the
end of the output says whether their figures (requests, tokens, prompt-cache shares, costs) are identical.

``--tree PATH`` runs another checkout (e.g. ``git archive <rev> | tar -x -C /tmp/before``) through ``PYTHONPATH``,
as ``bench_startup.py`` does. ``--floor`` adds a run of the same selection whose test bodies do not run (a ``-p``
plugin answers ``pytest_pyfunc_call`` for them): what pytest, pytest-asyncio and xdist cost for as many tests.

    python benchmarks/bench_plan.py                         # this checkout, the full study (~4 min)
    python benchmarks/bench_plan.py --tree /tmp/before      # before/after (the old plan: 15-40 min here)
    python benchmarks/bench_plan.py --samples 20 --floor    # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_startup import stand_ins

REPO = Path(__file__).resolve().parent.parent
SELECTION = ["evals", "-k", "qa and not litm", "--longctx-protocol", "source", "--longctx-plan", "true"]
FLOOR_PLUGIN = '''
"""Benchmark floor: the tests are collected, their fixtures set up, their bodies not run."""
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if pyfuncitem.get_closest_marker("longctx") is not None:
        return True
    return None
'''


@dataclass
class Run:
    name: str
    samples: str
    wall: float = 0.0
    cpu: float = 0.0
    exit_code: int = 0
    largest_kb: int = 0
    largest_role: str = ""
    tree_kb: int = 0
    plan: dict[str, Any] = field(default_factory=dict)


class TreeMemory:
    """Polls /proc for a process and its descendants: each one's peak (VmHWM) and the tree's total at any moment."""

    def __init__(self, root_pid: int, interval: float = 0.1) -> None:
        self.root = root_pid
        self.peaks: dict[int, tuple[int, str]] = {}
        self.tree_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(interval,), daemon=True)
        self._thread.start()

    def _poll(self, interval: float) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in self._tree():
                rss, hwm, role = _status(pid)
                total += rss
                if hwm > self.peaks.get(pid, (0, ""))[0]:
                    self.peaks[pid] = (hwm, role)
            self.tree_kb = max(self.tree_kb, total)
            self._stop.wait(interval)

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo += children.get(pid, [])
        return out

    def stop(self) -> tuple[int, str, int]:
        """(largest peak in kB, which process, the tree's largest total in kB)."""
        self._stop.set()
        self._thread.join()
        kb, role = max(self.peaks.values(), default=(0, ""))
        return kb, role, self.tree_kb


def _status(pid: int) -> tuple[int, int, str]:
    """(VmRSS kB, VmHWM kB, a short role) of a process; zeros when it is gone."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":" in line)
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return 0, 0, ""
    role = "worker" if "execnet" in cmd or "-c import sys" in cmd or "sys.stdin.readline" in cmd else "controller"
    kb = lambda name: int(fields.get(name, "0 kB").split()[0])  # noqa: E731
    return kb("VmRSS"), kb("VmHWM"), role


def run_plan(name: str, tree: Path, samples: str, workers: int, model: str, cache: Path, env: dict[str, str],
             extra: list[str]) -> Run:
    reports = Path(tempfile.mkdtemp(prefix="bench-plan-reports-"))
    args = [sys.executable, "-m", "pytest", *SELECTION, "--longctx-samples", samples, "-n", str(workers), "-q",
            "--longctx-model", model, "--longctx-cache-dir", str(cache), "--longctx-report-dir", str(reports),
            *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    proc = subprocess.Popen(args, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    memory = TreeMemory(proc.pid)
    out, _ = proc.communicate()
    run = Run(name, samples, wall=time.time() - start, exit_code=proc.returncode)
    run.largest_kb, run.largest_role, run.tree_kb = memory.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    for record in ("longctx-plan.json", "longctx.json"):
        if (reports / record).is_file():
            run.plan = json.loads((reports / record).read_text(encoding="utf-8")).get("plan") or {}
            break
    if proc.returncode != 0 or not run.plan:
        print(f"  {name}: exit {proc.returncode}, no plan\n" + "\n".join(out.splitlines()[-8:]), file=sys.stderr)
    shutil.rmtree(reports, ignore_errors=True)
    print(f"  {name} ({samples} a cell): {run.wall:.1f}s wall, {run.cpu:.1f} CPU s", file=sys.stderr)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[], type=Path,
                        help="also plan with the plugin of this checkout (repeatable; rows named by folder)")
    parser.add_argument("--samples", default="all", help="--longctx-samples of the timed runs (default all)")
    parser.add_argument("--check-samples", default="20",
                        help="--longctx-samples of the runs whose figures are compared across trees (default 20; "
                             "0: none)")
    parser.add_argument("--workers", type=int, default=2, help="xdist workers (default 2)")
    parser.add_argument("--model", default="anthropic/claude-sonnet-4-5")
    parser.add_argument("--floor", action="store_true", help="also run the selection with the test bodies not run")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-plan-"))
    cache = scratch / "cache"
    plugins = scratch / "plugins"
    plugins.mkdir()
    (plugins / "bench_plan_floor.py").write_text(FLOOR_PLUGIN, encoding="utf-8")
    base_env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    base_env.setdefault("LONGCTX_DATA_DIR", str(REPO.parent / "shared" / "corpora"))
    trees: list[tuple[str, Path, dict[str, str]]] = [(REPO.name, REPO, base_env)]
    for tree in args.tree:
        tree = tree.resolve()
        stand_ins(tree)
        trees.append((tree.name, tree, {**base_env, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(tree), base_env.get("PYTHONPATH")]))}))
    checks: list[Run] = []
    rows: list[Run] = []
    try:
        if args.check_samples != "0":  # first: it also fills the shared cache (section counts) for the timed runs
            checks = [run_plan(name, path, args.check_samples, args.workers, args.model, cache, env, [])
                      for name, path, env in trees]
        for name, path, env in trees:
            rows.append(run_plan(name, path, args.samples, args.workers, args.model, cache, env, []))
        if args.floor:
            env = {**base_env, "PYTHONPATH": os.pathsep.join(filter(None, [str(plugins),
                                                                          base_env.get("PYTHONPATH")]))}
            rows.append(run_plan("floor: bodies not run", REPO, args.samples, args.workers, args.model, cache, env,
                                 ["-p", "bench_plan_floor"]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"\npytest {' '.join(SELECTION)} --longctx-samples {args.samples} -n {args.workers} --longctx-model "
          f"{args.model}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    width = max(len(r.name) for r in rows)
    header = (f"{'tree':<{width}} {'wall s':>7} {'cpu s':>7} {'largest MB':>16} {'tree MB':>8} "
              f"{'requests':>9} {'input tokens':>14} {'est. input $':>12} exit")
    print(header)
    print("-" * len(header))
    for r in rows:
        m = next(iter((r.plan.get("models") or {}).values()), {})
        largest = f"{r.largest_kb / 1024:.0f} ({r.largest_role})"
        print(f"{r.name:<{width}} {r.wall:>7.1f} {r.cpu:>7.1f} {largest:>16} {r.tree_kb / 1024:>8.0f} "
              f"{m.get('requests', 0):>9,} {m.get('input_tokens', 0):>14,} {m.get('est_input_cost_usd', 0):>12,.2f} "
              f"{r.exit_code}")
    base = rows[0]
    for r in rows[1:len(trees)]:
        print(f"{r.name} / {base.name}: wall {r.wall / base.wall:.2f}x, CPU {r.cpu / base.cpu:.2f}x, largest process "
              f"{r.largest_kb / max(1, base.largest_kb):.2f}x, process tree {r.tree_kb / max(1, base.tree_kb):.2f}x")
    if checks:
        reference = checks[0].plan.get("models")
        for r in checks[1:]:
            same = r.plan.get("models") == reference
            print(f"plan at {args.check_samples} a cell, {r.name} vs {checks[0].name}: "
                  + ("identical figures" if same else f"DIFFERENT:\n  {r.plan.get('models')}\n  {reference}"))
        m = next(iter((reference or {}).values()), {})
        print(f"  ({checks[0].name}: {m.get('requests', 0):,} requests, {m.get('input_tokens', 0):,} input tokens, "
              f"{m.get('prefix_groups', 0):,} prefixes, billed {m.get('billed_input_tokens', 0):,})")
    return 0 if all(r.exit_code == 0 for r in rows + checks) else 1


if __name__ == "__main__":
    sys.exit(main())
