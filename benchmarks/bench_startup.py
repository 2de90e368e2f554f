"""Start-up: the fixed cost of a run (pytest + xdist + planning) beside a plain ``pytest -n W`` of as many tests.

Issue #14, "Start-up". One benchmark run, side by side (alternating, ``--repeat`` times):

* ``plain``: ``pytest -n W`` on N trivial tests (``assert i >= 0``), the plugin's entry points disabled, in
  a project with the same ``[tool.pytest.ini_options]`` as this repository.
* ``lrt``: the LRT sweep, ``pytest -n W --longctx-samples S --longctx-max-concurrency C --longctx-model
  anthropic/claude-test`` on a copy of this repository's ``evals/lrt`` (N = 20 cells x S trials), against
  the local Messages-API server with latency L in its own process, fresh cache.
* ``lrt warm``: the same again with the cache it filled (0 requests sent): the fixed cost with nothing to wait for.
* ``lrt warm, no plan``: the same with ``--longctx-prefetch off``: no plan run, every answer read from the cache by
  the test that asks. The trials' own cost in the workers, which no design that runs them as pytest tests avoids:
  a run that still has to send its requests cannot end before it.

The target: ``lrt`` wall time <= ``plain`` wall time + 1.2 x ideal, ideal = N x L / C. Per run, from a
small timing plugin loaded with ``-p`` (it writes one line per event; it never changes what runs): when
planning ended (the controller's ``pytest_xdist_setupnodes`` returned), when the last worker had
collected, when the last test ended on a worker, and the run's end; and from the server, the first
request's arrival and the last answer.

``--tree PATH`` runs the plugin from another checkout of this repository (e.g. ``git archive <rev>``
unpacked into a folder) through ``PYTHONPATH``, for before/after rows in one benchmark run; entry points
this installation declares but that tree lacks get an empty stand-in module (so an older tree loads).

    python benchmarks/bench_startup.py                          # L=0.25 s, S=32 (640 requests), C=64, -n 8
    python benchmarks/bench_startup.py --tree /tmp/before --repeat 1
    python benchmarks/bench_startup.py --also "--longctx-gc-freeze off"   # with and without the frozen heap
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLAIN = '''
import pytest


@pytest.mark.parametrize("i", range({n}))
def test_plain(i):
    assert i >= 0
'''
PHASES = '''
"""Benchmark timing plugin: one line per event, appended to $BENCH_PHASES (no effect on the run)."""
import atexit
import os
import resource
import time

import pytest

_seen = []


def _note(event):
    who = os.environ.get("PYTEST_XDIST_WORKER") or ("child" if os.environ.get("LONGCTX_CHILD") else "main")
    with open(os.environ["BENCH_PHASES"], "a", encoding="utf-8") as fh:
        fh.write(f"{time.time():.4f} {who} {event}\\n")


def pytest_collection_finish(session):
    _note("collected")


@pytest.hookimpl(trylast=True, optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    _note("planned")


def pytest_runtest_logfinish(nodeid, location):
    _seen.append(nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    _note(f"tests-done {len(_seen)}")


def _cpu():  # at exit: pytest's clean-ups (its exit collections, the plugin's thaw) included
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _note(f"cpu {usage.ru_utime + usage.ru_stime:.3f}")


def pytest_configure(config):
    atexit.register(_cpu)
'''
SERVER = ("import sys; from pytest_longctx.server import MessagesServer\n"
          "srv = MessagesServer('echo', latency=float(sys.argv[1]), record_requests=False).start()\n"
          "print(srv.base_url, flush=True); sys.stdin.read(); srv.stop()\n")


@dataclass
class Run:
    name: str
    wall: float
    exit_code: int
    planned: float | None = None  # seconds from start: the controller finished planning (setupnodes returned)
    collected: float | None = None  # the last worker had collected
    tests_done: float | None = None  # the last worker's last test ended
    first_request: float | None = None
    last_answer: float | None = None
    sent: int = 0
    cpu: float = 0.0  # CPU seconds (user + system) of pytest and every process it waited for
    cpu_by_role: dict[str, float] | None = None  # main, child (plan run), workers (summed), server


def our_plugins() -> list[str]:
    """The names of this distribution's pytest11 entry points (disabled in the plain run)."""
    return sorted(e.name for e in entry_points(group="pytest11") if e.value.startswith("pytest_longctx"))


