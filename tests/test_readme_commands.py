"""Every command README.md shows, run as a user runs it: the same command shape with ``-n 2``, smaller condition
cells, and the model answered by the local stand-in server (the default model's llama.cpp dialect, the Messages
API, OpenAI's chat completions) instead of a CPU model or a paid API. None may end in INTERNALERROR.

``bash setup.sh && .venv/bin/pytest tests -n 2`` is this suite itself: ``.ci/run`` runs exactly it.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.backends.local_server import URL_ENV
from pytest_longctx.server import MessagesServer
from tests.doc_commands import ROOT, Command, commands

README = [c for c in commands(ROOT / "README.md") if c.program not in ("setup.sh", "export")]
#: Smaller cells of the same experiments (a 200K window would build 95K-token contexts and 10,000-line files).
SMALLER = (("--longctx-samples", "1"), ("--longctx-context-sizes", "2000"), ("--longctx-lrt-lines", "200"),
           ("--longctx-litm-documents", "10"), ("--longctx-litm-keys", "75"), ("--longctx-docs-context", "2000"),
           ("--longctx-needle-lengths", "1000"))
#: The shape of issue 26's INTERNALERROR (a warning class defined in a conftest crossed xdist), on fewer samples.
SOURCE_PLAN = Command("issue 26", "pytest evals -k 'qa and not litm' --longctx-protocol source --longctx-plan true",
                      ("pytest", "evals", "-k", "qa and not litm", "--longctx-protocol", "source", "--longctx-samples",
                       "2", "--longctx-plan", "true", "-n", "2"))


def always_a(body: dict[str, Any]) -> str:
    """A model that answers ``A`` to everything: right now and then on multiple choice, wrong elsewhere."""
    return "A"


@pytest.fixture(scope="module")
def standin() -> Iterator[MessagesServer]:
    with MessagesServer(always_a) as srv:
        yield srv


def run(command: Command, standin: MessagesServer, tmp: Path) -> tuple[int, str, Path]:
    """The command with ``-n 2``, the smaller cells, its own report and cache dirs, every model on the stand-in."""
    assert command.program == "pytest", command
    before = ("", *command.args[:-1])
    args = ["2" if previous == "-n" else word for previous, word in zip(before, command.args, strict=True)]
    model = args[args.index("--longctx-model") + 1] if "--longctx-model" in args else "local/smollm2-135m"
    extra = ["--longctx-scoring", "generate"] if model.startswith("local/") else []  # the stand-in has no logprobs
    if command is not SOURCE_PLAN:  # its -k keeps it small; its LRT sizes must not fit the window (the warning)
        extra += [word for option in SMALLER if option[0] not in args for word in option]
    env = {**os.environ, **command.env, URL_ENV: standin.base_url, "ANTHROPIC_BASE_URL": standin.base_url,
           "ANTHROPIC_API_KEY": "sk-readme-test", "OPENAI_BASE_URL": standin.base_url + "/v1",
           "OPENAI_API_KEY": "sk-readme-test"}
    env.pop("LONGCTX_DATA_DIR", None)  # the repository's conftest.py finds ../shared/corpora when it is there
    reports = tmp / "reports"
    proc = subprocess.run([sys.executable, "-m", "pytest", *args, *extra, "--longctx-report-dir", str(reports),
                           "--longctx-cache-dir", str(tmp / "cache")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    planned = "--longctx-plan" in command.args  # a plan writes its own record and leaves the run's alone
    assert not (planned and (reports / "longctx.json").exists()), "a plan wrote the run record"
    return proc.returncode, proc.stdout + proc.stderr, reports / ("longctx-plan.json" if planned else "longctx.json")


@pytest.mark.e2e
@pytest.mark.parametrize("command", [c for c in README if c.program == "pytest" and c.args[:1] != ["tests"]]
                         + [SOURCE_PLAN],
                         ids=lambda c: c.text[:80])
def test_the_readme_command_runs(command: Command, standin: MessagesServer, tmp_path: Path) -> None:
    rc, out, path = run(command, standin, tmp_path)
    assert "INTERNALERROR" not in out and "Traceback" not in out and path.is_file(), out[-4000:]
    record = json.loads(path.read_text(encoding="utf-8"))
    offline = any("qa" in e["experiments"] for e in record["missing_data"])
    assert rc == 0 or (rc == 5 and command is SOURCE_PLAN and offline), out[-4000:]  # -k left nothing to run
    if "--longctx-plan" in command.args:
        assert record["plan"] and not record["trials"], out[-2000:]
    else:
        assert record["trials"] and not any(t["outcome"] == "error" for t in record["trials"]), out[-2000:]
        assert {"lrt", "docs", "demo"} <= {t["experiment"] for t in record["trials"]}  # they need no corpus
    for entry in record["missing_data"]:  # what is not here is said once, with the command that gets it
        assert out.count(entry["line"]) == 1 and "longctx-data fetch" in entry["line"]
    assert "snapshot" not in out.lower() and "benchmark:" not in out  # no third-party lines under evals/


def test_the_tests_command_is_what_ci_runs() -> None:
    tests = [c for c in README if c.args[:1] == ["tests"]]
    assert [c.text for c in tests] == [".venv/bin/pytest tests -n 2"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "\nbash setup.sh\n" in ci and "\n.venv/bin/pytest tests -n 2 || rc=$?\n" in ci


@pytest.mark.e2e
def test_the_fetch_command_gets_every_corpus(pytestconfig: pytest.Config, tmp_path: Path) -> None:
    """``.venv/bin/longctx-data fetch``, as written, from a mirror of the corpora on 127.0.0.1."""
    from pytest_longctx.corpus.fetch import files_of
    from tests.corpus_data import find_for_tests

    (fetch,) = [c for c in README if c.program == "longctx-data"]
    mirror = tmp_path / "mirror"
    specs = files_of("qa") + files_of("litm")
    for spec in specs:
        (mirror / spec.where).parent.mkdir(parents=True, exist_ok=True)
        (mirror / spec.where).symlink_to(find_for_tests(pytestconfig, spec).resolve())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(mirror))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    env = {**os.environ, "LONGCTX_FR_URL": base + "/federal_register_{date}/FR-{date}.xml",
           "LONGCTX_LITM_URL": base + "/lost_in_the_middle/{file}"}
    env.pop("LONGCTX_DATA_DIR", None)
    env.pop("LONGCTX_CACHE_DIR", None)
    work = tmp_path / "checkout"
    work.mkdir()
    try:
        program = Path(sys.executable).parent / fetch.program
        proc = subprocess.run([str(program), *fetch.args], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(specs) and all(line.startswith("got   ") and "sha256 ok" in line for line in lines), \
        proc.stdout
    assert len(list((work / ".longctx-cache" / "corpora").rglob("*.sha256"))) == len(specs)
