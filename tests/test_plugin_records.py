"""The run record on disk: schema, the numbered history of earlier runs, and seeded prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_longctx.reporting.writer import archive_previous, write_reports

PROMPTS = '''
import hashlib

import pytest

from pytest_longctx import Oracle, Request

pytestmark = pytest.mark.longctx("seeded")


@pytest.mark.parametrize("size", [3, 12])
async def test_prompt(longctx, size):
    needle = longctx.rng.randrange(10**9)
    haystack = [f"line {longctx.rng.randrange(10**6)}" for _ in range(size)]
    haystack.insert(longctx.rng.randrange(size + 1), f"the needle is {needle}")
    prompt = "\\n".join(haystack) + "\\nWhat is the needle?"
    longctx.record(prompt_sha=hashlib.sha256(prompt.encode()).hexdigest(), tokens=longctx.count_tokens(prompt))
    answer = await longctx.ask(Request.user(prompt, max_tokens=8, template="needle@1"), oracle=Oracle(str(needle)))
    longctx.record(expected=needle, answer=answer, item=f"needle-{size}")
    assert answer == str(needle)
'''


def _record(n: int) -> dict[str, Any]:
    return {"schema": "pytest-longctx/run", "version": 1, "n": n, "cells": [{"key": f"c{n}"}]}


def test_history_numbering(tmp_path: Path) -> None:
    assert archive_previous(tmp_path) is None  # nothing to archive yet
    for n in range(1, 4):
        written = write_reports(_record(n), tmp_path)
        assert written == [str(tmp_path / "longctx.json"), str(tmp_path / "longctx.html")]
    history = tmp_path / "history"
    assert sorted(p.name for p in history.iterdir()) == ["0001.json", "0002.json"]
    assert json.loads((history / "0001.json").read_text(encoding="utf-8"))["n"] == 1
    assert json.loads((history / "0002.json").read_text(encoding="utf-8"))["n"] == 2
    assert json.loads((tmp_path / "longctx.json").read_text(encoding="utf-8"))["n"] == 3
    assert (tmp_path / "longctx.html").read_text(encoding="utf-8").startswith("<!doctype html>")
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_history_continues_after_the_highest_number(tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    for name in ("0007.json", "0003.json", "notes.txt", "0009.json.bak", "latest.json"):
        (history / name).write_text("{}", encoding="utf-8")
    (tmp_path / "longctx.json").write_text(json.dumps(_record(1)), encoding="utf-8")
    assert archive_previous(tmp_path) == history / "0008.json"
    assert not (tmp_path / "longctx.json").exists()
    (tmp_path / "longctx.json").write_text(json.dumps(_record(2)), encoding="utf-8")
    assert archive_previous(tmp_path) == history / "0009.json"
    assert json.loads((history / "0009.json").read_text(encoding="utf-8"))["n"] == 2


def test_history_beyond_four_digits(tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    (history / "9999.json").write_text("{}", encoding="utf-8")
    (tmp_path / "longctx.json").write_text("{}", encoding="utf-8")
    assert archive_previous(tmp_path) == history / "10000.json"
    (tmp_path / "longctx.json").write_text("{}", encoding="utf-8")
    assert archive_previous(tmp_path) == history / "10001.json"


def test_record_schema_and_history_from_runs(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_prompts=PROMPTS)
    first = longctx_runner.run("--longctx-samples", "2", "--longctx-seed", "11", report_dir="reports")
    assert first.ret == 0
    record = first.record
    assert (record["schema"], record["version"]) == ("pytest-longctx/run", 3)
    assert set(record) >= {"schema", "version", "settings", "fixtures", "cells", "trials", "usage", "stopped",
                           "comparison", "gate"}
    settings = record["settings"]
    assert set(settings) >= {"model", "provider", "seed", "samples", "cache", "max_concurrency", "context_window",
                             "thresholds", "compare", "plugin_version", "pytest_version", "python", "git_commit",
                             "started", "finished", "duration_s", "workers", "tokenizers"}
    assert (settings["model"], settings["provider"]) == ("fake/perfect", "fake")
    assert (settings["seed"], settings["samples"]) == (11, 2)
    assert (settings["cache"], settings["workers"], settings["thresholds"]) == ("off", 1, [])
    assert record["gate"] == {"status": "none", "errors": [], "thresholds": [], "exit_code": 0, "checks": [],
                              "alpha": 0.05, "counts": {"pass": 0, "fail": 0, "too-few": 0, "error": 0},
                              "errored_trials": 0, "run_exit_code": 0}
    assert {t["cluster"] for t in record["trials"]} == {f"seeded|trial:{t['nodeid']}#{t['sample']}"
                                                       for t in record["trials"]}
    assert [c["key"] for c in record["cells"]] == ['seeded{"size":3}', 'seeded{"size":12}']
    trial = next(t for t in record["trials"] if t["params"] == {"size": 12} and t["sample"] == 1)
    assert trial["nodeid"] == "test_prompts.py::test_prompt[12-s1]"
    assert trial["item"] == "needle-12" and trial["answer"] == str(trial["expected"])
    assert trial["detail"]["tokens"] > 0 and trial["outcome"] == "correct"
    ledger = {k: record["usage"].pop(k) for k in ("ledger", "answered", "failed", "abandoned", "refused",
                                                  "sent_input_tokens", "usd", "abandoned_usd", "models", "prices")}
    assert ledger["ledger"] is True and ledger["answered"] == 4 and ledger["usd"] == 0.0  # the ledger's count
    assert record["usage"] == {"trials": 4, "calls": 4, "cache_hits": 0,
                               "input_tokens": sum(t["input_tokens"] for t in record["trials"]),
                               "output_tokens": sum(t["output_tokens"] for t in record["trials"]),
                               "paid_input_tokens": sum(t["input_tokens"] for t in record["trials"]),
                               "paid_output_tokens": sum(t["output_tokens"] for t in record["trials"]),
                               "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "unread": 0,
                               "billed_input_tokens": sum(t["input_tokens"] for t in record["trials"])}

    second = longctx_runner.run("--longctx-samples", "2", "--longctx-seed", "11", report_dir="reports")
    archived = json.loads((first.report_dir / "history" / "0001.json").read_text(encoding="utf-8"))
    assert archived["settings"]["started"] == settings["started"]
    assert archived["trials"] == record["trials"]
    # Same seed and model: byte-identical prompts (the sha256 each trial recorded) and seeds.
    assert [(t["nodeid"], t["seed"], t["detail"]) for t in second.record["trials"]] == \
        [(t["nodeid"], t["seed"], t["detail"]) for t in record["trials"]]

    other_seed = longctx_runner.run("--longctx-samples", "2", "--longctx-seed", "12", report_dir="reports")
    shas = {t["detail"]["prompt_sha"] for t in record["trials"]}
    assert shas.isdisjoint(t["detail"]["prompt_sha"] for t in other_seed.record["trials"])
    assert sorted(p.name for p in (first.report_dir / "history").iterdir()) == ["0001.json", "0002.json"]


def test_no_record_when_no_trial_ran(longctx_runner: Any) -> None:
    longctx_runner.pytester.makepyfile(test_plain="def test_ordinary():\n    assert True\n")
    run = longctx_runner.run()
    assert run.ret == pytest.ExitCode.OK
    assert not run.report_dir.exists()  # a project's ordinary tests leave no longctx report