def stand_ins(tree: Path) -> None:
    """Empty modules for entry points an older tree lacks, so that pytest can load it."""
    for ep in entry_points(group="pytest11"):
        if not ep.value.startswith("pytest_longctx"):
            continue
        path = tree.joinpath(*ep.value.split(":")[0].split(".")).with_suffix(".py")
        if not path.exists() and path.parent.is_dir():
            path.write_text('"""Stand-in written by bench_startup.py: this tree has no such plugin."""\n')


def ini_section() -> str:
    """This repository's ``[tool.pytest.ini_options]`` (without testpaths), for both projects."""
    import tomllib

    ini = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    ini.pop("testpaths", None)
    return "[tool.pytest.ini_options]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in ini.items())


class Server:
    """The local Messages-API server in its own process (it never competes for the benchmark's GIL)."""

    def __init__(self, latency: float, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, str(latency)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def arrivals(self) -> list[float]:
        from pytest_longctx.server import fetch_stats

        return list(fetch_stats(self.url).arrivals)

    def cpu(self) -> float:
        """The server process's CPU seconds so far (user + system, from /proc; 0 where there is none)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def run_pytest(name: str, args: list[str], cwd: Path, env: dict[str, str], phases: Path,
               server: Server | None = None, latency: float = 0.0) -> Run:
    phases.write_text("", encoding="utf-8")
    before = len(server.arrivals()) if server else 0
    server_cpu = server.cpu() if server else 0.0
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, env={**env, "BENCH_PHASES": str(phases)},
                          capture_output=True, text=True)
    run = Run(name, time.time() - start, proc.returncode)
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    if proc.returncode not in (0,):
        print(f"  {name}: exit {proc.returncode}\n" + "\n".join((proc.stdout + proc.stderr).splitlines()[-8:]),
              file=sys.stderr)
    events = [line.split(" ", 2) for line in phases.read_text(encoding="utf-8").splitlines()]

    def last(who: str | None, what: str) -> float | None:
        times = [float(t) - start for t, w, e in events if e.startswith(what) and (who is None or
                 (w.startswith("gw") if who == "gw" else w == who))]
        return max(times) if times else None

    roles: dict[str, float] = {}
    for _, who, event in events:
        if event.startswith("cpu "):
            role = "workers" if who.startswith("gw") else who
            roles[role] = roles.get(role, 0.0) + float(event.split()[1])
    if server is not None:
        roles["server"] = server.cpu() - server_cpu
    run.cpu_by_role = roles
    run.planned = last("main", "planned")
    run.collected = last("gw", "collected")
    run.tests_done = last("gw", "tests-done")
    if server is not None:
        arrivals = server.arrivals()[before:]
        run.sent = len(arrivals)
        if arrivals:
            run.first_request = min(arrivals) - start
            run.last_answer = max(arrivals) + latency - start
    return run


@dataclass
class Floor:
    """What the same 640 requests cost without pytest: the child plan run alone, and the bare SDK sending them."""

    plan_wall: float
    plan_cpu: float
    planned: int
    sdk_wall: float
    sdk_cpu: float  # this process, which does nothing else meanwhile
    server_cpu: float  # the server answering the bare SDK's requests


def measure_floor(project: Path, server: Server, env: dict[str, str], args: argparse.Namespace) -> Floor:
    """The plan run alone (its CPU), then the bare SDK (``AsyncAnthropic`` + ``Semaphore(C)``) sending what it planned
    to the same server, with this process's and the server's CPU seconds."""
    from lrt_sweep import bare_sdk, load_params, time_plan

    plan_file = project / "floor-plan.jsonl"
    plan_wall, _, planned, plan_cpu = time_plan(project, plan_file, args.samples, env)
    params = load_params(plan_file)
    server_before, cpu_before = server.cpu(), time.process_time()
    sdk_wall, _ = bare_sdk(params, server.url, env["ANTHROPIC_API_KEY"], args.concurrency)
    floor = Floor(plan_wall, plan_cpu, planned, sdk_wall, time.process_time() - cpu_before,
                  server.cpu() - server_before)
    print(f"  floor: plan alone {plan_wall:.1f}s, bare SDK {sdk_wall:.1f}s", file=sys.stderr)
    return floor


def print_floor(floor: Floor, plains: list[Run], ideal: float) -> None:
    """The CPU the target leaves for everything of ours, beside what pytest and the requests alone take."""
    print(f"\nWithout pytest, the same requests: the child plan run alone {floor.plan_wall:.2f}s wall, "
          f"{floor.plan_cpu:.1f} CPU s for {floor.planned} requests; the bare SDK (AsyncAnthropic + Semaphore) "
          f"sending them {floor.sdk_wall:.2f}s wall, {floor.sdk_cpu:.1f} CPU s, the server answering them "
          f"{floor.server_cpu:.1f} CPU s.")
    cores = os.cpu_count() or 1
    for plain in plains:
        need = plain.cpu + floor.sdk_cpu + floor.server_cpu
        print(f"  plain {plain.wall:.2f}s: target {plain.wall + 1.2 * ideal:.2f}s; plain's CPU + the bare SDK's + "
              f"the server's = {need:.1f} CPU s, at least {need / cores:.2f}s on {cores} cores with nothing of "
              f"ours (no plan run, no per-test work)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.25, help="server latency, s (default 0.25)")
    parser.add_argument("--samples", type=int, default=32, help="--longctx-samples (default 32: 640 requests)")
    parser.add_argument("--workers", type=int, default=8, help="xdist workers (default 8)")
    parser.add_argument("--concurrency", type=int, default=64, help="--longctx-max-concurrency (default 64)")
    parser.add_argument("--repeat", type=int, default=2, help="alternating plain / lrt pairs (default 2)")
    parser.add_argument("--tree", action="append", default=[], type=Path,
                        help="also run the plugin from this checkout (repeatable; rows named by folder)")
    parser.add_argument("--also", action="append", default=[], metavar="ARGS",
                        help="also run the lrt rows with these extra pytest arguments (repeatable), e.g. "
                             "'--longctx-gc-freeze off'")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm (all cached) re-runs")
    parser.add_argument("--no-floor", action="store_true", help="skip the plan-alone and bare-SDK measurements")
    args = parser.parse_args(argv)
    n = 20 * args.samples
    root = Path(tempfile.mkdtemp(prefix="longctx-bench-startup-"))
    rows: list[Run] = []
    floor: Floor | None = None
    try:
        ini = ini_section()
        bench_plugins = root / "plugins"
        bench_plugins.mkdir()
        (bench_plugins / "bench_phases.py").write_text(PHASES, encoding="utf-8")
        plain = root / "plain"
        plain.mkdir()
        (plain / "pyproject.toml").write_text(ini, encoding="utf-8")
        (plain / "test_plain.py").write_text(PLAIN.format(n=n), encoding="utf-8")
        trees: list[tuple[str, Path | None, list[str]]] = [("", None, [])]
        for tree in args.tree:
            stand_ins(tree.resolve())
            trees.append((f" [{tree.name}]", tree.resolve(), []))
        trees += [(f" [{extra}]", None, shlex.split(extra)) for extra in args.also]
        base_env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
        base_env.setdefault("LONGCTX_DATA_DIR", str(REPO.parent / "shared" / "corpora"))
        common = ["-q", "-n", str(args.workers), "-p", "bench_phases"]
        for rep in range(args.repeat):
            env = {**base_env, "PYTHONPATH": os.pathsep.join(filter(None, [str(bench_plugins),
                                                                          base_env.get("PYTHONPATH")]))}
            disable = [a for name in our_plugins() for a in ("-p", f"no:{name}")]
            rows.append(run_pytest("plain", [*common, *disable], plain, env, root / "phases.txt"))
            print(f"  plain: {rows[-1].wall:.1f}s", file=sys.stderr)
            for index, (label, tree, extra) in enumerate(trees):
                project = root / f"lrt{rep}-{index}"
                shutil.copytree((tree or REPO) / "evals" / "lrt", project / "evals" / "lrt",
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                (project / "pyproject.toml").write_text(ini, encoding="utf-8")
                tree_env = dict(env)
                if tree is not None:
                    tree_env["PYTHONPATH"] = os.pathsep.join([str(tree), env["PYTHONPATH"]])
                server = Server(args.latency, tree_env)
                tree_env.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-bench-not-a-real-key")
                cache = project / "cache"
                lrt_args = [*common, "evals/lrt", "--longctx-model", "anthropic/claude-test", "--longctx-samples",
                            str(args.samples), "--longctx-max-concurrency", str(args.concurrency),
                            "--longctx-cache-dir", str(cache), "--longctx-report-dir", str(project / "reports"),
                            *extra]
                try:
                    for name, more in (("lrt", []), ("lrt warm", []), ("lrt warm, no plan", ["--longctx-prefetch",
                                                                                               "off"])):
                        if name != "lrt" and args.no_warm:
                            continue
                        rows.append(run_pytest(name + label, [*lrt_args, *more], project, tree_env,
                                               root / "phases.txt", server, args.latency))
                        print(f"  {name + label}: {rows[-1].wall:.1f}s", file=sys.stderr)
                    if rep == 0 and tree is None and not extra and not args.no_floor:
                        floor = measure_floor(project, server, tree_env, args)
                finally:
                    server.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    ideal = n * args.latency / args.concurrency
    if floor is not None:
        print_floor(floor, [r for r in rows if r.name == "plain"], ideal)
    print(f"\nN={n}, latency {args.latency:g}s, C={args.concurrency}, -n {args.workers}; ideal = N x L / C = "
          f"{ideal:.2f}s; target: lrt wall <= plain wall + 1.2 x ideal")
    width = max([24, *(len(r.name) for r in rows)])
    header = (f"{'run':<{width}} {'wall s':>7} {'- plain':>8} {'target':>7} {'planned':>8} {'collected':>9} "
              f"{'1st req':>7} {'last ans':>8} {'tests done':>10} {'sent':>5} {'cpu s':>6} exit")
    print(header)
    print("-" * len(header))
    plain_wall = 0.0

    def cell(value: float | None, width: int) -> str:
        return f"{value:>{width}.2f}" if value is not None else f"{'-':>{width}}"

    for r in rows:
        if r.name == "plain":
            plain_wall = r.wall
            print(f"{r.name:<{width}} {r.wall:>7.2f} {'':>8} {'':>7} {'':>8} {cell(r.collected, 9)} {'':>7} {'':>8} "
                  f"{cell(r.tests_done, 10)} {'':>5} {r.cpu:>6.1f} {r.exit_code}")
            continue
        target = plain_wall + 1.2 * ideal
        verdict = "" if r.name.startswith("lrt warm") else (" meets target" if r.wall <= target else "")
        print(f"{r.name:<{width}} {r.wall:>7.2f} {r.wall - plain_wall:>+8.2f} {target:>7.2f} {cell(r.planned, 8)} "
              f"{cell(r.collected, 9)} {cell(r.first_request, 7)} {cell(r.last_answer, 8)} "
              f"{cell(r.tests_done, 10)} {r.sent:>5} {r.cpu:>6.1f} {r.exit_code}{verdict}")
    print("\nCPU seconds by process (user + system; pytest's at exit; the server's from /proc). "
          "The 'cpu s' column is pytest and every process it waited for; 2 cores give at most 2 CPU-s per "
          "wall second:")
    for r in rows:
        print(f"  {r.name:<{width}} " + ", ".join(f"{k} {v:.1f}" for k, v in sorted((r.cpu_by_role or {}).items())))
    return 0 if all(r.exit_code == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
