"""Bad input never costs a run or money (issue #16): cache, contradictory modes, fixture usage errors, generation CLIs.

Plugin options run the pass-key eval of ``tests/passkey_api.py`` against the local Messages-API server
(``anthropic/claude-test`` through the real SDK): a good run first leaves a record in ``reports/`` and a
filled cache, then the bad run must exit with its code, print exactly one line naming the culprit,
send nothing to the server, and leave the record and the cache byte for byte as they were.
Usage errors found by fixtures run the repository's own ``evals/docs`` and ``evals/qa`` in a subprocess;
generation CLIs run as ``python -m ...`` subprocesses against the server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.server import FaultPlan, MessagesServer
from tests.conftest import golden_runner
from tests.golden import GoldenCopy, output, snapshot
from tests.passkey_api import EVAL, MODEL, SECRET, passkey

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "fixtures" / "docs"
TRIALS = 4  # 2 cells x 2 samples
GOOD = ("--longctx-samples", "2", "--longctx-prefetch", "off")


@dataclass(kw_only=True)
class Project(GoldenCopy):
    """The pass-key project after one good run: a record in ``reports/``, a filled cache, a server."""

    server: MessagesServer

    def run(self, *args: str) -> Any:
        self.server.reset_stats()
        return self.runner.run(*args, model=MODEL, report_dir="reports", cache=True)

    def assert_untouched(self) -> None:
        super().assert_untouched()
        assert self.server.stats.endpoints == {}  # not one request, count or batch reached the server


#: The server every test of the module asks, and the folder of the golden good run.
GoodRun = tuple[MessagesServer, Path]


@pytest.fixture(scope="module")
def good_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GoodRun]:
    """The module's golden good run (its folder holds ``reports/`` and ``cache/``) and the server every test asks."""
    with MessagesServer(passkey) as srv:
        env = {"ANTHROPIC_BASE_URL": srv.base_url, "ANTHROPIC_API_KEY": SECRET}
        with golden_runner(request, tmp_path_factory, env) as runner:
            runner.pytester.makepyfile(test_eval=EVAL)
            good = runner.run(*GOOD, model=MODEL, report_dir="reports", cache=True)
            assert good.ret == 0, output(good)
            assert good.record["usage"]["calls"] == TRIALS
        yield srv, runner.pytester.path


@pytest.fixture
def project(runner: Any, good_run: GoodRun, monkeypatch: pytest.MonkeyPatch) -> Project:
    """This test's copy of the project after the good run: its record and report, its cache."""
    srv, folder = good_run
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    proj = Project(runner=runner, server=srv)
    proj.copy(folder)
    (proj.path / "afile").write_text("a file, not a folder\n")
    assert len(proj.cache) == TRIALS
    return proj


#: (id, arguments, the one line's text); ``{p}`` is the project folder. Every row exits 4 at start-up.
START_UP = [
    ("cache-dir-is-a-file", ["--longctx-cache-dir", "{p}/afile"],
     "--longctx-cache-dir: {p}/afile is a file, not a folder; pass a writable folder (or --longctx-cache off)"),
    ("cache-dir-under-a-file", ["--longctx-cache-dir", "{p}/afile/cache"],
     "--longctx-cache-dir: {p}/afile/cache cannot be created: {p}/afile is a file, not a folder"),
    ("replay-cache-dir-is-a-file", ["--longctx-cache", "replay", "--longctx-cache-dir", "{p}/afile"],
     "--longctx-cache-dir: {p}/afile is a file, not a folder"),
    ("plan-and-batch", ["--longctx-plan", "true", "--longctx-batch", "true"],
     "--longctx-batch: cannot be combined with --longctx-plan (a dry run submits nothing); drop one of them"),
    ("replay-and-batch", ["--longctx-cache", "replay", "--longctx-batch", "true"],
     "--longctx-batch: cannot be combined with --longctx-cache replay (replay never sends or submits a request)"),
    ("replay-and-prefetch-on", ["--longctx-cache", "replay", "--longctx-prefetch", "on"],
     "--longctx-prefetch on: replay sends nothing; drop --longctx-cache replay or use --longctx-prefetch off"),
    ("plan-out-without-plan", ["--longctx-plan-out", "{p}/plan.jsonl"],
     "--longctx-plan-out: {p}/plan.jsonl is only written by a dry run; add --longctx-plan true or drop "
     "--longctx-plan-out"),
    ("detect-without-plan", ["--longctx-detect", "0.03"],
     "--longctx-detect: 0.03 is a drop the plan sizes the run for, or the sequential gate clears against; add "
     "--longctx-plan true or --longctx-sequential, or drop --longctx-detect"),
    ("plan-out-is-a-folder", ["--longctx-plan", "true", "--longctx-plan-out", "{p}/reports"],
     "--longctx-plan-out: {p}/reports is a folder; pass a file path such as plan.jsonl"),
    ("plan-out-under-a-file", ["--longctx-plan", "true", "--longctx-plan-out", "{p}/afile/plan.jsonl"],
     "--longctx-plan-out: {p}/afile is a file, not a folder; pass a writable file path"),
    ("samples-1e9", ["--longctx-samples", "1000000000"],
     "--longctx-samples: at most 10,000 trials per cell, got 1,000,000,000"),
    ("samples-1e9-as-text", ["--longctx-samples", "1e9"], "--longctx-samples: expected a whole number, got '1e9'"),
    ("fr-date-garbage", ["--longctx-fr-date", "garbage"],
     "--longctx-fr-date: expected a date YYYY-MM-DD (or a comma-separated list of them), got 'garbage'"),
    ("fr-date-not-a-day", ["--longctx-fr-date", "2024-02-30"],
     "--longctx-fr-date: '2024-02-30' is not a calendar date (expected YYYY-MM-DD)"),
    ("fr-date-list-with-a-bad-date", ["--longctx-fr-date", "2024-02-12,2024-13-01"],
     "--longctx-fr-date: '2024-13-01' is not a calendar date (expected YYYY-MM-DD)"),
]


