"""``docs/options.md`` says it lists every option: every flag of the ``longctx`` group of ``pytest --help`` (the
core's and every experiment's, ``--no-longctx-<noun>`` forms included) appears in it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_longctx.session.option_def import GROUP

ROOT = Path(__file__).resolve().parent.parent
FLAG = re.compile(r"--(?:no-)?longctx-[a-z0-9-]*[a-z0-9]")


def help_flags() -> set[str]:
    """The flags listed under the plugin's heading of ``pytest --help`` (up to the next heading)."""
    text = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=True).stdout
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("pytest-longctx:"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    return {m for line in lines[start + 1:end] if line.startswith("  --") for m in FLAG.findall(line.split()[0])}


def test_every_option_of_the_help_is_in_docs_options(pytestconfig: pytest.Config) -> None:
    registered = {name for option in pytestconfig._parser.getgroup(GROUP).options for name in option.names()}
    shown = help_flags()
    assert shown == registered  # the help's section was read whole
    documented = set(FLAG.findall((ROOT / "docs" / "options.md").read_text(encoding="utf-8")))
    assert sorted(shown - documented) == []
