"""--longctx-gc-freeze: the heap is frozen once collected, thawed at the very end, and a host's own freeze is kept.

Each run is a subprocess: the process running these tests froze its own heap (its plugin did), so an
in-process run would find it frozen and rightly leave it alone.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

EVAL = '''
import gc
import json
import os
import pathlib

import pytest

from pytest_longctx import Request

pytestmark = pytest.mark.longctx("demo")
OUT = pathlib.Path(os.environ["HEAP_OUT"])


async def test_passkey(longctx):
    key = longctx.rng.randrange(10_000, 99_999)
    answer = await longctx.ask(Request.user(f"The pass key is {key}. What is the pass key?", max_tokens=16,
                                            template="heap@1"))
    longctx.record(expected=key, answer=answer)
    with OUT.open("a") as fh:
        fh.write(json.dumps({"where": "test", "frozen": gc.get_freeze_count()}) + "\\n")
    assert str(key) in answer
'''

#: Records, in the pytest process itself, whether the heap is frozen during each full collection after the
#: session finished (pytest's own exit collections) and once more when the interpreter exits.
CONFTEST = '''
import atexit
import gc
import json
import os
import pathlib

OUT = pathlib.Path(os.environ["HEAP_OUT"])
if os.environ.get("HOST_FREEZES"):
    gc.freeze()  # a host process that manages its own frozen heap
FINISHED = []


def _on_gc(phase, info):
    if FINISHED and phase == "start" and info["generation"] == 2:
        FINISHED.append(gc.get_freeze_count())


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):  # the process pytest was started in, not an xdist worker
        FINISHED.append("finished")
        gc.callbacks.append(_on_gc)


def _at_exit():
    if FINISHED:
        with OUT.open("a") as fh:
            fh.write(json.dumps({"where": "exit", "frozen": gc.get_freeze_count(), "exit_gcs": FINISHED[1:]}) + "\\n")


atexit.register(_at_exit)
'''


def _run(longctx_runner: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str,
         host_freezes: bool = False) -> list[dict[str, Any]]:
    out = tmp_path / "heap.jsonl"
    out.unlink(missing_ok=True)
    monkeypatch.setenv("HEAP_OUT", str(out))
    if host_freezes:
        monkeypatch.setenv("HOST_FREEZES", "1")
    longctx_runner.pytester.makepyfile(test_eval=EVAL)
    longctx_runner.pytester.makeconftest(CONFTEST)
    run = longctx_runner.run("--longctx-samples", "3", *args, subprocess=True)
    assert run.ret == 0, run.result.stdout.str()
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["one-process", "n2"])
def test_tests_run_frozen_and_the_run_thaws_last(longctx_runner: Any, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, xdist: list[str]) -> None:
    lines = _run(longctx_runner, tmp_path, monkeypatch, *xdist)
    tests = [line for line in lines if line["where"] == "test"]
    assert len(tests) == 3 and all(line["frozen"] > 0 for line in tests)
    (exit_line,) = [line for line in lines if line["where"] == "exit"]
    assert exit_line["frozen"] == 0  # thawed: the process is left as it was found
    # pytest's exit collections (its unraisable-exception check, where this pytest has one) ran before the thaw
    if hasattr(importlib.import_module("_pytest.unraisableexception"), "gc_collect_harder"):
        assert exit_line["exit_gcs"] and all(frozen > 0 for frozen in exit_line["exit_gcs"])


def test_gc_freeze_off_leaves_the_collector_alone(longctx_runner: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _run(longctx_runner, tmp_path, monkeypatch, "--longctx-gc-freeze", "off")
    assert [line["frozen"] for line in lines] == [0, 0, 0, 0]


def test_a_host_that_froze_its_heap_keeps_it(longctx_runner: Any, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _run(longctx_runner, tmp_path, monkeypatch, host_freezes=True)
    (exit_line,) = [line for line in lines if line["where"] == "exit"]
    assert exit_line["frozen"] > 0  # not thawed by the run: it was not the run's to thaw


def test_a_bad_value_is_a_usage_error(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_eval="def test_x():\n    pass\n")
    run = longctx_runner.run("--longctx-gc-freeze=sometimes")  # (a switch: after a bare one, 'sometimes' is a path)
    assert run.ret == 4
    run.result.stderr.fnmatch_lines(["*--longctx-gc-freeze: expected true or false, got 'sometimes'*"])
