"""Every command README.md and docs/*.md show stays runnable: pytest commands pass pytest's option parser and the
plugin's start-up checks (an unknown option or a bad value fails), the other programs' arguments parse, the paths
they name exist, and every link between the pages resolves."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.results.schema import SCHEMA, SCHEMA_VERSION
from pytest_longctx.session.option_def import SWITCH_WORDS
from tests.doc_commands import PAGES, ROOT, Command, all_commands

#: Each command once (the README and the pages repeat some), where it is first shown.
COMMANDS = list({(c.argv, tuple(sorted(c.env.items()))): c for c in reversed(all_commands())}.values())[::-1]
#: Options of pytest and its plugins that take a value (the word after them is no path).
VALUED = {"-n", "-k", "-p", "-m", "--dist", "--maxfail", "-W", "--basetemp"}
#: Placeholders the pages write for the reader's own values, and what the checks put in their place.
PLACEHOLDERS = {"FILE": str(ROOT / "fixtures" / "questions" / "FR-2024-02-12.jsonl"), "DIR": str(ROOT / "fixtures"),
                "SPEC": "fake/perfect", "YYYY-MM-DD": "2024-02-12", "NAME": "qa", "ID": "id-1", "...": "id-2",
                "path/to/docs": str(ROOT / "fixtures" / "docs")}
#: Shell words with nothing to check, and tools of the environment that must be installed.
SHELL = {"export", "."}
TOOLS = {"ruff", "mypy", "lint-imports"}


def _parsers() -> dict[str, Any]:
    from pytest_longctx.corpus.fetch import build_parser as data
    from pytest_longctx.experiments.docs.__main__ import _parser as docs
    from pytest_longctx.experiments.qa.__main__ import _parser as qa
    from pytest_longctx.gate_command import _parser as gate
    from pytest_longctx.server.__main__ import build_parser as server

    return {"longctx-data": data, "longctx-qa": qa, "longctx-docs": docs, "pytest_longctx.corpus": data,
            "pytest_longctx.server": server, "longctx-gate": gate}


def _switches() -> set[str]:
    """Every switch the core and the built-in experiments declare (a bare flag: the next word is no value)."""
    from pytest_longctx.experiments.docs.options import OPTIONS as DOCS
    from pytest_longctx.experiments.litm.options import OPTIONS as LITM
    from pytest_longctx.session.options import OPTIONS

    return {o.flag for o in (*OPTIONS, *DOCS, *LITM) if o.bare is not None}


SWITCHES = _switches()


def pytest_check(command: Command, tmp: Path) -> tuple[int, str]:
    """Run the command's options on an empty folder with ``--co``: pytest parses every option, the plugins resolve
    and check every value (exit 4 on a bad one), nothing is collected (exit 5). Its paths must exist."""
    options: list[str] = []
    previous = ""
    for word in command.args:
        switch = previous in SWITCHES and word.lower() not in SWITCH_WORDS  # a bare switch: the word is no value
        valued = previous in VALUED or (previous.startswith("--longctx-") and "=" not in previous and not switch)
        if word.startswith("-") or valued:
            options.append(PLACEHOLDERS.get(word, word))
        else:
            assert (ROOT / word).exists(), f"{command.where}: {word} does not exist"
        previous = word
    if "--longctx-compare" in options:  # the record a previous step of the recipe writes
        record = tmp / "compared.json"
        record.write_text(json.dumps({"schema": SCHEMA, "version": SCHEMA_VERSION, "settings": {}, "cells": [],
                                      "trials": []}))
        options[options.index("--longctx-compare") + 1] = str(record)
    empty = tmp / "empty"
    empty.mkdir(exist_ok=True)
    env = {**os.environ, **command.env, "ANTHROPIC_API_KEY": "sk-docs-test", "OPENAI_API_KEY": "sk-docs-test"}
    proc = subprocess.run([sys.executable, "-m", "pytest", *options, str(empty), "--co", "-q", "--rootdir", str(ROOT),
                           "-c", str(ROOT / "pyproject.toml"), "--longctx-report-dir", str(tmp / "reports")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.where} {c.text[:60]}" for c in COMMANDS])
def test_the_command_is_runnable(command: Command, tmp_path: Path) -> None:
    program = command.program
    if program == "pytest":
        rc, out = pytest_check(command, tmp_path)
        expected = 0 if "--help" in command.args else 5
        assert rc == expected and "INTERNALERROR" not in out, f"{command.where}: {command.text}\n{out[-3000:]}"
    elif program in _parsers():
        args = [PLACEHOLDERS.get(a, a) for a in command.args]
        try:
            _parsers()[program]().parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"{command.where}: {command.text}: its arguments do not parse (exit {exc.code})")
    elif program == "setup.sh" or program.startswith("benchmarks/"):
        assert (ROOT / program).is_file(), f"{command.where}: {program} does not exist"
    elif program in TOOLS:
        assert (Path(sys.executable).parent / program).is_file(), f"{command.where}: {program} is not installed"
    else:
        assert program in SHELL, f"{command.where}: {command.text}: a program this test does not know how to check"


@pytest.mark.parametrize("args", [["--longctx-samples", "many"], ["--longctx-no-such-option", "1"],
                                  ["--longctx-model", "anthropic/gpt-4"], ["nowhere/evals"]],
                         ids=["bad-value", "unknown-option", "bad-model", "missing-path"])
def test_the_check_fails_a_broken_command(args: list[str], tmp_path: Path) -> None:
    command = Command("nowhere:1", "pytest " + " ".join(args), ("pytest", *args))
    try:
        rc, out = pytest_check(command, tmp_path)
    except AssertionError as exc:
        assert "does not exist" in str(exc)
        return
    assert rc == 4, out


def test_every_page_shows_commands_and_the_readme_fits_a_screen() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 60
    shown = {c.where.split(":")[0] for c in COMMANDS}
    assert {"README.md", "docs/claude.md", "docs/reproducing.md", "docs/experiments.md"} <= shown


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_pages_resolves() -> None:
    broken = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and anchor not in {_anchor(h) for h in re.findall(r"^#+ (.+)$", file.read_text(), re.M)}:
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