@pytest.mark.parametrize("args, line", [r[1:] for r in START_UP], ids=[r[0] for r in START_UP])
def test_bad_option_is_one_line_exit_4_and_costs_nothing(project: Project, args: list[str], line: str) -> None:
    p = str(project.path)
    project.assert_refused(project.run(*GOOD, *(a.replace("{p}", p) for a in args)), line.replace("{p}", p))
    assert not (project.path / "plan.jsonl").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders; the file cases above cover it")
def test_read_only_cache_dir_is_a_usage_error(project: Project) -> None:
    folder = project.path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    project.assert_refused(project.run(*GOOD, "--longctx-cache-dir", str(folder)),
                           f"--longctx-cache-dir: {folder} is not writable")


def test_a_list_of_valid_dates_is_accepted(project: Project) -> None:
    run = project.run(*GOOD, "--longctx-fr-date", "2024-02-12, 2024-02-13")
    assert run.ret == 0, output(run)


def test_fully_cached_rerun_sends_nothing_and_says_so(project: Project) -> None:
    for mode in ("on", "replay"):
        run = project.run(*GOOD, "--longctx-cache", mode)
        assert run.ret == 0, output(run)
        assert run.record["usage"]["calls"] == 0 and run.record["usage"]["cache_hits"] == TRIALS
        assert f"usage: {TRIALS} trials, 0 requests sent, {TRIALS} answered from cache" in output(run)
        assert project.server.stats.endpoints == {}
    prefetched = project.run("--longctx-samples", "2", "--longctx-prefetch", "on")  # planned, all cached
    assert prefetched.ret == 0, output(prefetched)
    assert (prefetched.record["usage"]["calls"], prefetched.record["usage"]["cache_hits"]) == (0, TRIALS)
    assert project.server.stats.endpoints == {}


CORRUPT = {
    "not-utf8": b"\xff\xfe\x00 not text",
    "bad-json": b'{"format": 1, "completion": {"text": ',
    "missing-text": json.dumps({"format": 1, "key": "k", "completion": {"input_tokens": 1}}).encode(),
    "text-not-a-string": json.dumps({"format": 1, "completion": {"text": ["42"]}}).encode(),
}
WHY = {"not-utf8": "not UTF-8 text", "bad-json": "not JSON", "missing-text": "KeyError 'text'",
       "text-not-a-string": "completion text is not a string"}


@pytest.mark.parametrize("kind", list(CORRUPT))
def test_corrupt_entry_is_reported_once_and_refetched(project: Project, kind: str) -> None:
    entry = project.path / "cache" / sorted(project.cache)[0]
    entry.write_bytes(CORRUPT[kind])
    run = project.run(*GOOD)
    text = output(run)
    assert run.ret == 0, text
    assert text.count(f"longctx cache: corrupt entry {entry}") == 1 and WHY[kind] in text, text
    assert project.server.stats.endpoints == {"messages": 1}  # that entry only, sent again
    assert run.record["usage"]["calls"] == 1 and run.record["usage"]["cache_hits"] == TRIALS - 1
    assert {t["outcome"] for t in run.record["trials"]} == {"correct"}
    repaired = json.loads(entry.read_text(encoding="utf-8"))  # the refetched answer replaced the entry
    assert repaired["completion"]["text"] == json.loads(project.cache[sorted(project.cache)[0]])["completion"]["text"]


