"""The plugin's per-test overhead: M eval trials on ``fake/perfect`` against M plain pytest tests.

Both projects run in a subprocess from the same folder layout and pyproject, side by side, each at two
sizes (M and a small M0), so start-up cost cancels out: per-test cost = (t(M) - t(M0)) / (M - M0).

* ``plain``:  ``pytest -p no:longctx`` on ``def test_x(i): assert i >= 0`` parametrized M times.
* ``async``:  the same as an ``async def`` test under pytest-asyncio (session loop), still without the plugin:
  the share of the overhead that is pytest-asyncio's, not the plugin's.
* ``longctx``: ``pytest --longctx-model fake/perfect`` on an async eval test that asks the fake model once,
  records and asserts (``--longctx-samples M``), with the run record and HTML report written.

    python benchmarks/bench_overhead.py                  # M=2000, M0=200, best of 3
    python benchmarks/bench_overhead.py --m 5000 --repeat 5 --xdist 0   # also try "-n 0"
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.conftest import PYPROJECT as PROJECT  # the test suite's pytester project: the same settings

PYPROJECT = PROJECT.format(extra="")

PLAIN = '''
import pytest

M = int(__import__("os").environ["BENCH_M"])


@pytest.mark.parametrize("i", range(M))
def test_plain(i):
    assert i >= 0
'''

ASYNC = '''
import pytest

M = int(__import__("os").environ["BENCH_M"])


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("i", range(M))
async def test_async(i):
    assert i >= 0
'''

EVAL = '''
import pytest

from pytest_longctx import Oracle

pytestmark = pytest.mark.longctx("overhead")


async def test_trial(longctx):
    key = str(longctx.rng.randrange(1000, 9999))
    answer = await longctx.ask(f"The key is {key}. What is the key?", oracle=Oracle(key))
    longctx.record(expected=key, answer=answer)
    assert key in answer
'''


KINDS = ("plain", "async", "longctx")


def run(folder: Path, kind: str, m: int, extra: list[str]) -> float:
    if kind in ("plain", "async"):
        args = ["-p", "no:longctx", f"test_{kind}.py"]
    else:
        args = ["test_eval.py", "--longctx-model", "fake/perfect", "--longctx-samples", str(m),
                "--longctx-cache", "off", "--longctx-report-dir", str(folder / "reports")]
    cmd = [sys.executable, "-m", "pytest", "-q", *args, *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, env={**_env(), "BENCH_M": str(m)})
    elapsed = time.perf_counter() - start
    if proc.returncode != 0 or f"{m} passed" not in proc.stdout:
        raise SystemExit(f"{kind} M={m} failed (exit {proc.returncode}):\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    return elapsed


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", type=int, default=2000, help="tests in the large run (default 2000)")
    parser.add_argument("--m0", type=int, default=200, help="tests in the small run (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration; the fastest counts (default 3)")
    parser.add_argument("--xdist", default=None, help="also pass -n VALUE (e.g. 0 or 2)")
    args = parser.parse_args(argv)
    extra = ["-n", args.xdist] if args.xdist is not None else []
    folder = Path(tempfile.mkdtemp(prefix="longctx-overhead-"))
    times: dict[tuple[str, int], float] = {}
    try:
        (folder / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
        (folder / "test_plain.py").write_text(PLAIN, encoding="utf-8")
        (folder / "test_async.py").write_text(ASYNC, encoding="utf-8")
        (folder / "test_eval.py").write_text(EVAL, encoding="utf-8")
        for _ in range(args.repeat):  # interleaved, so machine load drifts affect both sides alike
            for kind in KINDS:
                for m in (args.m0, args.m):
                    t = run(folder, kind, m, extra)
                    times[kind, m] = min(t, times.get((kind, m), t))
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    per = {k: (times[k, args.m] - times[k, args.m0]) / (args.m - args.m0) for k in KINDS}
    mode = f" with {' '.join(extra)}" if extra else ""
    print(f"\nper-test cost from M={args.m} and M0={args.m0} (fastest of {args.repeat}){mode}")
    print(f"{'':8} {'t(M0) s':>8} {'t(M) s':>8} {'ms/test':>8}")
    for kind in KINDS:
        print(f"{kind:8} {times[kind, args.m0]:>8.2f} {times[kind, args.m]:>8.2f} {per[kind] * 1000:>8.3f}")
    print(f"plugin overhead: {(per['longctx'] - per['plain']) * 1000:.3f} ms per test; "
          f"per-test ratio longctx / plain = {per['longctx'] / per['plain']:.2f}x; "
          f"end-to-end ratio at M={args.m}: {times['longctx', args.m] / times['plain', args.m]:.2f}x")
    print(f"of which pytest-asyncio (async - plain): {(per['async'] - per['plain']) * 1000:.3f} ms; the plugin itself "
          f"(longctx - async): {(per['longctx'] - per['async']) * 1000:.3f} ms per test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
