"""Checks the block-design experiments (qa, litm, docs) share: the design an option resolves to (bad designs:
``tests/test_bad_designs.py``)."""

from __future__ import annotations

import pytest


def assert_design(pytester: pytest.Pytester, experiment: str, model: str, args: list[str], design: str) -> None:
    """``experiment``'s design for ``model`` and ``args`` is ``design`` (read in the report header: nothing runs)."""
    pytester.makeconftest(
        f"from pytest_longctx.experiments.{experiment}.plugin import {experiment}_options\n"
        "def pytest_report_header(config):\n"
        f"    return '{experiment}-design=' + {experiment}_options(config).design\n")
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", "--longctx-model", model, *args)
    result.stdout.fnmatch_lines([f"{experiment}-design={design}"])
