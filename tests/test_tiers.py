"""The tiers (tests/tiers.py): the README's ``pytest tests -n 2`` leaves the e2e tier out, ``-m e2e`` runs it.

A pytester project with the tiers plugin shows the selection rules; one collection of a few of this suite's own
files shows they hold for the real tests (the sequential gate's 400-trial runs, the browser, the ``-n`` matrix and
the full corpora are e2e).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PYPROJECT

ROOT = Path(__file__).resolve().parent.parent

PROJECT = """
import pytest

@pytest.fixture
def fr_xml():
    return "the full issue"

@pytest.mark.e2e
def test_marked():
    pass

def test_fast():
    pass

@pytest.mark.parametrize("args", [[], ["-n", "2"], ("-p", "no:xdist")], ids=["plain", "n2", "no-xdist"])
def test_modes(args):
    pass

def test_reads_the_corpus(fr_xml):
    pass
"""
FAST = {"test_tiers_project.py::test_fast", "test_tiers_project.py::test_modes[plain]",
        "test_tiers_project.py::test_modes[no-xdist]"}
E2E = {"test_tiers_project.py::test_marked", "test_tiers_project.py::test_modes[n2]",
       "test_tiers_project.py::test_reads_the_corpus"}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", pyproject=PYPROJECT.format(extra=""))
    pytester.makeconftest('pytest_plugins = ["tests.tiers"]')
    pytester.makepyfile(test_tiers_project=PROJECT)
    return pytester


def _passed(result: pytest.RunResult) -> set[str]:
    return {line.split(" ")[0] for line in result.outlines if " PASSED" in line}


@pytest.mark.parametrize(("args", "passed"), [
    ((), FAST),
    (("-m", "e2e"), E2E),
    (("-m", "e2e or not e2e"), FAST | E2E),
    (("test_tiers_project.py::test_marked", "test_tiers_project.py::test_fast"),
     {"test_tiers_project.py::test_marked", "test_tiers_project.py::test_fast"}),
], ids=["default-is-fast", "m-e2e", "m-both", "named-tests"])
def test_the_selection_of_each_command(project: pytest.Pytester, args: tuple[str, ...], passed: set[str]) -> None:
    result = project.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider", "-v", *args)
    assert result.ret == 0, result.stdout.str()
    assert _passed(result) == passed
    if not args:
        result.assert_outcomes(passed=len(FAST), deselected=len(E2E))


def test_the_suites_own_slow_tests_are_e2e() -> None:
    files = ["tests/test_sequential_runs.py", "tests/test_report_browser.py", "tests/test_plugin_scenarios.py",
             "tests/test_corpus_fr.py", "tests/test_corpus_excerpt.py"]
    fast = _collect(*files)
    e2e = _collect(*files, "-m", "e2e")
    assert fast and e2e and not fast & e2e
    assert not [t for t in fast if "[n2" in t or "[n0" in t or "test_report_browser" in t]
    assert "tests/test_corpus_fr.py::test_counts_match_the_measured_recipe" in e2e  # through a module fixture
    assert "tests/test_corpus_fr.py::test_split_keeps_only_sized_sections" in fast  # no corpus
    collapse = "tests/test_sequential_runs.py::test_sequential_stops_a_collapse_early_and_agrees_with_the_fixed_design"
    assert collapse in e2e
    assert {"tests/test_plugin_scenarios.py::test_threshold_met[plain]",
            "tests/test_plugin_scenarios.py::test_threshold_met[no-xdist]"} <= fast
    assert {"tests/test_plugin_scenarios.py::test_threshold_met[n0]",
            "tests/test_plugin_scenarios.py::test_threshold_met[n2]"} <= e2e
    assert "tests/test_corpus_excerpt.py::test_the_excerpt_is_small_and_splits_like_the_issue" in fast
    assert "tests/test_corpus_excerpt.py::test_the_excerpt_is_the_issues_documents_byte_for_byte" in e2e


def _collect(*args: str) -> set[str]:
    """The node ids ``pytest --collect-only`` selects (in a subprocess: this suite's own conftest, as CI loads it)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {line for line in proc.stdout.splitlines() if "::" in line}