@pytest.mark.parametrize("kind", list(CORRUPT))
def test_corrupt_entry_in_replay_is_an_error_of_its_trial_naming_it(project: Project, kind: str) -> None:
    entry = project.path / "cache" / sorted(project.cache)[0]
    entry.write_bytes(CORRUPT[kind])
    run = project.run(*GOOD, "--longctx-cache", "replay")
    assert run.ret == 1, output(run)
    errors = [t for t in run.record["trials"] if t["outcome"] == "error"]
    assert len(errors) == 1 and f"replay mode: corrupt cache entry {entry}: " in errors[0]["error"]
    assert WHY[kind] in errors[0]["error"]
    assert sum(t["outcome"] == "correct" for t in run.record["trials"]) == TRIALS - 1
    assert project.server.stats.endpoints == {}  # replay never sends
    assert entry.read_bytes() == CORRUPT[kind]  # and never writes


@pytest.mark.parametrize("prefetch", ["off", "on"])
def test_answers_are_kept_when_the_cache_cannot_store_them(project: Project, prefetch: str) -> None:
    # every entry's shard folder becomes a file: nothing is cached, and nothing can be stored there
    cache = project.path / "cache"
    for shard in sorted({name.split("/")[0] for name in project.cache}):
        shutil.rmtree(cache / shard)
        (cache / shard).write_text("not a folder\n")
    run = project.run("--longctx-samples", "2", "--longctx-prefetch", prefetch)
    text = output(run)
    assert run.ret == 0, text
    assert {t["outcome"] for t in run.record["trials"]} == {"correct"}  # received answers were used
    assert run.record["usage"]["calls"] == TRIALS
    assert project.server.stats.endpoints == {"messages": TRIALS}
    assert text.count(f"longctx cache: cannot store answers in {cache}") == 1, text


def test_plan_out_holds_this_runs_requests_only(project: Project) -> None:
    out = project.path / "plan.jsonl"
    out.write_text('{"from": "an earlier run"}\n')
    run = project.run(*GOOD, "--longctx-cache", "off", "--longctx-plan", "true", "--longctx-plan-out", str(out))
    assert run.ret == 0, output(run)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == TRIALS and all("request" in line for line in lines)
    assert project.server.stats.endpoints == {}


# -- usage errors found inside fixtures: the repository's own evals, in a subprocess ---------------------------

def _docs(tmp: Path) -> Path:
    folder = tmp / "docs"
    shutil.copytree(DOCS, folder)
    return folder


def _qa(folder: Path) -> Path:
    return folder / "longctx-qa.jsonl"


def _no_docs(tmp: Path) -> tuple[Path, str]:
    folder = tmp / "docs"
    folder.mkdir()
    return folder, f"{folder}: no documents ("


def _not_utf8(tmp: Path) -> tuple[Path, str]:
    folder = _docs(tmp)
    (folder / "zz-latin1.txt").write_bytes("Caf\xe9 menu, pri\xe8re".encode("latin-1"))
    return folder, f"{folder / 'zz-latin1.txt'}: not UTF-8 text; save it as UTF-8 or remove it from the folder"


def _empty_doc(tmp: Path) -> tuple[Path, str]:
    folder = _docs(tmp)
    (folder / "zz-empty.md").write_text("")
    return folder, f"{folder / 'zz-empty.md'}: empty document; add text or remove the file"


def _no_qa_file(tmp: Path) -> tuple[Path, str]:
    folder = _docs(tmp)
    _qa(folder).unlink()
    return folder, f"{_qa(folder)}: no QA file; run `longctx-docs generate {folder} --model SPEC`"


def _qa_bad_json(tmp: Path) -> tuple[Path, str]:
    folder = _docs(tmp)
    _qa(folder).write_text('{"doc": "aurora-hp9-faq.md", "question": \n' + _qa(folder).read_text())
    return folder, f"{_qa(folder)}:1: invalid JSON"


