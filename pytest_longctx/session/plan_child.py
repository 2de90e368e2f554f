"""The child plan run: the same selection in plan mode, in a child pytest (no xdist), writing every request.

The controller starts it before the workers (see ``services.start_prefetch``); the prefetch dispatcher
sends what it plans while it runs. An interrupted parent kills it (no planning child is left behind).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_longctx.session.option_def import SWITCH_WORDS

#: Options of the parent run that the child plan run must not inherit.
_DROP_WITH_VALUE = ("-n", "--numprocesses", "--dist", "--maxprocesses", "--tx", "--rsyncdir", "--max-worker-restart",
                    "--html", "--junitxml", "--junit-xml", "--longctx-report-dir", "--longctx-plan-out",
                    "--longctx-prefetch", "--css")
#: Switches it must not inherit: the word after a bare one is its value only when it is a switch word.
_DROP_SWITCHES = ("--longctx-plan", "--longctx-batch")
_DROP_FLAGS = ("--self-contained-html", "--looponfail", "-f", "--lf", "--ff")
#: Plugins the child plan run disables itself, so the parent's ``-p NAME`` for them is dropped.
_CHILD_DISABLES = ("xdist", "html")


def child_args(args: tuple[str, ...] | list[str]) -> list[str]:
    """The parent's arguments (addopts first) minus distribution, report and mode options.

    ``-p no:NAME`` is kept (the child then skips loading what the parent skipped), and so is
    ``-p NAME`` unless it names a plugin the child disables.
    """
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if arg in _DROP_FLAGS:
            continue
        if name in _DROP_WITH_VALUE:
            skip = "=" not in arg
            continue
        if name in _DROP_SWITCHES:
            follows = args[i + 1] if i + 1 < len(args) else ""
            skip = "=" not in arg and follows.strip().lower() in SWITCH_WORDS
            continue
        if arg.startswith("-n") and (arg[2:].isdigit() or arg[2:] in ("auto", "logical")):
            continue
        if arg.startswith("-p"):
            value = arg[2:] if len(arg) > 2 else (args[i + 1] if i + 1 < len(args) else "")
            skip = len(arg) == 2
            if value.startswith("no:") or not any(p in value for p in _CHILD_DISABLES):
                out += ["-p", value]
            continue
        out.append(arg)
    return out


def plan_path(work: Path) -> Path:
    """The JSONL file the child plan run appends every planned request to."""
    return work / "plan.jsonl"


def run_plan(args: tuple[str, ...] | list[str], cwd: Path, work: Path,
             meanwhile: Callable[[], object] | None = None) -> Path:
    """Run the selection in plan mode in a child pytest; return the JSONL of planned requests.

    ``meanwhile`` runs while the child plans (e.g. importing the SDK, which takes seconds); its errors are ignored.
    """
    work.mkdir(parents=True, exist_ok=True)
    plan_file = plan_path(work)
    plan_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", *child_args(args), "-p", "no:xdist", "-p", "no:html",
           "-q", "--no-header", "-o", "addopts=", "--longctx-plan=true", f"--longctx-plan-out={plan_file}",
           f"--longctx-report-dir={work / 'plan-report'}", "--longctx-prefetch=off", "--longctx-batch=false"]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}  # already in ``args`` (see plan_args)
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,  # noqa: S603
                            env={**env, "LONGCTX_CHILD": "1"})
    try:
        if meanwhile is not None:
            try:
                meanwhile()
            except Exception:  # noqa: S110 - only a head start; the dispatcher does it again and reports
                pass
        stdout, stderr = proc.communicate()
    except BaseException:  # interrupted: leave no planning child behind
        proc.kill()
        proc.wait()
        raise
    if proc.returncode == 4:  # bad input the child found after collecting (e.g. a threshold matching no cell)
        errors = [line.removeprefix("ERROR: ") for line in stderr.splitlines() if line.startswith("ERROR: ")]
        if errors:
            raise PlanUsageError(errors[-1])
    if proc.returncode not in (0, 5):
        tail = (stdout + stderr).strip().splitlines()[-2:]
        raise PlanFailed(f"planning the run failed (exit {proc.returncode}): {' | '.join(tail)}")
    plan_file.touch()
    return plan_file


def plan_args(config: pytest.Config) -> list[str]:
    """The parent's full command line as pytest sees it: ini ``addopts``, ``$PYTEST_ADDOPTS``, then the arguments.

    The child runs with ``-o addopts=`` and gets these (filtered by :func:`child_args`) instead, so it plans
    with the same ``--longctx-*`` options and skips the same plugins, but never inherits ``-n``.
    """
    return [*config.getini("addopts"), *shlex.split(os.environ.get("PYTEST_ADDOPTS", "")),
            *config.invocation_params.args]


class PlanFailed(Exception):
    """The child plan run failed; the run goes on without prefetch (its tests will show why)."""


class PlanUsageError(PlanFailed):
    """The child plan run found a usage error (its one line): the run must stop before anything is sent.

    Under xdist the controller does not collect, so this is how it learns, before the workers start,
    that e.g. a threshold selector matches none of the collected cells.
    """
