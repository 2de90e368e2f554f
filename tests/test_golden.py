"""``golden_runner`` (tests/conftest.py, tests/golden.py): golden runs on public API leave the outer session as it was.

An in-process golden run imports the inner project's conftest, test module and a helper module of its own, puts its
folder on ``sys.path`` and runs in its folder with its own environment: after the block none of that is left.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import golden_runner

CONFTEST = '''
import golden_helper_mod

def pytest_report_header(config):
    return "golden header: " + golden_helper_mod.WORD
'''
TEST = '''
import os

import golden_helper_mod


def test_inner():
    print("inner HOME", os.environ["HOME"])
    assert golden_helper_mod.WORD == "ok" and os.environ["GOLDEN_PROBE"] == "set"


def test_inner_fails():
    assert False, "the inner failure"
'''


def imported_from(folder: Path) -> list[str]:
    """The modules in ``sys.modules`` loaded from files below ``folder`` (the inner conftest, test, helper)."""
    return sorted(name for name, module in list(sys.modules.items())
                  if Path(getattr(module, "__file__", None) or "/").is_relative_to(folder))


def test_an_in_process_golden_run_leaves_no_module_path_folder_or_variable_behind(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    paths, cwd, home = list(sys.path), Path.cwd(), os.environ.get("HOME")
    assert "golden_helper_mod" not in sys.modules
    with golden_runner(request, tmp_path_factory, {"GOLDEN_PROBE": "set"}) as runner:
        project = runner.pytester
        project.makepyfile(golden_helper_mod='WORD = "ok"\n', test_golden_inner=TEST)
        project.makeconftest(CONFTEST)
        result = project.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider", "-rA")
        assert "golden_helper_mod" not in sys.modules and not imported_from(project.path)
        assert Path.cwd() == project.path and os.environ["HOME"] == str(project.path)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["golden header: ok", "*the inner failure*", f"inner HOME {project.path}",
                                 "*1 failed, 1 passed*"])
    assert "golden_helper_mod" not in sys.modules and not imported_from(project.path)  # nothing inner stays
    assert sys.path == paths and Path.cwd() == cwd and os.environ.get("HOME") == home
    assert "GOLDEN_PROBE" not in os.environ


@pytest.mark.e2e
def test_a_subprocess_golden_run_finds_the_projects_modules(request: pytest.FixtureRequest,
                                                            tmp_path_factory: pytest.TempPathFactory) -> None:
    with golden_runner(request, tmp_path_factory, {"GOLDEN_PROBE": "set"}) as runner:
        project = runner.pytester
        project.makepyfile(golden_helper_mod='WORD = "ok"\n', test_golden_inner=TEST)
        result = project.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", "-rA", timeout=120)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*the inner failure*", "*1 failed, 1 passed*"])
    assert "golden_helper_mod" not in sys.modules and not imported_from(project.path)