def _qa_missing_fields(tmp: Path) -> tuple[Path, str]:
    folder = _docs(tmp)
    _qa(folder).write_text(_qa(folder).read_text() + '{"doc": "aurora-hp9-faq.md"}\n')
    lines = len(_qa(folder).read_text().splitlines())
    return folder, f"{_qa(folder)}:{lines}: missing field(s) question, answer"


def _qa_bad_status(tmp: Path) -> tuple[Path, str]:
    folder = _docs(tmp)
    first, *rest = _qa(folder).read_text().splitlines()
    item = {**json.loads(first), "status": "maybe"}
    _qa(folder).write_text("\n".join([json.dumps(item), *rest]) + "\n")
    return folder, f"{_qa(folder)}:1: status 'maybe' is not one of"


def _no_approved(tmp: Path) -> tuple[Path, str]:
    folder = _docs(tmp)
    _qa(folder).write_text(_qa(folder).read_text().replace('"approved"', '"pending"'))
    return folder, f"{_qa(folder)}: no approved QA items"


def _one_document(tmp: Path) -> tuple[Path, str]:
    folder = _docs(tmp)
    keep = "aurora-hp9-faq.md"
    for doc in folder.iterdir():
        if doc.suffix in (".md", ".txt") and doc.name != keep:
            doc.unlink()
    items = [line for line in _qa(folder).read_text().splitlines() if f'"{keep}"' in line]
    _qa(folder).write_text("\n".join(items) + "\n")
    return folder, f"{folder}: one document only; the docs experiment needs others as distractors"


FIXTURE_ROWS = {"no-documents": _no_docs, "document-not-utf8": _not_utf8, "empty-document": _empty_doc,
                "no-qa-file": _no_qa_file, "qa-file-bad-json": _qa_bad_json,
                "qa-item-missing-fields": _qa_missing_fields,
                "qa-item-bad-status": _qa_bad_status, "no-approved-items": _no_approved,
                "one-document-only": _one_document}
PREVIOUS = b'{"schema": "pytest-longctx/run", "a previous run": true}\n'


