"""Shared helpers for the plugin's own tests: pytester, the xdist modes, a runner that reads the run record, and
the tiers (``tests/tiers.py``: the fast tier by default, ``-m e2e`` the end-to-end tier; docs/development.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# In-process runs unload what they import: numpy cannot be imported twice, and a network transport imported again
# by the next in-process run raises exceptions the clients of this process no longer recognise (the anthropic SDK
# then reports a timeout as a connection error; httpx lets httpcore's errors through unmapped). Load them once here.
import anyio._backends._asyncio  # noqa: F401
import httpcore._backends.anyio  # noqa: F401
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401
from hypothesis import settings as hypothesis_settings

from tests.golden import GoldenProject, GoldenResult

# Property tests draw from one fixed seed (the same examples on every run and worker) and keep no example database.
hypothesis_settings.register_profile("longctx", derandomize=True, database=None)
hypothesis_settings.load_profile("longctx")

try:  # the anthropic SDK's own transport (vendored httpcore), where this SDK version has one
    import httpcore2._async
    import httpcore2._backends.anyio
    import httpcore2._backends.sync
    import httpcore2._sync  # noqa: F401
except ImportError:
    pass

pytest_plugins = ["pytester", "tests.tiers", "tests.passkey_api", "tests.corpus_data"]

#: Extra arguments of each way a scenario runs: plain, xdist without workers, two workers, xdist disabled.
MODES: dict[str, list[str]] = {
    "plain": [],
    "n0": ["-n", "0"],
    "n2": ["-n", "2"],
    "no-xdist": ["-p", "no:xdist"],
}

#: The pyproject every pytester project starts from: the repository's asyncio set-up, and none of the
#: unrelated plugins that are slow to import in every xdist worker (hypothesis alone takes seconds).
PYPROJECT = """\
[tool.pytest.ini_options]
asyncio_mode = "strict"
asyncio_default_fixture_loop_scope = "session"
asyncio_default_test_loop_scope = "session"
addopts = "-p no:cacheprovider -p no:hypothesispytest -p no:benchmark -p no:anyio"
{extra}
"""

#: Per-trial fields that legitimately differ between runs (timing) and so are left out of comparisons.
VOLATILE_TRIAL_FIELDS = ("latency_s",)


def pytest_cmdline_main(config: pytest.Config) -> None:
    """The plugin's own tests run no eval: keep the outer session off the local model (and its server)."""
    if getattr(config.option, "longctx_model", None) is None and not config.getini("longctx_model"):
        config.option.longctx_model = "fake/perfect"


#: Environment variables of the developer's shell that must not leak into pytester runs.
SHELL_ENV = ("LONGCTX_CACHE_DIR", "LONGCTX_DATA_DIR", "PYTEST_XDIST_AUTO_NUM_WORKERS")


@pytest.fixture(autouse=True)
def _clean_longctx_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Environment variables of the developer's shell must not leak into pytester runs."""
    for name in SHELL_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=list(MODES.values()), ids=list(MODES))
def mode_args(request: pytest.FixtureRequest) -> list[str]:
    """Extra pytest arguments of one execution mode (see MODES)."""
    return list(request.param)


@dataclass
class LongctxRun:
    """One pytester run: its result and where its run record is (``record`` asserts that it was written)."""

    result: pytest.RunResult | GoldenResult
    report_dir: Path

    @property
    def ret(self) -> int:
        return int(self.result.ret)

    @property
    def record(self) -> dict[str, Any]:
        """The run's record: ``longctx.json``, or a stopped run's ``longctx.partial.json`` (which never replaces it)."""
        if not (self.report_dir / "longctx.json").is_file() and (self.report_dir / "longctx.partial.json").is_file():
            partial = self._read("longctx.partial.json", "partial run record")
            assert partial["stopped"], "longctx.partial.json of a run that was not stopped"
            return partial
        return self._read("longctx.json", "run record")

    @property
    def plan_record(self) -> dict[str, Any]:
        """A plan's record (``longctx-plan.json``: a plan leaves the run record alone)."""
        return self._read("longctx-plan.json", "plan record")

    def _read(self, name: str, what: str) -> dict[str, Any]:
        path = self.report_dir / name
        assert path.is_file(), f"no {what} written:\n{self.result.stdout.str()}\n{self.result.stderr.str()}"
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def cell(self, experiment: str, **params: Any) -> dict[str, Any]:
        matches = [c for c in self.record["cells"] if c["experiment"] == experiment and c["params"] == params]
        assert len(matches) == 1, f"{experiment} {params}: {len(matches)} cells in {self.record['cells']}"
        return matches[0]

    def trials(self) -> list[dict[str, Any]]:
        """Trial records without their timing, in record order."""
        return [{k: v for k, v in t.items() if k not in VOLATILE_TRIAL_FIELDS} for t in self.record["trials"]]


class LongctxRunner:
    """Writes a pytester project (or a golden one) and runs it with the fake model, an own report dir and no cache."""

    def __init__(self, pytester: pytest.Pytester | GoldenProject) -> None:
        self.pytester = pytester
        self.runs = 0
        self.project()

    def project(self, ini: str = "") -> None:
        """(Re)write pyproject.toml; ``ini`` is appended to its [tool.pytest.ini_options] table."""
        self.pytester.makefile(".toml", pyproject=PYPROJECT.format(extra=ini))

    def run(self, *args: str, model: str | None = "fake/perfect", report_dir: str | None = None, cache: bool = False,
            subprocess: bool | None = None) -> LongctxRun:
        """Run pytest in the project (``model=None``: leave the model to the ini file).

        xdist modes (``-n``) always run in a subprocess; others in-process unless ``subprocess`` says otherwise.
        """
        self.runs += 1
        out = self.pytester.path / (report_dir or f"reports-{self.runs}")
        full = ["--longctx-model", model] if model else []
        full += ["--longctx-report-dir", str(out)]
        full += ["--longctx-cache-dir", str(self.pytester.path / "cache")] if cache else ["--longctx-cache", "off"]
        full += list(args)
        if subprocess is None:
            subprocess = "-n" in args
        if subprocess:
            result = self.pytester.runpytest_subprocess(*full, timeout=120)
        else:
            result = self.pytester.runpytest_inprocess(*full)
        return LongctxRun(result, out)


@pytest.fixture
def longctx_runner(pytester: pytest.Pytester) -> LongctxRunner:
    """A pytester project prepared for longctx runs."""
    return LongctxRunner(pytester)


@contextmanager
def golden_runner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                  env: dict[str, str]) -> Iterator[LongctxRunner]:
    """A runner for a module-scoped fixture's golden runs: one run per feature, read by every test that checks it.

    pytest's ``pytester`` is per test, so this runs in a ``tests.golden.GoldenProject`` (public API only) in a
    folder of its own. Inside the block the folder is the working directory and ``HOME``, ``env`` is set and the
    rest is as pytester sets it (the shell's longctx variables and ``PYTEST_ADDOPTS`` unset, no colours, the inner
    runs' ``tmp_path`` in a folder of their own); all is undone when the block ends, so make the runs inside it and
    hand the tests what they read: the runs (records, output, folders) and whatever the server counted.
    """
    name = request.node.name
    path, temp = tmp_path_factory.mktemp(name, numbered=True), tmp_path_factory.mktemp(f"tmp-{name}", numbered=True)
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name in (*SHELL_ENV, "PYTEST_ADDOPTS", "TOX_ENV_DIR"):
            monkeypatch.delenv(name, raising=False)
        for name, value in {"HOME": str(path), "USERPROFILE": str(path), "PY_COLORS": "0",
                            "PYTEST_DEBUG_TEMPROOT": str(temp), **env}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(path)
        yield LongctxRunner(GoldenProject(path))