def run_evals(tmp: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``pytest evals/...`` of this repository with a report dir holding a previous record; nothing may replace it."""
    reports = tmp / "reports"
    reports.mkdir(exist_ok=True)
    (reports / "longctx.json").write_bytes(PREVIOUS)
    proc = subprocess.run([sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider",
                           "--longctx-model", "fake/perfect", "--longctx-samples", "1",
                           "--longctx-report-dir", str(reports), "--longctx-cache-dir", str(tmp / "cache")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    assert (reports / "longctx.json").read_bytes() == PREVIOUS  # not replaced, not moved to history
    assert sorted(reports.iterdir()) == [reports / "longctx.json"]
    return proc.returncode, proc.stdout + proc.stderr


def run_evals_in_process(pytester: pytest.Pytester, tmp: Path, evals: str, *args: str) -> tuple[int, str]:
    """:func:`run_evals` in this process (no xdist: the fast tier), with the same checks of the report dir."""
    reports = tmp / "reports"
    reports.mkdir(exist_ok=True)
    (reports / "longctx.json").write_bytes(PREVIOUS)
    result = pytester.runpytest_inprocess(
        str(ROOT / evals), *args, "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--longctx-model", "fake/perfect",
        "--longctx-samples", "1", "--longctx-report-dir", str(reports), "--longctx-cache-dir", str(tmp / "cache"))
    assert (reports / "longctx.json").read_bytes() == PREVIOUS  # not replaced, not moved to history
    assert sorted(reports.iterdir()) == [reports / "longctx.json"]
    return int(result.ret), result.stdout.str() + "\n" + result.stderr.str()


@pytest.mark.parametrize("make", list(FIXTURE_ROWS.values()), ids=list(FIXTURE_ROWS))
def test_docs_folder_errors_exit_4_once_and_keep_the_record(pytester: pytest.Pytester, tmp_path: Path,
                                                            make: Any) -> None:
    folder, line = make(tmp_path)
    rc, text = run_evals_in_process(pytester, tmp_path, "evals/docs", "--longctx-docs", str(folder))
    assert rc == 4, text
    assert text.count(line) == 1 and f"ERROR: {line}" in text, text
    assert "Traceback" not in text and "Interrupted" not in text


@pytest.mark.e2e
def test_fixture_usage_error_under_xdist_exits_4_once(tmp_path: Path) -> None:
    folder, line = _no_approved(tmp_path)
    rc, text = run_evals(tmp_path, "evals/docs", "--longctx-docs", str(folder), "-n", "2")
    assert rc == 4, text
    assert text.count(line) == 1 and "Traceback" not in text


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "n2"])
def test_missing_corpus_skips_the_experiment_with_one_line_and_no_download(tmp_path: Path, xdist: list[str]) -> None:
    empty = tmp_path / "no-corpora"
    empty.mkdir()
    # an unreachable proxy: a download attempt would fail at once, as without a network (none is made)
    env = {"LONGCTX_DATA_DIR": str(empty), "https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
    rc, text = run_evals(tmp_path, "evals/qa/test_qa.py", "--longctx-fr-date", "2023-01-03", *xdist, env=env)
    assert rc == 5, text  # every test of the selection needs the missing issue: none collected, no record
    line = ("qa, qa-baseline, qa-control not run: Federal Register 2023-01-03 "
            f"(federal_register_2023-01-03/FR-2023-01-03.xml) not found in $LONGCTX_DATA_DIR={empty} or the cache "
            f"{tmp_path / 'cache' / 'corpora'}; get it with `")
    assert text.count(line) == 1 and "fetch qa:2023-01-03`" in text and "Traceback" not in text, text
    assert not (tmp_path / "cache" / "corpora").exists()  # no download was attempted


def test_fr_date_garbage_is_checked_before_any_download(tmp_path: Path) -> None:
    rc, text = run_evals(tmp_path, "evals/qa/test_qa.py", "--longctx-fr-date", "garbage",
                         env={"https_proxy": "http://127.0.0.1:9"})
    assert rc == 4 and text.count("--longctx-fr-date: expected a date YYYY-MM-DD") == 1, text
    assert not (tmp_path / "cache" / "corpora").exists()  # no download was attempted


# -- generation CLIs -----------------------------------------------------------------------------------------

def cli(*args: str, server: MessagesServer | None, key: str | None = SECRET, cwd: Path = ROOT) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    if key is not None:
        env["ANTHROPIC_API_KEY"] = key
    if server is not None:
        env["ANTHROPIC_BASE_URL"] = server.base_url
    proc = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def pairs(body: dict[str, Any]) -> str:
    return json.dumps([{"question": "What is the document's name?", "answer": "its name"}])


@pytest.fixture
def server() -> Any:
    srv = MessagesServer(pairs).start()
    yield srv
    srv.stop()


def _one_line(text: str, line: str) -> None:
    assert text.count(line) == 1, text
    assert "Traceback" not in text and "TypeError" not in text and ".tmp" not in text, text


def test_docs_generate_without_a_key_is_one_line(tmp_path: Path, server: MessagesServer) -> None:
    folder = _docs(tmp_path)
    _qa(folder).unlink()
    rc, text = cli("pytest_longctx.experiments.docs", "generate", str(folder), "--model", MODEL, "--no-cache",
                   server=server, key=None)
    assert rc == 2
    _one_line(text, "error: ANTHROPIC_API_KEY is not set: export your Anthropic API key to generate with "
                    "anthropic/claude-test")
    assert server.stats.endpoints == {} and not _qa(folder).exists()


@pytest.mark.parametrize("sticky", ["auth", "spend-limit"])
def test_docs_generate_stops_at_once_on_a_fatal_error_and_keeps_what_finished(tmp_path: Path, sticky: str) -> None:
    folder = _docs(tmp_path)
    _qa(folder).unlink()
    box: dict[str, Any] = {"answered": 0}

    def answer_three_then_fail(body: dict[str, Any]) -> str:
        box["answered"] += 1
        if box["answered"] == 3:
            box["srv"].set_faults(FaultPlan(sticky=sticky))  # from the next request on
        return pairs(body)

    srv = box["srv"] = MessagesServer(answer_three_then_fail).start()
    try:
        rc, text = cli("pytest_longctx.experiments.docs", "generate", str(folder), "--model", MODEL, "--no-cache",
                       "--concurrency", "1", server=srv)
        sent = srv.stats.endpoints.get("messages", 0)
    finally:
        srv.stop()
    assert rc == 2, text
    assert text.count("stopping the run") == 1 and text.count("error: anthropic:") == 1, text
    assert "3 document(s) finished before it are saved" in text
    assert sent == 4  # three answered, the fourth failed, nothing after it
    saved = [json.loads(line) for line in _qa(folder).read_text().splitlines()]
    assert len({item["doc"] for item in saved}) == 3 and {item["status"] for item in saved} == {"pending"}


@pytest.mark.parametrize("target, line", [
    ("{t}/missing/qa.jsonl", "error: --qa-file: {t}/missing/qa.jsonl: folder {t}/missing does not exist; create it "
                             "or pass another path"),
    ("{t}", "error: --qa-file: {t} is a folder; pass a file path such as {t}/longctx-qa.jsonl"),
    ("{t}/afile/qa.jsonl", "error: --qa-file: {t}/afile/qa.jsonl: folder {t}/afile is a file, not a folder"),
], ids=["missing-folder", "a-folder", "under-a-file"])
def test_docs_generate_checks_the_qa_file_before_generating(tmp_path: Path, server: MessagesServer, target: str,
                                                            line: str) -> None:
    folder = _docs(tmp_path)
    (tmp_path / "afile").write_text("x")
    before = snapshot(folder)
    rc, text = cli("pytest_longctx.experiments.docs", "generate", str(folder), "--model", MODEL, "--no-cache",
                   "--qa-file", target.format(t=tmp_path), server=server)
    assert rc == 2
    _one_line(text, line.format(t=tmp_path))
    assert server.stats.endpoints == {} and snapshot(folder) == before


def test_qa_generate_without_a_key_is_one_line(tmp_path: Path, server: MessagesServer) -> None:
    rc, text = cli("pytest_longctx.experiments.qa", "generate", "--date", "2024-02-12", "--model", MODEL,
                   "--out", str(tmp_path / "q.jsonl"), server=server, key=None)
    assert rc == 2
    _one_line(text, "error: ANTHROPIC_API_KEY is not set: export your Anthropic API key to generate questions")
    assert server.stats.endpoints == {}


@pytest.mark.parametrize("sticky", ["auth", "spend-limit"])
def test_qa_generate_stops_at_once_on_a_fatal_error(tmp_path: Path, sticky: str, fr_data_dir: str) -> None:
    srv = MessagesServer(pairs, faults=FaultPlan(sticky=sticky)).start()
    try:
        rc, text = cli("pytest_longctx.experiments.qa", "generate", "--date", "2024-02-12", "--data-dir", fr_data_dir,
                       "--model", MODEL, "--sections", "6", "--concurrency", "1", "--no-cache",
                       "--out", str(tmp_path / "q.jsonl"), server=srv)
        sent = srv.stats.endpoints.get("messages", 0)
    finally:
        srv.stop()
    assert rc == 2, text
    assert text.count("stopping the run") == 1, text
    assert sent == 1  # one at a time: the first answer stopped the run


@pytest.mark.parametrize("target, line", [
    ("{t}", "error: --out: {t} is a folder"),
    ("{t}/afile/q.jsonl", "error: --out: {t}/afile/q.jsonl: folder {t}/afile is a file, not a folder"),
], ids=["a-folder", "under-a-file"])
def test_qa_generate_checks_its_output_before_generating(tmp_path: Path, server: MessagesServer, target: str,
                                                         line: str) -> None:
    (tmp_path / "afile").write_text("x")
    # The output is checked before the corpus is read: no data dir needed.
    rc, text = cli("pytest_longctx.experiments.qa", "generate", "--date", "2024-02-12", "--data-dir", str(tmp_path),
                   "--model", MODEL, "--out", target.format(t=tmp_path), server=server)
    assert rc == 2
    _one_line(text, line.format(t=tmp_path))
    assert server.stats.endpoints == {}


def test_replay_with_exact_tokens_counts_from_the_cache_only(runner: Any, api: Any) -> None:
    srv = api()
    ask = "    answer = await longctx.ask(request)"
    counting = EVAL.replace(ask, "    longctx.record(tokens=longctx.count_tokens(text))\n" + ask)
    assert counting != EVAL
    runner.pytester.makepyfile(test_eval=counting)
    exact = (*GOOD, "--longctx-exact-tokens", "true")
    good = runner.run(*exact, model=MODEL, cache=True)
    assert good.ret == 0 and srv.stats.endpoints.get("count_tokens", 0) > 0, output(good)
    srv.reset_stats()
    replay = runner.run(*exact, "--longctx-cache", "replay", model=MODEL, cache=True)
    assert replay.ret == 0 and replay.record["usage"]["cache_hits"] == TRIALS, output(replay)
    shutil.rmtree(runner.pytester.path / "cache" / "token-counts")
    missing = runner.run(*exact, "--longctx-cache", "replay", model=MODEL, cache=True)
    assert missing.ret == 1, output(missing)
    assert all("replay mode: no cached token count" in t["error"] for t in missing.record["trials"])
    assert srv.stats.endpoints == {}  # neither replay sent a message or a token count
